// i8_gated_residual.cu — the fusion sd.linear_i8.v1 -> MUL(., gate[N]) -> ADD(residual, .), and
// sd.linear_i8.v1 -> ADD(residual, .), on CUDA (the Krea2 block's wo and mlp_down epilogues): the
// cuBLAS INT8 GEMM of int8.cu with its epilogue extended by y = y * gate[o], then
// y = residual[r, o] + y, each rounded separately in FP32 like the native MUL and ADD, so the
// linear's output and the product are never written. The same chains as the CPU and Vulkan rules
// (sd_chain matchers). Overlapping outputs go through the workspace, except an exact in-place
// residual (int8.cu's linear_run).
//
// A graph-delay rule (the optimize callback) gathers a chain whose nodes are split by independent
// work (e.g. the gate produced after the GEMM), before fusion matching.
//
// Not here (spec, "i8_gated_residual.cu"): the optional Scale and Concat steps and the CUTLASS
// Stream-K GEMM; without CUTLASS the cuBLAS GEMM is the only path.

#include "cuda_kernels.h"
#include "../graph_gather.h"

#include "../chain_match.h"
#include "../ggml_extensions.h"
#include "../kernel_desc.h"

#include <vector>

namespace SD_CUDA_NAMESPACE {

namespace {

struct epilogue_chain {
    const ggml_tensor *lin = nullptr, *gate = nullptr, *residual = nullptr;
};

// n: the linear, [the MUL,] the ADD; dev nullptr at execution (the match already checked it).
bool chain_of(ggml_backend_dev_t dev, const ggml_tensor * const * n, int count, epilogue_chain & c) {
    c     = epilogue_chain{};
    c.lin = n[0];
    if (ggml_ext_get_op(n[0]) != sd_op_linear_i8() || (dev && !linear_node_supported(dev, n[0]))) return false;
    if (count == 3) {
        c.gate = sd_chain::gate_of(n[1], n[0]);
        if (!c.gate || c.gate == n[0] || !aligned_to(c.gate, 4)) return false;
    }
    c.residual = sd_chain::residual_of(n[count - 1], n[count - 2]);
    if (!c.residual || c.residual == n[0] || c.residual == n[1] || !aligned_to(c.residual, 4)) return false;
    return aligned_to(n[count - 1], 4);
}

int epilogue_match(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, void *) {
    if (!fusion_enabled()) return 0;
    return sd_graph::match_linear_epilogue(graph, first, [dev](const ggml_tensor * const * n, int count) {
        epilogue_chain c;
        return chain_of(dev, n, count, c);
    });
}

// Graph-delay rule: each linear whose sole reader is a MUL(gate) whose sole reader is the ADD
// (or whose sole reader is the ADD) is gathered so epilogue_match sees the chain consecutive.
void epilogue_optimize(ggml_backend_dev_t dev, ggml_cgraph * g, void *) {
    if (!fusion_enabled()) return;
    sd_graph::gather_linear_epilogues(g, sd_op_linear_i8(), [dev](const ggml_tensor * const * n, int count) {
        epilogue_chain c;
        return chain_of(dev, n, count, c);
    });
}

ggml_status epilogue_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    epilogue_chain c;
    if ((nodes->n_nodes != 2 && nodes->n_nodes != 3) || !chain_of(nullptr, nodes->nodes, nodes->n_nodes, c))
        return GGML_STATUS_FAILED;
    *state = nullptr;
    *ws    = linear_workspace_bytes(c.lin);
    return GGML_STATUS_SUCCESS;
}

ggml_status epilogue_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                             void *) {
    epilogue_chain c;
    if ((nodes->n_nodes != 2 && nodes->n_nodes != 3) || !chain_of(nullptr, nodes->nodes, nodes->n_nodes, c))
        return GGML_STATUS_FAILED;
    return linear_run(backend, c.lin, nodes->nodes[nodes->n_nodes - 1], c.gate, c.residual, ws, ws_bytes);
}

} // namespace

bool register_gated_residual(ggml_backend_dev_t dev) {
    using namespace sd_kernels;
    ggml_ext_kernel_desc d = fusion_rule(SD_CUDA_KERNEL_LINEAR_I8_GATE_RES, epilogue_match, epilogue_optimize,
                                         epilogue_prepare, epilogue_execute);
    d.priority = 10; // considered before the FP32 Mul -> Add rule (affine.cu)
    return register_all(dev, &d, 1, "sd cuda int8 gate/residual");
}

} // namespace SD_CUDA_NAMESPACE
