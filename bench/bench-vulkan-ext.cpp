// bench-vulkan-ext: what the Vulkan execution services (ggml-ext-vulkan.h) cost, on the first
// Vulkan device, all measured in this run. A chain of F fragments, each a native ADD followed by
// y = x * a + b, where the second op is either
//   native:    ggml_scale_bias (the backend's own shader)                      [baseline]
//   extension: a custom operator whose Vulkan kernel dispatches application SPIR-V
//              (tests/vulkan-ext/axpb.comp) through ggml_ext_vulkan_v1
// and the extension chain runs either batched (scheduler: native fragments and extension
// dispatches in one submission) or per fragment (direct ggml_backend_graph_compute: one
// submission per fragment, waited for). Ratios: extension batched vs native (the cost of the
// service path) and per-fragment vs batched (what batching saves).

#include "bench-util.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext-vulkan.h"
#include "ggml-ext.h"
#include "ggml-vulkan.h"
#include "ggml.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

const uint32_t k_axpb_spv[] = {
#include "axpb.spv.inc"
};

const ggml_ext_vulkan_v1 * g_vk_api = nullptr;

struct axpb_attrs {
    float a, b;
};

bool axpb_infer(const ggml_tensor * const * src, int n_src, const void *, ggml_type * type, int64_t ne[GGML_MAX_DIMS],
                char * err, size_t err_size, void *) {
    if (n_src != 1 || src[0]->type != GGML_TYPE_F32 || !ggml_is_contiguous(src[0])) {
        snprintf(err, err_size, "one contiguous F32 input");
        return false;
    }
    *type = GGML_TYPE_F32;
    for (int d = 0; d < GGML_MAX_DIMS; d++) ne[d] = src[0]->ne[d];
    return true;
}

bool axpb_supports(ggml_backend_dev_t, const ggml_tensor *, void *) { return true; }

ggml_status axpb_execute(ggml_backend_t be, const ggml_ext_nodes * nodes, void *, void *, size_t, void *) {
    ggml_tensor * out = nodes->nodes[nodes->n_nodes - 1];
    axpb_attrs    at;
    ggml_ext_get_attrs(out, &at, sizeof(at));
    const uint32_t          n  = (uint32_t) ggml_nelements(out);
    ggml_ext_vulkan_binding b[2] = {};
    b[0].tensor = out->src[0];
    b[0].access = GGML_EXT_VULKAN_READ;
    b[1].tensor = out;
    b[1].access = GGML_EXT_VULKAN_WRITE;
    ggml_ext_vulkan_resolved rx{}, ry{};
    if (g_vk_api->resolve(be, &b[0], &rx) != GGML_STATUS_SUCCESS || g_vk_api->resolve(be, &b[1], &ry) != GGML_STATUS_SUCCESS) {
        return GGML_STATUS_FAILED;
    }
    uint32_t a_bits;
    memcpy(&a_bits, &at.a, 4);
    const uint32_t wg      = 256;
    const uint32_t spec[2] = {wg, a_bits};
    struct {
        uint32_t n, x_off, y_off;
        float    b;
    } pc = {n, (uint32_t) (rx.shader_offset / 4), (uint32_t) (ry.shader_offset / 4), at.b};
    ggml_ext_vulkan_dispatch d{};
    d.name                = "bench.axpb";
    d.spirv               = k_axpb_spv;
    d.spirv_size          = sizeof(k_axpb_spv);
    d.bindings            = b;
    d.n_bindings          = 2;
    d.spec_constants      = spec;
    d.n_spec_constants    = 2;
    d.push_constants      = &pc;
    d.push_constants_size = sizeof(pc);
    d.workgroups[0]       = (n + wg - 1) / wg;
    d.workgroups[1] = d.workgroups[2] = 1;
    return g_vk_api->dispatch(be, &d);
}

ggml_ext_op_t register_axpb(ggml_backend_dev_t dev) {
    ggml_ext_op_desc od{};
    od.name               = "bench.vk_axpb.v1";
    od.attr_size          = sizeof(axpb_attrs);
    od.infer              = axpb_infer;
    const ggml_ext_op_t op = ggml_ext_register_op(&od);
    ggml_ext_kernel_desc k{};
    k.name      = "bench.vk_axpb.kernel";
    k.op        = GGML_OP_CUSTOM;
    k.custom_op = op;
    k.supports  = axpb_supports;
    k.execute   = axpb_execute;
    if (op == 0 || !ggml_ext_register_kernel(dev, &k)) return 0;
    return op;
}

struct chain {
    ggml_context *        ctx = nullptr;
    ggml_context *        wctx = nullptr;
    ggml_backend_buffer_t wbuf = nullptr;
    ggml_cgraph *         gf  = nullptr;
    ggml_tensor *         out = nullptr;
    chain(ggml_backend_t vk, ggml_ext_op_t op, bool native, int64_t n, int fragments) {
        ggml_init_params wp = {4 * ggml_tensor_overhead(), nullptr, true};
        wctx                = ggml_init(wp);
        ggml_tensor * x     = ggml_new_tensor_1d(wctx, GGML_TYPE_F32, n);
        ggml_tensor * y     = ggml_new_tensor_1d(wctx, GGML_TYPE_F32, n);
        wbuf                = ggml_backend_alloc_ctx_tensors(wctx, vk); // inputs on the device: every op runs there
        std::vector<float> v(n);
        for (int64_t i = 0; i < n; i++) v[i] = (float) (i % 13) * 0.25f;
        ggml_backend_tensor_set(x, v.data(), 0, ggml_nbytes(x));
        ggml_backend_tensor_set(y, v.data(), 0, ggml_nbytes(y));
        ggml_init_params p = {(size_t) (4 * fragments + 16) * ggml_tensor_overhead() + ggml_graph_overhead_custom(4096, false),
                              nullptr, true};
        ctx                = ggml_init(p);
        ggml_tensor * cur  = x;
        for (int f = 0; f < fragments; f++) {
            cur = ggml_add(ctx, cur, y);
            if (native) {
                cur = ggml_scale_bias(ctx, cur, 0.5f, 0.25f);
            } else {
                axpb_attrs at = {0.5f, 0.25f};
                cur           = ggml_ext_op_create(ctx, op, &cur, 1, &at);
            }
        }
        out = cur;
        ggml_set_output(out);
        gf = ggml_new_graph_custom(ctx, 4096, false);
        ggml_build_forward_expand(gf, out);
    }
    ~chain() {
        ggml_free(ctx);
        ggml_backend_buffer_free(wbuf);
        ggml_free(wctx);
    }
};

} // namespace

int main(int argc, char ** argv) {
    bool smoke = false, json = false;
    int  fragments = 64, n_k = 64, threshold = 0;
    double min_time = 1.0;
    bench::arg_reader r("bench-vulkan-ext", argc, argv);
    while (r.next()) {
        if (r.flag("--smoke", smoke)) continue;
        if (r.flag("--json", json)) continue;
        if (r.int_opt("--fragments", 1, 1000, fragments)) continue;
        if (r.int_opt("--kelems", 1, 1 << 16, n_k)) continue;
        if (r.double_opt("--min-time", 0.0, 600.0, min_time)) continue;
        if (r.int_opt("--threshold", 0, 1 << 20, threshold)) continue;
        if (r.is("--help")) {
            printf("usage: bench-vulkan-ext [--smoke] [--json] [--fragments F] [--kelems K] [--min-time S] [--threshold N]\n"
                   "  F fragments (native ADD + y = a x + b) over K*1024 floats; default F=64, K=64\n"
                   "  N: submit a batched plan every N commands (ggml_backend_vk_set_submit_threshold; 0: once)\n");
            return 0;
        }
        r.unknown();
        return 2;
    }
    if (!r.ok()) return 2;
    if (smoke) {
        fragments = 4;
        n_k       = 1;
        min_time  = 0;
    }
    if (ggml_backend_vk_get_device_count() < 1) {
        fprintf(stderr, "bench-vulkan-ext: no Vulkan device\n");
        return 1;
    }
    g_vk_api = (const ggml_ext_vulkan_v1 *) ggml_backend_reg_get_proc_address(ggml_backend_vk_reg(), GGML_EXT_VULKAN_V1);
    if (!g_vk_api) {
        fprintf(stderr, "bench-vulkan-ext: the Vulkan registry offers no %s\n", GGML_EXT_VULKAN_V1);
        return 1;
    }
    ggml_backend_t vk  = ggml_backend_vk_init(0);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    const ggml_ext_op_t op = register_axpb(ggml_backend_get_device(vk));
    if (vk) ggml_backend_vk_set_submit_threshold(vk, (size_t) threshold);
    if (!vk || !cpu || op == 0) {
        fprintf(stderr, "bench-vulkan-ext: setup failed: %s\n", ggml_ext_last_error());
        return 1;
    }
    const int64_t n = (int64_t) n_k * 1024;
    const bool idle = smoke || bench::wait_idle();
    if (!idle) printf("note: the machine never got idle; timings are noisy\n");

    ggml_backend_t                    backends[2] = {vk, cpu};
    std::vector<ggml_backend_sched_t> scheds; // own the graphs' memory until the results are read
    const auto                        time_sched = [&](chain & c) {
        ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, 4096, false, true);
        scheds.push_back(s);
        if (!ggml_backend_sched_alloc_graph(s, c.gf)) {
            fprintf(stderr, "bench-vulkan-ext: allocation failed\n");
            exit(1);
        }
        return bench::time_it([&] { ggml_backend_sched_graph_compute(s, c.gf); }, smoke ? 1 : 5, min_time);
    };
    chain native(vk, op, true, n, fragments), ext(vk, op, false, n, fragments), direct(vk, op, false, n, fragments);
    const bench::timing t_native = time_sched(native);
    const bench::timing t_ext    = time_sched(ext);
    ggml_gallocr_t      ga       = ggml_gallocr_new(ggml_backend_get_default_buffer_type(vk));
    if (!ggml_gallocr_alloc_graph(ga, direct.gf)) {
        fprintf(stderr, "bench-vulkan-ext: allocation failed\n");
        return 1;
    }
    const bench::timing t_direct = bench::time_it([&] { ggml_backend_graph_compute(vk, direct.gf); }, smoke ? 1 : 5, min_time);

    // same results: the extension computes what scale_bias does (x * 0.5 + 0.25, exact here)
    std::vector<float> a(n), b(n), c(n);
    ggml_backend_tensor_get(native.out, a.data(), 0, ggml_nbytes(native.out));
    ggml_backend_tensor_get(ext.out, b.data(), 0, ggml_nbytes(ext.out));
    ggml_backend_tensor_get(direct.out, c.data(), 0, ggml_nbytes(direct.out));
    const bool same = a == b && b == c;

    char shape[64];
    snprintf(shape, sizeof shape, "%d x %lld floats", fragments, (long long) n);
    const double bytes = (double) fragments * (double) n * 4.0 * 5.0; // add: 2 reads + 1 write; axpb: 1 + 1
    bench::row rows[3];
    rows[0] = {"chain native", shape, t_native, bytes, true, "", {}, "scale_bias"};
    rows[1] = {"chain ext batched", shape, t_ext, bytes, true, "native", t_native, "ggml_ext_vulkan_v1"};
    rows[2] = {"chain ext fragments", shape, t_direct, bytes, true, "ext batched", t_ext, "direct call"};
    bench::print_table_header();
    for (const auto & row : rows) {
        bench::print_row(row);
        if (json) bench::print_json(row);
    }
    printf("results identical across the three: %s\n", same ? "yes" : "NO");
    ggml_gallocr_free(ga);
    for (ggml_backend_sched_t sc : scheds) ggml_backend_sched_free(sc);
    ggml_backend_free(vk);
    ggml_backend_free(cpu);
    return same ? 0 : 1;
}
