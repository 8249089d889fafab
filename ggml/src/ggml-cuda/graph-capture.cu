// graph-capture.cu — whole-plan CUDA Graph capture and replay: the CUDA backend's plan hooks
// (plan_begin, plan_end, ext_step_end of ggml-backend-impl.h). The decisions (warm-up, capture,
// replay, invalidation, reuse across scheduler rebuilds, the 16-plan / 256 MiB cache) and the
// error protocol are the device-independent code of backend/plan-replay-*.h, tested on the CPU;
// this file supplies their capture runtime: stream capture in this thread's mode, graph
// instantiation and launch on the backend's stream.

#include "cuda-backend.h"

#include "backend/plan-replay-hooks.h"

#include <cstdlib>
#include <new>

namespace {

// A failed runtime call here is reported to the caller as a status (never aborts): clear the
// error so the backend's next CUDA_CHECK does not trip over it, and say what happened.
bool cuda_ok(cudaError_t err, const char * what) {
    if (err == cudaSuccess) return true;
    (void) cudaGetLastError();
    GGML_LOG_ERROR("ggml-cuda: %s: %s\n", what, cudaGetErrorString(err));
    return false;
}

// cudaSetDevice only when needed: plan_end may run while this thread captures
bool make_current(int device) {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device) return true;
    return cuda_ok(cudaSetDevice(device), "cudaSetDevice");
}

cudaStream_t stream_of(const void * stream) { return static_cast<cudaStream_t>(const_cast<void *>(stream)); }

void release_graph_exec(void * handle) {
    // an executor still in flight is freed by the driver when its launches complete
    (void) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(handle));
}

struct cuda_capture_runtime final : ggml_plan_capture_runtime {
    bool stream_is_capturing(const void * stream, bool * capturing) override {
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        if (!cuda_ok(cudaStreamIsCapturing(stream_of(stream), &status), "cudaStreamIsCapturing")) return false;
        // an invalidated enclosing capture is still open: recording into it keeps its error
        *capturing = status != cudaStreamCaptureStatusNone;
        return true;
    }

    bool begin_capture(const void * stream) override {
        // thread-local: other threads' CUDA calls do not break this capture, and a forbidden
        // call on this thread (an allocation the warm-up did not make) fails it visibly
        return cuda_ok(cudaStreamBeginCapture(stream_of(stream), cudaStreamCaptureModeThreadLocal),
                       "cudaStreamBeginCapture");
    }

    bool end_capture(const void * stream, ggml_plan_executor * exec) override {
        cudaGraph_t graph = nullptr;
        if (!cuda_ok(cudaStreamEndCapture(stream_of(stream), &graph), "cudaStreamEndCapture") || graph == nullptr) {
            if (graph != nullptr) (void) cudaGraphDestroy(graph);
            return false;
        }
        cudaGraphExec_t instance = nullptr;
        const bool instantiated  = cuda_ok(cudaGraphInstantiate(&instance, graph, 0), "cudaGraphInstantiate");
        (void) cudaGraphDestroy(graph); // the executable graph does not need its template
        if (!instantiated) return false;
        *exec = ggml_plan_executor(instance, release_graph_exec);
        return true;
    }

    void abort_capture(const void * stream) override {
        cudaGraph_t graph = nullptr;
        (void) cudaStreamEndCapture(stream_of(stream), &graph);
        if (graph != nullptr) (void) cudaGraphDestroy(graph);
        (void) cudaGetLastError();
    }

    bool launch(void * executor, const void * stream) override {
        if (executor == nullptr) return false;
        return cuda_ok(cudaGraphLaunch(static_cast<cudaGraphExec_t>(executor), stream_of(stream)), "cudaGraphLaunch");
    }

    bool work_ok() override { return cuda_ok(cudaGetLastError(), "enqueued work"); }
};

// GGML_CUDA_DISABLE_GRAPHS, read once per process as upstream does.
bool graphs_disabled() {
    static const bool disabled = ggml_plan_replay_env_disables_graphs(std::getenv("GGML_CUDA_DISABLE_GRAPHS"));
    return disabled;
}

// One backend's capture state (the backend's capture_state slot points at it).
struct capture_state {
    ggml_plan_replay_session session;
    // Native scratch stays valid across replays only with stream-ordered pool allocations (they
    // become graph allocation nodes); the legacy caching pool would need cudaMalloc while
    // capturing, so such devices keep the fragment path.
    bool stable_scratch = false;
};

capture_state * state_of(const ggml_cuda_backend_view & view, bool create) {
    if (view.capture_state == nullptr) return nullptr;
    if (*view.capture_state == nullptr && create) {
        auto * st = new (std::nothrow) capture_state();
        if (st == nullptr) return nullptr;
        int pools = 0;
        st->stable_scratch =
            cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, view.device) == cudaSuccess && pools != 0;
        (void) cudaGetLastError();
        *view.capture_state = st;
    }
    return static_cast<capture_state *>(*view.capture_state);
}

} // namespace

enum ggml_backend_plan_action ggml_cuda_plan_begin(ggml_backend_t backend, const struct ggml_backend_plan_info * info) {
    ggml_cuda_backend_view view;
    if (!ggml_cuda_backend_view_of(backend, &view)) return GGML_BACKEND_PLAN_EXECUTE;
    if (!make_current(view.device)) return GGML_BACKEND_PLAN_EXECUTE;
    capture_state * st = state_of(view, true);
    if (st == nullptr) return GGML_BACKEND_PLAN_EXECUTE; // out of host memory: fragments still work

    ggml_plan_replay_env env;
    env.graphs_disabled = graphs_disabled();
    env.stable_scratch  = st->stable_scratch;
    cuda_capture_runtime runtime;
    try {
        return ggml_plan_replay_begin(st->session, runtime, info, view.stream, env);
    } catch (const std::bad_alloc &) {
        // building the key ran out of memory before any capture began
        return GGML_BACKEND_PLAN_EXECUTE;
    }
}

enum ggml_status ggml_cuda_plan_end(ggml_backend_t backend) {
    ggml_cuda_backend_view view;
    if (!ggml_cuda_backend_view_of(backend, &view)) return GGML_STATUS_FAILED;
    capture_state * st = state_of(view, false);
    if (st == nullptr) return GGML_STATUS_SUCCESS;
    if (!make_current(view.device)) return GGML_STATUS_FAILED;
    cuda_capture_runtime runtime;
    return ggml_plan_replay_end(st->session, runtime);
}

enum ggml_status ggml_cuda_ext_step_end(ggml_backend_t backend) {
    ggml_cuda_backend_view view;
    if (!ggml_cuda_backend_view_of(backend, &view)) return GGML_STATUS_FAILED;
    cuda_capture_runtime runtime;
    capture_state *      st = state_of(view, false);
    if (st == nullptr) {
        // outside any plan state the step is a fragment already queued on the stream: only its
        // launch errors remain to be reported
        return runtime.work_ok() ? GGML_STATUS_SUCCESS : GGML_STATUS_FAILED;
    }
    return ggml_plan_replay_step_end(st->session, runtime);
}

void ggml_cuda_capture_state_free(void * state) {
    // the backend synchronized its stream: no executor is in flight
    delete static_cast<capture_state *>(state);
}
