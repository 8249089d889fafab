// plan-replay-hooks.cpp — plan_begin / ext_step_end / plan_end of whole-plan replay over an
// abstract capture runtime (rules in plan-replay-hooks.h).

#include "backend/plan-replay-hooks.h"

#include <utility>

namespace {

// A capture of ours left open (plan_end never came): close it and count it as failed, so the
// stream is usable again and the plan is not captured a second time.
void drop_open_capture(ggml_plan_replay_session & session, ggml_plan_capture_runtime & runtime) {
    if (!session.capturing) return;
    runtime.abort_capture(session.capture_stream);
    session.state.capture_failed();
    session.capturing      = false;
    session.capture_stream = nullptr;
}

} // namespace

enum ggml_backend_plan_action ggml_plan_replay_begin(ggml_plan_replay_session & session,
                                                     ggml_plan_capture_runtime & runtime,
                                                     const ggml_backend_plan_info * info, const void * stream,
                                                     ggml_plan_replay_env env) {
    drop_open_capture(session, runtime);
    session.pending     = GGML_STATUS_SUCCESS;
    session.last_action = ggml_plan_replay_action::ORDINARY;
    if (info == nullptr) return GGML_BACKEND_PLAN_EXECUTE;

    if (!env.graphs_disabled && info->all_ext_capture_safe) {
        bool capturing = false;
        if (!runtime.stream_is_capturing(stream, &capturing)) {
            return GGML_BACKEND_PLAN_EXECUTE; // cannot tell: the fragment path is always correct
        }
        env.enclosing_capture = capturing;
    }

    const ggml_plan_replay_action action = session.state.begin(*info, stream, env);
    session.last_action                  = action;
    switch (action) {
        case ggml_plan_replay_action::ORDINARY:
        case ggml_plan_replay_action::WARM_UP:
        case ggml_plan_replay_action::RECORD_DIRECTLY:
            return GGML_BACKEND_PLAN_EXECUTE;
        case ggml_plan_replay_action::CAPTURE:
            if (!runtime.begin_capture(stream)) {
                // nothing was recorded or executed: run ordinarily now, never capture this plan
                session.state.capture_failed();
                session.last_action = ggml_plan_replay_action::ORDINARY;
                return GGML_BACKEND_PLAN_EXECUTE;
            }
            session.capturing      = true;
            session.capture_stream = stream;
            return GGML_BACKEND_PLAN_EXECUTE;
        case ggml_plan_replay_action::REPLAY:
            if (!runtime.launch(session.state.replay_handle(), stream)) {
                // the scheduler must not run the range instead (that would hide the error):
                // skip it and report the failure from plan_end
                session.state.replay_failed();
                session.pending = GGML_STATUS_FAILED;
            }
            return GGML_BACKEND_PLAN_REPLAYED;
    }
    return GGML_BACKEND_PLAN_EXECUTE;
}

enum ggml_status ggml_plan_replay_step_end(ggml_plan_replay_session & session, ggml_plan_capture_runtime & runtime) {
    if (runtime.work_ok()) return GGML_STATUS_SUCCESS;
    drop_open_capture(session, runtime);
    session.pending = GGML_STATUS_FAILED;
    return GGML_STATUS_FAILED;
}

enum ggml_status ggml_plan_replay_end(ggml_plan_replay_session & session, ggml_plan_capture_runtime & runtime) {
    if (!session.capturing) {
        const enum ggml_status status = session.pending;
        session.pending               = GGML_STATUS_SUCCESS;
        return status;
    }
    const void * stream    = session.capture_stream;
    session.capturing      = false;
    session.capture_stream = nullptr;
    session.pending        = GGML_STATUS_SUCCESS;

    if (!runtime.work_ok()) {
        runtime.abort_capture(stream);
        session.state.capture_failed();
        return GGML_STATUS_FAILED;
    }
    ggml_plan_executor exec;
    if (!runtime.end_capture(stream, &exec) || !exec) {
        // the captured work never ran (a capture only records): report, do not re-run it
        session.state.capture_failed();
        return GGML_STATUS_FAILED;
    }
    void * handle = exec.handle();
    session.state.capture_succeeded(std::move(exec));
    if (!runtime.launch(handle, stream)) {
        session.state.replay_failed();
        return GGML_STATUS_FAILED;
    }
    return GGML_STATUS_SUCCESS;
}
