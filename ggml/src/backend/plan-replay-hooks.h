#pragma once

// plan-replay-hooks.h — the plan-hook protocol of whole-plan device replay (plan_begin,
// ext_step_end, plan_end of ggml-backend-impl.h) over an abstract capture runtime. The CUDA
// backend supplies the runtime (ggml-cuda/graph-capture.cu: stream capture, graph instantiate
// and launch); tests supply a fake one, so the error rules are checked without a device:
//   - warm-up, ordinary and record-directly executions run as the scheduler issues them;
//   - a capture starts in plan_begin (the scheduler then records into the stream) and is
//     ended, instantiated and launched in plan_end;
//   - a failure while capturing ends the capture, is reported, and nothing is re-run;
//   - a failed launch is reported from plan_end (plan_begin cannot return a status).

#include "backend/plan-replay-cache.h"

// The device runtime: streams are opaque pointers, executors ggml_plan_executor.
class ggml_plan_capture_runtime {
  public:
    virtual ~ggml_plan_capture_runtime() = default;
    // *capturing: the stream is being captured (by anyone). false: the query itself failed.
    virtual bool stream_is_capturing(const void * stream, bool * capturing) = 0;
    // Starts capturing the stream (this thread's work only). false: not started, nothing recorded.
    virtual bool begin_capture(const void * stream) = 0;
    // Ends the capture of the stream and instantiates it. false: the capture or the
    // instantiation failed (the capture is ended either way; *exec stays empty).
    virtual bool end_capture(const void * stream, ggml_plan_executor * exec) = 0;
    // Ends the capture of the stream and throws the recording away (after a failed step).
    virtual void abort_capture(const void * stream) = 0;
    // Launches an executor on the stream. false: not launched.
    virtual bool launch(void * executor, const void * stream) = 0;
    // false: enqueued work reported an error since the last call (cudaGetLastError).
    virtual bool work_ok() = 0;
};

// One backend's replay session: the decisions and what the current execution is doing.
struct ggml_plan_replay_session {
    ggml_plan_replay_state state;
    bool                   capturing      = false;   // a capture of ours is open on capture_stream
    const void *           capture_stream = nullptr;
    enum ggml_status       pending        = GGML_STATUS_SUCCESS; // reported by plan_end
    ggml_plan_replay_action last_action   = ggml_plan_replay_action::ORDINARY; // for tests / logs
};

// plan_begin. env.enclosing_capture is filled in here from the runtime.
enum ggml_backend_plan_action ggml_plan_replay_begin(ggml_plan_replay_session & session,
                                                     ggml_plan_capture_runtime & runtime,
                                                     const ggml_backend_plan_info * info, const void * stream,
                                                     ggml_plan_replay_env env);
// ext_step_end: checks the step's work; a failure inside a capture ends the capture at once.
enum ggml_status ggml_plan_replay_step_end(ggml_plan_replay_session & session, ggml_plan_capture_runtime & runtime);
// plan_end: ends a capture and launches it, or reports what failed since plan_begin.
enum ggml_status ggml_plan_replay_end(ggml_plan_replay_session & session, ggml_plan_capture_runtime & runtime);
