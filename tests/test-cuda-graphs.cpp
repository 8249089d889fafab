// test-cuda-graphs.cpp — the CUDA backend's execution services (ggml-ext-cuda.h) and whole-plan
// CUDA Graph capture / replay through its plan hooks (ggml-cuda/graph-capture.cu) on a real
// device. The decision rules themselves are tested without a device in test-plan-replay; here a
// plan is driven the way the scheduler drives it (plan_begin, graph_compute unless REPLAYED,
// plan_end) and its results show whether the work really ran. Without a CUDA device the device
// tests skip ("no CUDA device"); the registry tests run anyway.

#include "backend/ggml-backend-impl.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "ggml-ext-cuda.h"
#include "ggml.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

template <typename T> const T * service(const char * name) {
    return static_cast<const T *>(ggml_backend_reg_get_proc_address(ggml_backend_cuda_reg(), name));
}

// =============================================================================================
// Services through the registry (no device needed)

TEST(CudaServices, every_service_table_is_found_through_the_registry_with_version_1) {
    ASSERT_NE(service<ggml_ext_cuda_context_v1>(GGML_EXT_CUDA_CONTEXT_V1), nullptr);
    ASSERT_NE(service<ggml_ext_cuda_device_v1>(GGML_EXT_CUDA_DEVICE_V1), nullptr);
    ASSERT_NE(service<ggml_ext_cuda_blas_v1>(GGML_EXT_CUDA_BLAS_V1), nullptr);
    ASSERT_NE(service<ggml_ext_gpu_device_v1>(GGML_EXT_GPU_DEVICE_V1), nullptr);
    ASSERT_NE(service<ggml_ext_gpu_context_v1>(GGML_EXT_GPU_CONTEXT_V1), nullptr);
    ASSERT_NE(service<ggml_ext_gpu_blas_v1>(GGML_EXT_GPU_BLAS_V1), nullptr);
    EXPECT_EQ(service<ggml_ext_cuda_context_v1>(GGML_EXT_CUDA_CONTEXT_V1)->version, 1u);
    EXPECT_EQ(service<ggml_ext_gpu_device_v1>(GGML_EXT_GPU_DEVICE_V1)->version, 1u);
    EXPECT_EQ(service<void>("ggml_ext_no_such_service_v1"), nullptr);
}

TEST(CudaServices, services_refuse_objects_of_other_backends) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    ggml_backend_dev_t cpu_dev = ggml_backend_get_device(cpu);

    int    device = 7;
    void * stream = nullptr;
    EXPECT_FALSE(service<ggml_ext_cuda_context_v1>(GGML_EXT_CUDA_CONTEXT_V1)->get(cpu, &device, &stream));
    EXPECT_FALSE(service<ggml_ext_cuda_context_v1>(GGML_EXT_CUDA_CONTEXT_V1)->get(nullptr, &device, &stream));
    void * blas = nullptr;
    EXPECT_FALSE(service<ggml_ext_cuda_blas_v1>(GGML_EXT_CUDA_BLAS_V1)->get(cpu, &blas));
    EXPECT_EQ(service<ggml_ext_cuda_device_v1>(GGML_EXT_CUDA_DEVICE_V1)->physical_ordinal(cpu_dev), -1);
    EXPECT_EQ(service<ggml_ext_cuda_device_v1>(GGML_EXT_CUDA_DEVICE_V1)->physical_ordinal(nullptr), -1);
    ggml_ext_gpu_device_info info;
    EXPECT_FALSE(service<ggml_ext_gpu_device_v1>(GGML_EXT_GPU_DEVICE_V1)->get_info(cpu_dev, &info));
    ggml_ext_gpu_runtime runtime = GGML_EXT_GPU_RUNTIME_NONE;
    EXPECT_FALSE(service<ggml_ext_gpu_context_v1>(GGML_EXT_GPU_CONTEXT_V1)->get(cpu, &runtime, &device, &stream));
    EXPECT_FALSE(service<ggml_ext_gpu_blas_v1>(GGML_EXT_GPU_BLAS_V1)->get(cpu, &runtime, &blas));
    ggml_backend_free(cpu);
}

// =============================================================================================
// Device tests

class CudaDevice : public ::testing::Test {
  protected:
    void SetUp() override {
        if (ggml_backend_cuda_get_device_count() == 0) GTEST_SKIP() << "no CUDA device";
        backend = ggml_backend_cuda_init(0);
        ASSERT_NE(backend, nullptr);
    }
    void TearDown() override {
        if (backend != nullptr) ggml_backend_free(backend);
    }
    ggml_backend_t backend = nullptr;
};

TEST_F(CudaDevice, services_lend_the_backends_device_stream_and_cublas_handle) {
    int    device = -1;
    void * stream = nullptr;
    ASSERT_TRUE(service<ggml_ext_cuda_context_v1>(GGML_EXT_CUDA_CONTEXT_V1)->get(backend, &device, &stream));
    EXPECT_EQ(device, service<ggml_ext_cuda_device_v1>(GGML_EXT_CUDA_DEVICE_V1)->physical_ordinal(
                          ggml_backend_get_device(backend)));
    EXPECT_NE(stream, nullptr);
    int current = -1;
    ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, device);

    void * blas = nullptr;
    ASSERT_TRUE(service<ggml_ext_cuda_blas_v1>(GGML_EXT_CUDA_BLAS_V1)->get(backend, &blas));
    EXPECT_NE(blas, nullptr);

    ggml_ext_gpu_runtime runtime = GGML_EXT_GPU_RUNTIME_NONE;
    void *               stream2 = nullptr;
    int                  device2 = -1;
    ASSERT_TRUE(service<ggml_ext_gpu_context_v1>(GGML_EXT_GPU_CONTEXT_V1)->get(backend, &runtime, &device2, &stream2));
    EXPECT_EQ(runtime, GGML_EXT_GPU_RUNTIME_CUDA);
    EXPECT_EQ(device2, device);
    EXPECT_EQ(stream2, stream);
    void * blas2 = nullptr;
    ASSERT_TRUE(service<ggml_ext_gpu_blas_v1>(GGML_EXT_GPU_BLAS_V1)->get(backend, &runtime, &blas2));
    EXPECT_EQ(blas2, blas);
}

TEST_F(CudaDevice, gpu_device_info_matches_the_runtimes_properties) {
    ggml_ext_gpu_device_info info;
    ASSERT_TRUE(service<ggml_ext_gpu_device_v1>(GGML_EXT_GPU_DEVICE_V1)->get_info(ggml_backend_get_device(backend), &info));
    cudaDeviceProp props;
    ASSERT_EQ(cudaGetDeviceProperties(&props, info.physical_ordinal), cudaSuccess);
    EXPECT_EQ(info.runtime, GGML_EXT_GPU_RUNTIME_CUDA);
    EXPECT_EQ(info.compute_capability, props.major * 10 + props.minor);
    EXPECT_EQ(info.shared_mem_per_block, props.sharedMemPerBlock);
    EXPECT_EQ(info.shared_mem_per_block_optin, props.sharedMemPerBlockOptin);
    EXPECT_EQ(info.warp_size, 32);
    EXPECT_EQ(info.multiprocessor_count, props.multiProcessorCount);
    EXPECT_EQ(info.int8_blas, info.compute_capability >= 75);
}

// e = (a + b) * b * 0.5 on the device, one native step covering the graph, marked capture-safe
// and reusable the way the scheduler marks a plan whose extensions all opt in.
struct device_plan {
    ggml_context *         ctx = nullptr;
    ggml_backend_buffer_t  buf = nullptr;
    ggml_cgraph *          graph = nullptr;
    ggml_tensor *          a = nullptr, *b = nullptr, *e = nullptr;
    ggml_backend_plan_step step{};
    ggml_backend_plan_info info{};
    int                    identity_tag = 0;

    explicit device_plan(ggml_backend_t backend, int n = 1024) {
        ggml_init_params params{ 1024 * 1024, nullptr, true };
        ctx   = ggml_init(params);
        a     = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        b     = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        e     = ggml_scale(ctx, ggml_mul(ctx, ggml_add(ctx, a, b), b), 0.5f);
        graph = ggml_new_graph(ctx);
        ggml_build_forward_expand(graph, e);
        buf = ggml_backend_alloc_ctx_tensors(ctx, backend);

        step.first                   = 0;
        step.n_nodes                 = ggml_graph_n_nodes(graph);
        info.graph                   = graph;
        info.i_start                 = 0;
        info.i_end                   = step.n_nodes;
        info.steps                   = &step;
        info.n_steps                 = 1;
        info.plan_identity           = &identity_tag;
        info.all_ext_capture_safe    = true;
        info.all_ext_replay_reusable = true;
    }
    ~device_plan() {
        if (buf != nullptr) ggml_backend_buffer_free(buf);
        if (ctx != nullptr) ggml_free(ctx);
    }
    void set_inputs(float x, float y) {
        std::vector<float> va((size_t) ggml_nelements(a), x), vb((size_t) ggml_nelements(b), y);
        ggml_backend_tensor_set(a, va.data(), 0, ggml_nbytes(a));
        ggml_backend_tensor_set(b, vb.data(), 0, ggml_nbytes(b));
    }
    // every output equals (x + y) * y * 0.5
    bool output_is(float x, float y) {
        std::vector<float> out((size_t) ggml_nelements(e));
        ggml_backend_tensor_get(e, out.data(), 0, ggml_nbytes(e));
        const float want = (x + y) * y * 0.5f;
        for (float v : out) {
            if (v != want) return false;
        }
        return true;
    }
};

// One execution the way the scheduler runs a plan.
ggml_backend_plan_action execute(ggml_backend_t backend, device_plan & p, ggml_status * end_status) {
    const ggml_backend_plan_action action = backend->iface.plan_begin(backend, &p.info);
    if (action == GGML_BACKEND_PLAN_EXECUTE) {
        EXPECT_EQ(backend->iface.graph_compute(backend, p.graph), GGML_STATUS_SUCCESS);
    }
    *end_status = backend->iface.plan_end(backend);
    ggml_backend_synchronize(backend);
    return action;
}

class CudaGraphs : public CudaDevice {
  protected:
    void SetUp() override {
        CudaDevice::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        if (backend->iface.plan_begin == nullptr) GTEST_SKIP() << "the CUDA backend has no plan hooks";
        plan = std::make_unique<device_plan>(backend);
        for (int i = 0; i < ggml_graph_n_nodes(plan->graph); i++) {
            if (!ggml_backend_supports_op(backend, ggml_graph_node(plan->graph, i))) GTEST_SKIP() << "op not on CUDA";
        }
    }
    void TearDown() override {
        plan.reset();
        CudaDevice::TearDown();
    }
    std::unique_ptr<device_plan> plan;
};

TEST_F(CudaGraphs, first_execution_warms_up_then_captures_then_replays) {
    ggml_status status;
    plan->set_inputs(1, 2);
    EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_EXECUTE); // warm-up
    EXPECT_EQ(status, GGML_STATUS_SUCCESS);
    EXPECT_TRUE(plan->output_is(1, 2));

    plan->set_inputs(3, 4);
    EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_EXECUTE); // captured, then launched
    EXPECT_EQ(status, GGML_STATUS_SUCCESS);
    EXPECT_TRUE(plan->output_is(3, 4)) << "the captured graph was not launched";

    for (float x = 5; x < 8; x++) { // contents may change between replays
        plan->set_inputs(x, 2);
        EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_REPLAYED);
        EXPECT_EQ(status, GGML_STATUS_SUCCESS);
        EXPECT_TRUE(plan->output_is(x, 2)) << "replay " << x;
    }
}

TEST_F(CudaGraphs, changing_a_tensor_address_invalidates_and_rewarms) {
    ggml_status status;
    plan->set_inputs(1, 2);
    execute(backend, *plan, &status);
    execute(backend, *plan, &status);
    ASSERT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_REPLAYED);

    // the same plan identity over tensors moved to a new buffer
    ggml_backend_buffer_t moved = ggml_backend_alloc_buffer(backend, ggml_backend_buffer_get_size(plan->buf));
    ASSERT_NE(moved, nullptr);
    const char * old_base = (const char *) ggml_backend_buffer_get_base(plan->buf);
    const char * new_base = (const char *) ggml_backend_buffer_get_base(moved);
    ggml_tensor * tensors[] = { plan->a, plan->b };
    for (int i = 0; i < ggml_graph_n_nodes(plan->graph); i++) {
        ggml_tensor * n = ggml_graph_node(plan->graph, i);
        n->data         = (void *) (new_base + ((const char *) n->data - old_base));
        n->buffer       = moved;
    }
    for (ggml_tensor * t : tensors) {
        t->data   = (void *) (new_base + ((const char *) t->data - old_base));
        t->buffer = moved;
    }
    plan->set_inputs(9, 1);
    EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_EXECUTE); // warm-up again
    EXPECT_EQ(status, GGML_STATUS_SUCCESS);
    EXPECT_TRUE(plan->output_is(9, 1));
    plan->set_inputs(2, 3);
    EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_EXECUTE); // capture
    EXPECT_TRUE(plan->output_is(2, 3));
    EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_REPLAYED);
    // the tensors go back before `moved` is freed, so the plan's destructor frees its own buffer
    for (int i = 0; i < ggml_graph_n_nodes(plan->graph); i++) {
        ggml_tensor * n = ggml_graph_node(plan->graph, i);
        n->data         = (void *) (old_base + ((const char *) n->data - new_base));
        n->buffer       = plan->buf;
    }
    for (ggml_tensor * t : tensors) {
        t->data   = (void *) (old_base + ((const char *) t->data - new_base));
        t->buffer = plan->buf;
    }
    ggml_backend_buffer_free(moved);
}

// Run by the ctest entry test-cuda-graphs-disabled with GGML_CUDA_DISABLE_GRAPHS=1 (the backend
// reads it once per process).
TEST_F(CudaGraphs, disable_graphs_env_keeps_ordinary_dispatch) {
    if (std::getenv("GGML_CUDA_DISABLE_GRAPHS") == nullptr) GTEST_SKIP() << "needs GGML_CUDA_DISABLE_GRAPHS=1";
    ggml_status status;
    for (float x = 0; x < 4; x++) {
        plan->set_inputs(x, 1);
        EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_EXECUTE);
        EXPECT_EQ(status, GGML_STATUS_SUCCESS);
        EXPECT_TRUE(plan->output_is(x, 1));
    }
}

TEST_F(CudaGraphs, reusable_plan_survives_scheduler_rebuild) {
    ggml_status status;
    plan->set_inputs(1, 2);
    execute(backend, *plan, &status);
    execute(backend, *plan, &status);
    ASSERT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_REPLAYED);
    // a rebuilt plan: new identity and step list over the same graph and addresses
    int                    new_identity = 0;
    ggml_backend_plan_step step         = plan->step;
    plan->info.steps                    = &step;
    plan->info.plan_identity            = &new_identity;
    plan->set_inputs(4, 4);
    EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_REPLAYED);
    EXPECT_EQ(status, GGML_STATUS_SUCCESS);
    EXPECT_TRUE(plan->output_is(4, 4));
    plan->info.steps = &plan->step;
}

TEST_F(CudaGraphs, enclosing_capture_records_directly_without_nested_capture) {
    int    device = -1;
    void * stream = nullptr;
    ASSERT_TRUE(service<ggml_ext_cuda_context_v1>(GGML_EXT_CUDA_CONTEXT_V1)->get(backend, &device, &stream));
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    ggml_status  status;
    plan->set_inputs(1, 1);
    execute(backend, *plan, &status); // warm-up: the application captures a warmed-up plan

    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_EQ(backend->iface.plan_begin(backend, &plan->info), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(backend->iface.graph_compute(backend, plan->graph), GGML_STATUS_SUCCESS);
    EXPECT_EQ(backend->iface.plan_end(backend), GGML_STATUS_SUCCESS);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess) << "the plan broke the enclosing capture";
    ASSERT_NE(graph, nullptr);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    plan->set_inputs(6, 2);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_TRUE(plan->output_is(6, 2)) << "the plan was not recorded into the enclosing graph";
    (void) cudaGraphExecDestroy(exec);
    (void) cudaGraphDestroy(graph);
}

TEST_F(CudaGraphs, capture_failure_propagates_without_retry) {
    int    device = -1;
    void * stream = nullptr;
    ASSERT_TRUE(service<ggml_ext_cuda_context_v1>(GGML_EXT_CUDA_CONTEXT_V1)->get(backend, &device, &stream));
    ggml_status status;
    plan->set_inputs(1, 2);
    execute(backend, *plan, &status);

    // the capturing execution: work that is illegal while capturing invalidates the capture
    ASSERT_EQ(backend->iface.plan_begin(backend, &plan->info), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(backend->iface.graph_compute(backend, plan->graph), GGML_STATUS_SUCCESS);
    EXPECT_NE(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
    EXPECT_EQ(backend->iface.plan_end(backend), GGML_STATUS_FAILED);
    ggml_backend_synchronize(backend); // the stream is usable again

    // no second capture: the plan runs as fragments, correctly
    for (float x = 2; x < 4; x++) {
        plan->set_inputs(x, 3);
        EXPECT_EQ(execute(backend, *plan, &status), GGML_BACKEND_PLAN_EXECUTE);
        EXPECT_EQ(status, GGML_STATUS_SUCCESS);
        EXPECT_TRUE(plan->output_is(x, 3));
    }
}

// =============================================================================================
// Through the scheduler: it calls the plan hooks around the CUDA split

// e = (a + b) * b * 0.5 computed by a scheduler over {CUDA, CPU}; ok: every output is right.
struct sched_graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  graph = nullptr;
    ggml_tensor *  a = nullptr, *b = nullptr, *e = nullptr;
    sched_graph() {
        ggml_init_params params{ 1024 * 1024, nullptr, true };
        ctx = ggml_init(params);
        a   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4096);
        b   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4096);
        ggml_set_input(a);
        ggml_set_input(b);
        e = ggml_scale(ctx, ggml_mul(ctx, ggml_add(ctx, a, b), b), 0.5f);
        ggml_set_output(e);
        graph = ggml_new_graph(ctx);
        ggml_build_forward_expand(graph, e);
    }
    ~sched_graph() { ggml_free(ctx); }
    bool run(ggml_backend_sched_t sched, float x, float y) {
        std::vector<float> va((size_t) ggml_nelements(a), x), vb((size_t) ggml_nelements(b), y);
        ggml_backend_tensor_set(a, va.data(), 0, ggml_nbytes(a));
        ggml_backend_tensor_set(b, vb.data(), 0, ggml_nbytes(b));
        if (ggml_backend_sched_graph_compute(sched, graph) != GGML_STATUS_SUCCESS) return false;
        std::vector<float> out((size_t) ggml_nelements(e));
        ggml_backend_tensor_get(e, out.data(), 0, ggml_nbytes(e));
        for (float v : out) {
            if (v != (x + y) * y * 0.5f) return false;
        }
        return true;
    }
};

class CudaSched : public CudaDevice {
  protected:
    void SetUp() override {
        CudaDevice::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        cpu                        = ggml_backend_cpu_init();
        ggml_backend_t backends[2] = { backend, cpu };
        sched                      = ggml_backend_sched_new(backends, nullptr, 2, 256, false, false);
        ASSERT_NE(sched, nullptr);
    }
    void TearDown() override {
        if (sched != nullptr) ggml_backend_sched_free(sched);
        if (cpu != nullptr) ggml_backend_free(cpu);
        CudaDevice::TearDown();
    }
    ggml_backend_t       cpu   = nullptr;
    ggml_backend_sched_t sched = nullptr;
};

TEST_F(CudaSched, repeated_computes_warm_up_capture_and_replay_with_new_input_contents) {
    sched_graph g;
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g.graph));
    for (int i = 0; i < 6; i++) EXPECT_TRUE(g.run(sched, (float) i, 2.0f)) << "compute " << i;
}

TEST_F(CudaSched, reusable_plan_survives_scheduler_rebuild) {
    // sd.cpp's per-step pattern: a new graph (new metadata arena) and a new plan every step
    for (int i = 0; i < 6; i++) {
        sched_graph g;
        ggml_backend_sched_reset(sched);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g.graph));
        EXPECT_TRUE(g.run(sched, (float) i, 3.0f)) << "step " << i;
        EXPECT_TRUE(g.run(sched, (float) i + 0.5f, 3.0f)) << "step " << i << ", second compute";
    }
}

} // namespace
