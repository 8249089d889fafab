// Core facts: scalar conversions, tensor metadata (permute, views, contiguity, nbytes), copy/cast
// structure, graph building (order, leaf/node split, names, flags), context sizing, custom ops.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "reference/ref.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

struct ctx_guard {
    ggml_context * ctx;
    explicit ctx_guard(size_t mem = 16 * 1024 * 1024, bool no_alloc = false) : ctx(ggml_init({mem, nullptr, no_alloc})) {}
    ~ctx_guard() { ggml_free(ctx); }
};

uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
float    from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }

// ---------------------------------------------------------------------------------------------
// fp16 / bf16

TEST(Fp16, MeasuredFacts) {
    EXPECT_EQ(ggml_fp32_to_fp16(1.0f / 3.0f), 0x3555);
    EXPECT_EQ(ggml_fp32_to_fp16(65504.0f), 0x7BFF);
    EXPECT_EQ(ggml_fp32_to_fp16(65519.0f), 0x7BFF);
    EXPECT_EQ(ggml_fp32_to_fp16(65520.0f), 0x7C00);
    EXPECT_EQ(ggml_fp32_to_fp16(6e-8f), 0x0001);
    EXPECT_EQ(ggml_fp32_to_fp16(1e-8f), 0x0000);
    EXPECT_EQ(ggml_fp32_to_fp16(std::numeric_limits<float>::quiet_NaN()), 0x7E00);
    EXPECT_EQ(ggml_fp32_to_fp16(-std::numeric_limits<float>::quiet_NaN()), 0xFE00);
    EXPECT_EQ(ggml_fp32_to_fp16(from_bits(0x7F800001u)), 0x7E00); // signalling NaN is quieted
    EXPECT_EQ(ggml_fp32_to_fp16(-INFINITY), 0xFC00);
    EXPECT_EQ(ggml_fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(ggml_fp32_to_fp16(2049.0f), 0x6800); // tie to even (down)
    EXPECT_EQ(ggml_fp32_to_fp16(2051.0f), 0x6802); // tie to even (up)
}

TEST(Fp16, RoundTripAll65536) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = ggml_fp16_to_fp32((ggml_fp16_t) h);
        const float r = ref::f16_bits_to_f32((uint16_t) h);
        const bool  nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        if (nan) {
            ASSERT_TRUE(std::isnan(f)) << std::hex << h;
            ASSERT_EQ(ggml_fp32_to_fp16(f), (h & 0x8000) | 0x7E00) << std::hex << h;
        } else {
            ASSERT_EQ(bits(f), bits(r)) << std::hex << h;
            ASSERT_EQ(ggml_fp32_to_fp16(f), h) << std::hex << h;
        }
    }
}

TEST(Fp16, RowsAndCpuConvertersMatchScalar) {
    std::mt19937                          rng(1);
    std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
    std::vector<float>                    x(4099);
    for (size_t i = 0; i < x.size(); i++) x[i] = (i % 3 == 0) ? u(rng) * 1e-9f : (i % 3 == 1 ? u(rng) : u(rng) * 1e-4f);
    std::vector<ggml_fp16_t> a(x.size()), b(x.size());
    ggml_fp32_to_fp16_row(x.data(), a.data(), (int64_t) x.size());
    ggml_cpu_fp32_to_fp16(x.data(), b.data(), (int64_t) x.size());
    for (size_t i = 0; i < x.size(); i++) {
        ASSERT_EQ(a[i], ref::f32_to_f16_bits(x[i])) << x[i];
        ASSERT_EQ(b[i], a[i]) << x[i];
    }
    std::vector<float> y(x.size()), z(x.size());
    ggml_fp16_to_fp32_row(a.data(), y.data(), (int64_t) x.size());
    ggml_cpu_fp16_to_fp32(a.data(), z.data(), (int64_t) x.size());
    for (size_t i = 0; i < x.size(); i++) {
        ASSERT_EQ(bits(y[i]), bits(ref::f16_bits_to_f32(a[i])));
        ASSERT_EQ(bits(z[i]), bits(y[i]));
    }
}

TEST(Bf16, MeasuredFacts) {
    EXPECT_EQ(ggml_fp32_to_bf16(1.0f + 1.0f / 256).bits, 0x3F80);
    EXPECT_EQ(ggml_fp32_to_bf16(1.0f + 3.0f / 256).bits, 0x3F82);
    EXPECT_EQ(ggml_fp32_to_bf16(from_bits(0x7F800001u)).bits, 0x7FC0); // quieted
    EXPECT_EQ(ggml_fp32_to_bf16(from_bits(0xFF800001u)).bits, 0xFFC0); // sign kept
    EXPECT_EQ(ggml_fp32_to_bf16(INFINITY).bits, 0x7F80);
    EXPECT_EQ(ggml_fp32_to_bf16(from_bits(0x7F7FFFFFu)).bits, 0x7F80); // overflow rounds to inf
    ggml_bf16_t h{0x4049};
    EXPECT_EQ(bits(ggml_bf16_to_fp32(h)), 0x40490000u);
}

TEST(Bf16, RowsMatchReference) {
    std::mt19937       rng(2);
    std::vector<float> x(2053);
    for (float & v : x) v = from_bits((uint32_t) rng() & 0x7FFFFFFFu) * ((rng() & 1) ? 1.0f : -1.0f);
    for (float & v : x) if (std::isnan(v) || std::fpclassify(v) == FP_SUBNORMAL) v = 1.5f;
    std::vector<ggml_bf16_t> a(x.size()), b(x.size());
    ggml_fp32_to_bf16_row_ref(x.data(), a.data(), (int64_t) x.size());
    ggml_fp32_to_bf16_row(x.data(), b.data(), (int64_t) x.size());
    for (size_t i = 0; i < x.size(); i++) {
        ASSERT_EQ(a[i].bits, ref::f32_to_bf16_bits(x[i])) << x[i];
        ASSERT_EQ(b[i].bits, a[i].bits) << x[i];
        ASSERT_EQ(ggml_fp32_to_bf16(x[i]).bits, a[i].bits);
    }
}

// ---------------------------------------------------------------------------------------------
// tensor metadata

TEST(Tensor, PermuteAxisMeaning) {
    ctx_guard     g;
    ggml_tensor * a = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, 2, 3, 4, 5);
    ggml_tensor * p = ggml_permute(g.ctx, a, 1, 2, 0, 3);
    EXPECT_EQ(p->ne[0], 4); EXPECT_EQ(p->ne[1], 2); EXPECT_EQ(p->ne[2], 3); EXPECT_EQ(p->ne[3], 5);
    // result.nb[axisK] = a.nb[K]
    EXPECT_EQ(p->nb[1], a->nb[0]); EXPECT_EQ(p->nb[2], a->nb[1]); EXPECT_EQ(p->nb[0], a->nb[2]); EXPECT_EQ(p->nb[3], a->nb[3]);
    EXPECT_EQ(p->op, GGML_OP_PERMUTE);
    EXPECT_EQ(p->view_src, a);
    EXPECT_EQ(p->src[0], a);
    EXPECT_EQ(p->data, a->data);
    EXPECT_TRUE(ggml_is_permuted(p));
    EXPECT_FALSE(ggml_is_contiguous(p));
    EXPECT_TRUE(ggml_is_contiguously_allocated(p));
    EXPECT_EQ(ggml_nbytes(p), ggml_nbytes(a)); // span of a permutation is the whole base
    ggml_tensor * t = ggml_transpose(g.ctx, a);
    EXPECT_EQ(t->ne[0], 3); EXPECT_EQ(t->ne[1], 2);
    EXPECT_TRUE(ggml_is_transposed(t));
}

TEST(Tensor, ViewChainsPointAtTheBase) {
    ctx_guard     g;
    ggml_tensor * a  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 16, 8);
    ggml_tensor * v1 = ggml_view_2d(g.ctx, a, 8, 4, a->nb[1], 2 * a->nb[1]);
    ggml_tensor * v2 = ggml_view_1d(g.ctx, v1, 4, 3 * sizeof(float));
    ggml_tensor * v3 = ggml_reshape_2d(g.ctx, ggml_cont(g.ctx, v2), 2, 2);
    EXPECT_EQ(v1->view_src, a);
    EXPECT_EQ(v2->view_src, a);
    EXPECT_EQ(v1->view_offs, 2 * a->nb[1]);
    EXPECT_EQ(v2->view_offs, 2 * a->nb[1] + 3 * sizeof(float));
    EXPECT_EQ((char *) v2->data, (char *) a->data + v2->view_offs);
    EXPECT_EQ(v2->src[0], v1);
    EXPECT_NE(v3->view_src, nullptr);
    EXPECT_EQ(v3->view_src->op, GGML_OP_CONT);
    ggml_tensor * ip = ggml_add_inplace(g.ctx, v1, v1);
    EXPECT_EQ(ip->view_src, a);
    EXPECT_EQ(ip->op, GGML_OP_ADD);
    EXPECT_EQ(ip->nb[1], v1->nb[1]);
}

TEST(Tensor, NbytesAndContiguity) {
    ctx_guard     g;
    ggml_tensor * a = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F16, 6, 5, 4, 3);
    EXPECT_EQ(ggml_nbytes(a), 6u * 5 * 4 * 3 * 2);
    EXPECT_TRUE(ggml_is_contiguous(a));
    EXPECT_TRUE(ggml_is_contiguous_1(a));
    EXPECT_TRUE(ggml_is_contiguous_rows(a));
    // padded rows: view of the first 4 of 6 elements per row
    ggml_tensor * pad = ggml_view_4d(g.ctx, a, 4, 5, 4, 3, a->nb[1], a->nb[2], a->nb[3], 0);
    EXPECT_FALSE(ggml_is_contiguous(pad));
    EXPECT_TRUE(ggml_is_contiguous_1(pad));
    EXPECT_TRUE(ggml_is_contiguous_rows(pad));
    EXPECT_FALSE(ggml_is_contiguously_allocated(pad));
    EXPECT_EQ(ggml_nbytes(pad), 2 + 3 * 2 + 4 * a->nb[1] + 3 * a->nb[2] + 2 * a->nb[3]);
    ggml_tensor * p12 = ggml_permute(g.ctx, a, 0, 2, 1, 3);
    EXPECT_FALSE(ggml_is_contiguous_1(p12));
    EXPECT_TRUE(ggml_is_contiguous_rows(p12));
    ggml_tensor * tr = ggml_transpose(g.ctx, a);
    EXPECT_FALSE(ggml_is_contiguous_rows(tr));
    EXPECT_EQ(ggml_nbytes(tr), ggml_nbytes(a));
    // dims with ne == 1 may have any stride
    ggml_tensor * one = ggml_view_3d(g.ctx, a, 6, 1, 4, 1000, 6 * 2, 0);
    EXPECT_TRUE(ggml_is_contiguous(one));
    EXPECT_EQ(ggml_n_dims(ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 1)), 1);
    EXPECT_EQ(ggml_n_dims(ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, 1, 2, 1)), 2);
    EXPECT_EQ(ggml_row_size(GGML_TYPE_Q8_0, 64), 68u);
    EXPECT_EQ(ggml_type_size(GGML_TYPE_BF16), 2u);
    EXPECT_EQ(ggml_blck_size(GGML_TYPE_Q8_0), 32);
}

TEST(TensorDeathTest, ReshapeAssertsContiguity) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            ctx_guard     g;
            ggml_tensor * a = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 3);
            ggml_reshape_2d(g.ctx, ggml_transpose(g.ctx, a), 4, 3);
        },
        "");
}

TEST(Tensor, CpyIsAViewOfDestinationAndCastRefersToItself) {
    ctx_guard     g;
    ggml_tensor * a = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 3);
    ggml_tensor * b = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F16, 6, 2);
    ggml_tensor * c = ggml_cpy(g.ctx, a, b);
    EXPECT_EQ(c->op, GGML_OP_CPY);
    EXPECT_EQ(c->view_src, b);
    EXPECT_EQ(c->src[0], a);
    EXPECT_EQ(c->src[1], b);
    EXPECT_EQ(c->data, b->data);
    EXPECT_EQ(c->type, GGML_TYPE_F16);
    ggml_tensor * k = ggml_cast(g.ctx, a, GGML_TYPE_BF16);
    EXPECT_EQ(k->op, GGML_OP_CPY);
    EXPECT_EQ(k->src[0], a);
    EXPECT_EQ(k->src[1], k);
    EXPECT_EQ(k->type, GGML_TYPE_BF16);
    ggml_tensor * r = ggml_get_rows(g.ctx, b, ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 2));
    EXPECT_EQ(r->type, GGML_TYPE_F32);
    ggml_tensor * m = ggml_mul_mat(g.ctx, ggml_new_tensor_3d(g.ctx, GGML_TYPE_F16, 8, 5, 2),
                                   ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, 8, 3, 4, 2));
    EXPECT_EQ(m->type, GGML_TYPE_F32);
    EXPECT_EQ(m->ne[0], 5); EXPECT_EQ(m->ne[1], 3); EXPECT_EQ(m->ne[2], 4); EXPECT_EQ(m->ne[3], 2);
    ggml_tensor * fa = ggml_flash_attn_ext(g.ctx, ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, 64, 7, 4, 1),
                                           ggml_new_tensor_4d(g.ctx, GGML_TYPE_F16, 64, 9, 2, 1),
                                           ggml_new_tensor_4d(g.ctx, GGML_TYPE_F16, 32, 9, 2, 1), nullptr, 0.125f, 0, 0);
    EXPECT_EQ(fa->ne[0], 32); EXPECT_EQ(fa->ne[1], 4); EXPECT_EQ(fa->ne[2], 7); EXPECT_EQ(fa->ne[3], 1);
    EXPECT_EQ(ggml_timestep_embedding(g.ctx, ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 3), 7, 10000)->ne[0], 7);
    EXPECT_EQ(ggml_arange(g.ctx, 0.0f, 1.0f, 0.1f)->ne[0], 10);
}

// ---------------------------------------------------------------------------------------------
// graphs

TEST(Graph, BuildOrderLeafsNodesNamesFlags) {
    ctx_guard     g(16 * 1024 * 1024, true);
    ggml_tensor * a = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 4);
    ggml_tensor * b = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 4);
    ggml_set_name(b, "x");
    ggml_tensor * c = ggml_add(g.ctx, a, b);
    ggml_tensor * d = ggml_mul(g.ctx, c, a);
    ggml_set_name(d, "x"); // same name as the leaf
    ggml_tensor * v = ggml_view_1d(g.ctx, d, 2, 0);
    ggml_tensor * e = ggml_sqr(g.ctx, v);

    ggml_cgraph * gr = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gr, e);
    ASSERT_EQ(ggml_graph_n_nodes(gr), 4);
    EXPECT_EQ(ggml_graph_node(gr, 0), c);
    EXPECT_EQ(ggml_graph_node(gr, 1), d);
    EXPECT_EQ(ggml_graph_node(gr, 2), v); // views are nodes
    EXPECT_EQ(ggml_graph_node(gr, 3), e);
    EXPECT_EQ(ggml_graph_node(gr, -1), e);
    EXPECT_EQ(ggml_graph_nodes(gr)[1], d);
    EXPECT_STREQ(ggml_get_name(a), "leaf_0");
    EXPECT_STREQ(ggml_get_name(c), "node_0");
    EXPECT_STREQ(ggml_get_name(e), "node_3");
    EXPECT_EQ(ggml_graph_get_tensor(gr, "x"), b); // leafs searched first
    EXPECT_EQ(ggml_graph_get_tensor(gr, "node_0"), c);
    EXPECT_EQ(ggml_graph_get_tensor(gr, "nope"), nullptr);
    for (int i = 0; i < ggml_graph_n_nodes(gr); i++) EXPECT_TRUE(ggml_graph_node(gr, i)->flags & GGML_TENSOR_FLAG_COMPUTE);
    EXPECT_FALSE(a->flags & GGML_TENSOR_FLAG_COMPUTE);
    EXPECT_FALSE(b->flags & GGML_TENSOR_FLAG_COMPUTE);

    // expanding again with an already visited tensor adds nothing; a new output appends only its new part
    ggml_build_forward_expand(gr, d);
    EXPECT_EQ(ggml_graph_n_nodes(gr), 4);
    ggml_tensor * f = ggml_add(g.ctx, c, ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 4));
    ggml_build_forward_expand(gr, f);
    EXPECT_EQ(ggml_graph_n_nodes(gr), 5);
    EXPECT_EQ(ggml_graph_node(gr, -1), f);

    // a PARAM tensor is a node, not a leaf
    ggml_tensor * p = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 4);
    ggml_set_param(p);
    ggml_build_forward_expand(gr, ggml_add(g.ctx, p, a));
    EXPECT_EQ(ggml_graph_node(gr, -2), p);

    // set_output flags the whole view chain
    ggml_set_output(v);
    EXPECT_TRUE(v->flags & GGML_TENSOR_FLAG_OUTPUT);
    EXPECT_TRUE(d->flags & GGML_TENSOR_FLAG_OUTPUT);

    ggml_graph_clear(gr);
    EXPECT_EQ(ggml_graph_n_nodes(gr), 0);
}

TEST(Graph, OverheadsSizeAContextExactly) {
    const int    n    = 100;
    const size_t size = n * ggml_tensor_overhead() + ggml_graph_overhead();
    ctx_guard    g(size, true);
    ggml_tensor * t = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 8);
    for (int i = 1; i < n; i++) t = ggml_add(g.ctx, t, t);
    ggml_cgraph * gr = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gr, t);
    EXPECT_EQ(ggml_graph_n_nodes(gr), n - 1);
    EXPECT_LE(ggml_used_mem(g.ctx), size);
    EXPECT_EQ(ggml_graph_overhead(), ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, false));
    EXPECT_GT(ggml_graph_overhead_custom(4096, false), ggml_graph_overhead());

    const size_t size2 = 10 * ggml_tensor_overhead() + ggml_graph_overhead_custom(16, false);
    ctx_guard    g2(size2, true);
    ggml_tensor * u = ggml_new_tensor_1d(g2.ctx, GGML_TYPE_F32, 8);
    for (int i = 1; i < 10; i++) u = ggml_sqr(g2.ctx, u);
    ggml_build_forward_expand(ggml_new_graph_custom(g2.ctx, 16, false), u);
}

TEST(Context, AllocatesDataAndEnumerates) {
    ctx_guard     g(1024 * 1024, false);
    ggml_tensor * a = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 3, 2);
    ASSERT_NE(a->data, nullptr);
    ggml_set_name(a, "a");
    ggml_tensor * b = ggml_dup_tensor(g.ctx, a);
    EXPECT_STREQ(ggml_get_name(b), "");
    EXPECT_EQ(ggml_get_first_tensor(g.ctx), a);
    EXPECT_EQ(ggml_get_next_tensor(g.ctx, a), b);
    EXPECT_EQ(ggml_get_tensor(g.ctx, "a"), a);
    std::string long_name(100, 'n');
    ggml_set_name(b, long_name.c_str());
    EXPECT_EQ(strlen(ggml_get_name(b)), (size_t) GGML_MAX_NAME - 1);
}

// ---------------------------------------------------------------------------------------------
// custom op threading

struct custom_probe {
    std::atomic<int> calls{0};
    std::atomic<int> mask{0};
    std::atomic<int> nth_seen{0};
};

void probe_fn(ggml_tensor * dst, int ith, int nth, void * ud) {
    auto * p = (custom_probe *) ud;
    p->calls++;
    p->mask |= 1 << ith;
    p->nth_seen = nth;
    float * d = (float *) dst->data;
    for (int64_t i = ith; i < ggml_nelements(dst); i += nth) d[i] = (float) i;
}

TEST(Custom, CallbackRunsOnAllThreads) {
    for (int n_threads : {1, 2, 4}) {
        ggml_backend_t be = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(be, n_threads);
        ctx_guard     g(1024 * 1024, true);
        custom_probe  probe;
        ggml_tensor * t = ggml_custom_4d(g.ctx, GGML_TYPE_F32, 64, 3, 1, 1, nullptr, 0, probe_fn, GGML_N_TASKS_MAX, &probe);
        ggml_cgraph * gr = ggml_new_graph(g.ctx);
        ggml_build_forward_expand(gr, t);
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(g.ctx, be);
        ASSERT_EQ(ggml_backend_graph_compute(be, gr), GGML_STATUS_SUCCESS);
        EXPECT_EQ(probe.calls.load(), n_threads);
        EXPECT_EQ(probe.nth_seen.load(), n_threads);
        EXPECT_EQ(probe.mask.load(), (1 << n_threads) - 1);
        std::vector<float> out(64 * 3);
        ggml_backend_tensor_get(t, out.data(), 0, out.size() * sizeof(float));
        for (size_t i = 0; i < out.size(); i++) ASSERT_EQ(out[i], (float) i);
        ggml_backend_buffer_free(buf);
        ggml_backend_free(be);
    }
}

// ---------------------------------------------------------------------------------------------
// empty tensors: every entry point takes them (no copy of zero bytes from or to a null pointer,
// which is undefined behaviour that UBSan reports; scripts/test.sh runs this suite under it)

TEST(EmptyTensors, BufferAndTensorApisAcceptThem) {
    ggml_backend_t be = ggml_backend_cpu_init();
    ctx_guard      g(64 * ggml_tensor_overhead(), true);
    ggml_tensor *  e0 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 0, 3);
    ggml_tensor *  e1 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 0, 3);
    ggml_tensor *  eq = ggml_new_tensor_1d(g.ctx, GGML_TYPE_Q8_0, 0);
    EXPECT_EQ(ggml_nbytes(e0), 0u);
    // a context of empty tensors only: a zero-size buffer (or none), never a crash
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(g.ctx, be);
    for (ggml_tensor * t : {e0, e1, eq}) {
        ggml_backend_tensor_set(t, nullptr, 0, 0);
        ggml_backend_tensor_get(t, nullptr, 0, 0);
        ggml_backend_tensor_memset(t, 0, 0, 0);
    }
    if (buf) {
        ggml_backend_tensor_copy(e0, e1);
        ggml_backend_buffer_clear(buf, 0);
        ggml_backend_buffer_free(buf);
    }
    // caller-owned memory of size 0
    ggml_backend_buffer_t none = ggml_backend_cpu_buffer_from_ptr(nullptr, 0);
    if (none) {
        ggml_backend_buffer_clear(none, 0);
        ggml_backend_buffer_free(none);
    }
    ggml_backend_free(be);
}

TEST(EmptyTensors, EmptyGraphsAndContexts) {
    ggml_backend_t be = ggml_backend_cpu_init();
    // a context holding only empty tensors gets no buffer; the tensors stay unallocated
    ctx_guard     ge(8 * ggml_tensor_overhead(), true);
    ggml_tensor * e = ggml_new_tensor_1d(ge.ctx, GGML_TYPE_F32, 0);
    EXPECT_EQ(ggml_backend_alloc_ctx_tensors(ge.ctx, be), nullptr);
    ggml_backend_tensor_set(e, nullptr, 0, 0);
    ggml_backend_tensor_get(e, nullptr, 0, 0);
    // a graph without nodes: allocated and computed, directly and through the scheduler
    ctx_guard      g(8 * ggml_tensor_overhead() + 2 * ggml_graph_overhead(), true);
    ggml_cgraph *  gr = ggml_new_graph(g.ctx);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
    EXPECT_TRUE(ggml_gallocr_alloc_graph(ga, gr));
    EXPECT_EQ(ggml_backend_graph_compute(be, gr), GGML_STATUS_SUCCESS);
    ggml_backend_sched_t sched = ggml_backend_sched_new(&be, nullptr, 1, 64, false, false);
    ASSERT_NE(sched, nullptr);
    EXPECT_TRUE(ggml_backend_sched_alloc_graph(sched, gr));
    EXPECT_EQ(ggml_backend_sched_graph_compute(sched, gr), GGML_STATUS_SUCCESS);
    ggml_backend_sched_free(sched);
    // an allocated context of one empty tensor (no_alloc = false)
    ctx_guard     gd(ggml_tensor_overhead(), false);
    ggml_tensor * d = ggml_new_tensor_2d(gd.ctx, GGML_TYPE_F32, 0, 7);
    EXPECT_EQ(ggml_nbytes(d), 0u);
    ggml_gallocr_free(ga);
    ggml_backend_free(be);
}

TEST(EmptyTensors, GraphsWithEmptyOperandsCompute) {
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 2);
    ctx_guard     g(256 * ggml_tensor_overhead() + ggml_graph_overhead(), true);
    ggml_tensor * x  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 3);
    ggml_tensor * e  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 0, 3); // no columns
    ggml_tensor * er = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 0); // no rows
    ggml_tensor * ei = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 0);    // no indices
    ggml_tensor * w  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F16, 4, 5);
    ggml_backend_buffer_t in = ggml_backend_alloc_ctx_tensors(g.ctx, be);
    ASSERT_NE(in, nullptr);
    const std::vector<float> xv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));

    ggml_tensor * cat0 = ggml_concat(g.ctx, x, e, 0);   // == x
    ggml_tensor * cat1 = ggml_concat(g.ctx, er, x, 1);  // == x
    ggml_tensor * mm   = ggml_mul_mat(g.ctx, w, er);    // [5, 0]
    ggml_tensor * rows = ggml_get_rows(g.ctx, x, ei);   // [4, 0]
    ggml_tensor * c16  = ggml_cast(g.ctx, e, GGML_TYPE_F16);
    ggml_tensor * ct   = ggml_cont(g.ctx, ggml_transpose(g.ctx, er));
    ggml_tensor * sum  = ggml_add(g.ctx, e, e);
    ggml_tensor * q8   = ggml_cpy(g.ctx, er, ggml_new_tensor_2d(g.ctx, GGML_TYPE_Q8_0, 32, 0));
    ggml_cgraph * gr   = ggml_new_graph(g.ctx);
    for (ggml_tensor * t : {cat0, cat1, mm, rows, c16, ct, sum, q8}) {
        ggml_set_output(t);
        ggml_build_forward_expand(gr, t);
    }
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
    ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gr));
    ASSERT_EQ(ggml_backend_graph_compute(be, gr), GGML_STATUS_SUCCESS);

    std::vector<float> out(12);
    for (ggml_tensor * t : {cat0, cat1}) {
        ASSERT_EQ(ggml_nelements(t), 12);
        ggml_backend_tensor_get(t, out.data(), 0, out.size() * sizeof(float));
        EXPECT_EQ(out, xv) << ggml_op_desc(t);
    }
    for (ggml_tensor * t : {mm, rows, c16, ct, sum, q8}) EXPECT_EQ(ggml_nbytes(t), 0u) << ggml_op_desc(t);

    ggml_gallocr_free(ga);
    ggml_backend_buffer_free(in);
    ggml_backend_free(be);
}

TEST(Backend, RegistryHasCpu) {
    ASSERT_GE(ggml_backend_dev_count(), 1u);
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ASSERT_NE(cpu, nullptr);
    EXPECT_STREQ(ggml_backend_dev_name(cpu), "CPU");
    EXPECT_EQ(ggml_backend_dev_by_name("cpu"), cpu);
    EXPECT_EQ(ggml_backend_buft_get_alignment(ggml_backend_cpu_buffer_type()), 32u);
    EXPECT_TRUE(ggml_backend_buft_is_host(ggml_backend_cpu_buffer_type()));
}

} // namespace
