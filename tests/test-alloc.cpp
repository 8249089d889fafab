// Graph allocator (ggml-alloc.h) through its public API: in-place reuse and what blocks it,
// lifetimes of views, inputs and external tensors, reserve/re-reserve, and a randomized
// differential test against allocating every tensor separately.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <vector>

namespace {

struct fixture {
    ggml_context * ctx;
    ggml_gallocr_t galloc;
    explicit fixture(size_t n_tensors = 256)
        : ctx(ggml_init({n_tensors * ggml_tensor_overhead() + 4 * ggml_graph_overhead(), nullptr, true})),
          galloc(ggml_gallocr_new(ggml_backend_cpu_buffer_type())) {}
    ~fixture() {
        ggml_gallocr_free(galloc);
        ggml_free(ctx);
    }
    ggml_tensor * f32(int64_t n0, int64_t n1 = 1, int64_t n2 = 1) { return ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n0, n1, n2); }
    ggml_cgraph * graph(std::initializer_list<ggml_tensor *> outs) {
        ggml_cgraph * g = ggml_new_graph(ctx);
        for (ggml_tensor * t : outs) ggml_build_forward_expand(g, t);
        return g;
    }
};

bool overlap(const ggml_tensor * a, const ggml_tensor * b) {
    const char * a0 = (const char *) a->data, * b0 = (const char *) b->data;
    return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}

TEST(Alloc, ChainSharesOneAddress) {
    fixture       f;
    ggml_tensor * w  = f.f32(32, 16);
    ggml_tensor * x  = f.f32(32, 8);
    ggml_tensor * mm = ggml_mul_mat(f.ctx, w, x);
    ggml_tensor * s  = ggml_silu(f.ctx, mm);
    ggml_tensor * sc = ggml_scale(f.ctx, s, 2.0f);
    ggml_cgraph * g  = f.graph({sc});
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, g));
    EXPECT_EQ(s->data, mm->data);
    EXPECT_EQ(sc->data, mm->data);
    EXPECT_NE(w->data, nullptr);
    EXPECT_FALSE(overlap(w, x));
    EXPECT_TRUE(ggml_op_can_inplace(GGML_OP_ADD));
    EXPECT_TRUE(ggml_op_can_inplace(GGML_OP_RMS_NORM));
    EXPECT_FALSE(ggml_op_can_inplace(GGML_OP_NORM));
    EXPECT_FALSE(ggml_op_can_inplace(GGML_OP_MUL_MAT));
    EXPECT_FALSE(ggml_op_can_inplace(GGML_OP_CONT));
}

TEST(Alloc, ReuseBlockedByAnotherConsumer) {
    fixture       f;
    ggml_tensor * x  = f.f32(64, 4);
    ggml_tensor * p  = ggml_sqr(f.ctx, x);
    ggml_tensor * s  = ggml_silu(f.ctx, p);
    ggml_tensor * o  = ggml_add(f.ctx, s, p); // p is still needed after silu
    ggml_cgraph * g  = f.graph({o});
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, g));
    EXPECT_NE(s->data, p->data);
    EXPECT_FALSE(overlap(s, p));
    // o may take s's (or p's) memory: both die at o
    EXPECT_TRUE(o->data == s->data || o->data == p->data);
}

TEST(Alloc, ReuseBlockedBySameSourceTwice) {
    fixture       f;
    ggml_tensor * p = ggml_sqr(f.ctx, f.f32(64, 4));
    ggml_tensor * m = ggml_mul(f.ctx, p, p);
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, f.graph({m})));
    EXPECT_NE(m->data, p->data);
}

TEST(Alloc, ReuseBlockedByOutputFlag) {
    fixture       f;
    ggml_tensor * p = ggml_sqr(f.ctx, f.f32(64, 4));
    ggml_set_output(p);
    ggml_tensor * s = ggml_silu(f.ctx, p);
    ggml_tensor * o = ggml_scale(f.ctx, s, 3.0f);
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, f.graph({o})));
    EXPECT_FALSE(overlap(s, p));
    EXPECT_FALSE(overlap(o, p));
    EXPECT_EQ(o->data, s->data);
}

TEST(Alloc, ReuseBlockedByDifferentLayout) {
    fixture       f;
    ggml_tensor * y = ggml_sqr(f.ctx, f.f32(16, 4));     // [16,4]
    ggml_tensor * b = ggml_sqr(f.ctx, f.f32(16, 4, 3));  // [16,4,3], consumed again later
    ggml_tensor * o = ggml_add(f.ctx, b, y);             // y broadcast: other shape
    ggml_tensor * r = ggml_add(f.ctx, o, b);
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, f.graph({r})));
    EXPECT_FALSE(overlap(o, y));
    EXPECT_FALSE(overlap(o, b));
    // F16 input of an F32-shaped op: different type blocks reuse too
    fixture       f2;
    ggml_tensor * h = ggml_sqr(f2.ctx, ggml_new_tensor_2d(f2.ctx, GGML_TYPE_F16, 16, 4));
    ggml_tensor * k = ggml_add(f2.ctx, f2.f32(16, 4), h);
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f2.galloc, f2.graph({k})));
    EXPECT_FALSE(overlap(k, h));
}

TEST(Alloc, NoReuseForOpsThatCannotRunInPlace) {
    fixture       f;
    ggml_tensor * p1 = ggml_sqr(f.ctx, f.f32(64, 4));
    ggml_tensor * n  = ggml_norm(f.ctx, p1, 1e-5f);
    ggml_tensor * p2 = ggml_sqr(f.ctx, f.f32(64, 4));
    ggml_tensor * c  = ggml_cont(f.ctx, p2);
    ggml_tensor * p3 = ggml_sqr(f.ctx, f.f32(64, 4));
    ggml_tensor * r  = ggml_rms_norm(f.ctx, p3, 1e-5f); // in-place capable: contrast
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, f.graph({n, c, r})));
    EXPECT_FALSE(overlap(n, p1));
    EXPECT_FALSE(overlap(c, p2));
    EXPECT_EQ(r->data, p3->data);
}

TEST(Alloc, ViewsKeepTheirSourceAlive) {
    fixture       f;
    ggml_tensor * p = ggml_sqr(f.ctx, f.f32(64, 8));
    ggml_tensor * v = ggml_view_2d(f.ctx, p, 64, 2, p->nb[1], 4 * p->nb[1]);
    ggml_tensor * q = ggml_sqr(f.ctx, f.f32(64, 8)); // allocated while the view is pending
    ggml_tensor * q2 = ggml_sqr(f.ctx, q);
    ggml_tensor * r = ggml_add(f.ctx, v, ggml_view_2d(f.ctx, q2, 64, 2, q2->nb[1], 0));
    ggml_cgraph * g = ggml_new_graph(f.ctx);
    ggml_build_forward_expand(g, v);
    ggml_build_forward_expand(g, q2);
    ggml_build_forward_expand(g, r);
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, g));
    EXPECT_EQ((char *) v->data, (char *) p->data + 4 * p->nb[1]);
    EXPECT_FALSE(overlap(q, p));
    EXPECT_FALSE(overlap(q2, p));
    EXPECT_FALSE(overlap(r, v) && r->data != v->data);
}

TEST(Alloc, InputsDoNotOverlapAnythingLiveAtStart) {
    fixture       f;
    ggml_tensor * i1 = f.f32(64, 4);
    ggml_tensor * i2 = f.f32(64, 4);
    ggml_set_input(i1);
    ggml_set_input(i2);
    ggml_tensor * w  = f.f32(64, 4);
    ggml_tensor * a  = ggml_sqr(f.ctx, w);
    ggml_tensor * b  = ggml_silu(f.ctx, a);
    ggml_tensor * c  = ggml_add(f.ctx, b, i1);
    ggml_tensor * d  = ggml_mul(f.ctx, c, i2); // inputs live until the end
    ggml_cgraph * g  = f.graph({d});
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, g));
    for (ggml_tensor * in : {i1, i2}) {
        EXPECT_FALSE(overlap(in, w));
        for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
            ggml_tensor * n = ggml_graph_node(g, i);
            if (n != in) { EXPECT_FALSE(overlap(in, n)) << ggml_get_name(n); }
        }
    }
    EXPECT_FALSE(overlap(i1, i2));
}

TEST(Alloc, ExternalTensorsAreNeverTouched) {
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_context * wctx = ggml_init({8 * ggml_tensor_overhead(), nullptr, true});
    ggml_tensor *  ext  = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 32, 4);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, be);
    std::vector<float> vals(128);
    for (size_t i = 0; i < vals.size(); i++) vals[i] = (float) i * 0.25f - 3.0f;
    ggml_backend_tensor_set(ext, vals.data(), 0, sizeof(float) * vals.size());
    void * ext_data = ext->data;

    fixture       f;
    ggml_tensor * s = ggml_silu(f.ctx, ext); // would be in-place if ext were ours
    ggml_tensor * o = ggml_scale(f.ctx, s, 0.5f);
    ggml_cgraph * g = f.graph({o});
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, g));
    EXPECT_EQ(ext->data, ext_data);
    EXPECT_EQ(ext->buffer, wbuf);
    EXPECT_NE(s->data, ext->data);
    ASSERT_EQ(ggml_backend_graph_compute(be, g), GGML_STATUS_SUCCESS);
    std::vector<float> after(128);
    ggml_backend_tensor_get(ext, after.data(), 0, sizeof(float) * after.size());
    EXPECT_EQ(memcmp(after.data(), vals.data(), sizeof(float) * vals.size()), 0);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_backend_free(be);
}

TEST(Alloc, ReserveThenAllocReusesBufferAndGrowsForBiggerGraphs) {
    fixture       f(512);
    auto chain = [&](int64_t n, int len) {
        ggml_tensor * t = f.f32(n, 8);
        ggml_tensor * acc = nullptr;
        for (int i = 0; i < len; i++) {
            ggml_tensor * u = ggml_sqr(f.ctx, t);
            acc = acc ? ggml_add(f.ctx, acc, u) : u; // keeps several tensors alive
            t = ggml_silu(f.ctx, t);
        }
        return f.graph({acc});
    };
    ggml_cgraph * g1 = chain(64, 4);
    ASSERT_TRUE(ggml_gallocr_reserve(f.galloc, g1));
    const size_t s1 = ggml_gallocr_get_buffer_size(f.galloc, 0);
    EXPECT_GT(s1, 0u);
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, g1));
    EXPECT_EQ(ggml_gallocr_get_buffer_size(f.galloc, 0), s1);
    ggml_cgraph * g_same = chain(64, 4); // same structure: no growth
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, g_same));
    EXPECT_EQ(ggml_gallocr_get_buffer_size(f.galloc, 0), s1);
    ggml_cgraph * g2 = chain(256, 6); // bigger: re-reserved automatically
    ASSERT_TRUE(ggml_gallocr_alloc_graph(f.galloc, g2));
    EXPECT_GT(ggml_gallocr_get_buffer_size(f.galloc, 0), s1);
    size_t sizes[1] = {0};
    ggml_cgraph * g3 = chain(256, 6); // fresh tensors: allocated ones are not counted
    ggml_gallocr_reserve_n_size(f.galloc, g3, nullptr, nullptr, sizes);
    EXPECT_LE(sizes[0], ggml_gallocr_get_buffer_size(f.galloc, 0));
    EXPECT_GT(sizes[0], 0u);
}

// ---------------------------------------------------------------------------------------------
// randomized differential test

struct random_graph {
    std::vector<ggml_tensor *> inputs;
    std::vector<ggml_tensor *> all;
    ggml_tensor *              out = nullptr;
};

// Builds the same random elementwise graph for a given seed in any context.
random_graph build_random(ggml_context * ctx, uint32_t seed, bool mark_outputs) {
    std::mt19937 rng(seed);
    random_graph rg;
    const int64_t n0 = 1 + rng() % 40, n1 = 1 + rng() % 5;
    const int n_in = 2 + rng() % 3;
    for (int i = 0; i < n_in; i++) {
        ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n0, n1);
        if (rng() % 2) ggml_set_input(t);
        rg.inputs.push_back(t);
        rg.all.push_back(t);
    }
    const int n_ops = 4 + rng() % 24;
    for (int i = 0; i < n_ops; i++) {
        // prefer recent tensors so chains form, sometimes reach back (long lifetimes)
        auto pick = [&]() {
            const size_t n = rg.all.size();
            return rg.all[rng() % 3 ? n - 1 - rng() % std::min<size_t>(n, 3) : rng() % n];
        };
        ggml_tensor * a = pick();
        ggml_tensor * r = nullptr;
        switch (rng() % 9) {
            case 0: r = ggml_add(ctx, a, pick()); break;
            case 1: r = ggml_mul(ctx, a, pick()); break;
            case 2: r = ggml_sub(ctx, a, pick()); break;
            case 3: r = ggml_sqr(ctx, a); break;
            case 4: r = ggml_silu(ctx, a); break;
            case 5: r = ggml_scale(ctx, a, 0.5f); break;
            case 6: r = ggml_tanh(ctx, a); break;
            case 7: r = ggml_rms_norm(ctx, a, 1e-5f); break;
            case 8: // through a view and a copy back to the full shape
                r = ggml_cont(ctx, ggml_transpose(ctx, ggml_cont(ctx, ggml_transpose(ctx, a))));
                break;
        }
        if (mark_outputs && rng() % 7 == 0) ggml_set_output(r);
        else (void) rng();
        rg.all.push_back(r);
    }
    // combine a few tensors into the final output so many stay live
    ggml_tensor * o = rg.all.back();
    for (int i = 0; i < 3; i++) o = ggml_add(ctx, o, rg.all[rng() % rg.all.size()]);
    rg.all.push_back(o);
    rg.out = o;
    return rg;
}

TEST(Alloc, RandomGraphsMatchSeparateAllocation) {
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 2);
    for (uint32_t seed = 1; seed <= 60; seed++) {
        const size_t mem = 1024 * ggml_tensor_overhead() + ggml_graph_overhead();
        // A: inputs in their own buffer, everything else from the graph allocator (with reuse)
        ggml_context * ctx_a = ggml_init({mem, nullptr, true});
        random_graph   ga    = build_random(ctx_a, seed, true);
        ggml_set_output(ga.out);
        ggml_cgraph * g_a = ggml_new_graph(ctx_a);
        ggml_build_forward_expand(g_a, ga.out);
        ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc, g_a));
        // B: every tensor allocated separately (no reuse)
        ggml_context * ctx_b = ggml_init({mem, nullptr, true});
        random_graph   gb    = build_random(ctx_b, seed, true);
        ggml_cgraph *  g_b   = ggml_new_graph(ctx_b);
        ggml_build_forward_expand(g_b, gb.out);
        ggml_backend_buffer_t buf_b = ggml_backend_alloc_ctx_tensors(ctx_b, be);
        ASSERT_NE(buf_b, nullptr);
        ASSERT_EQ(ga.all.size(), gb.all.size());

        std::mt19937 rng(seed * 7919u);
        std::uniform_real_distribution<float> u(-1.5f, 1.5f);
        for (size_t i = 0; i < ga.inputs.size(); i++) {
            std::vector<float> v((size_t) ggml_nelements(ga.inputs[i]));
            for (float & x : v) x = u(rng);
            // inputs of A live in the compute buffer (leafs): written after alloc_graph;
            // an input the output does not depend on is not in the graph
            if (ga.inputs[i]->buffer) ggml_backend_tensor_set(ga.inputs[i], v.data(), 0, v.size() * sizeof(float));
            ggml_backend_tensor_set(gb.inputs[i], v.data(), 0, v.size() * sizeof(float));
        }
        ASSERT_EQ(ggml_backend_graph_compute(be, g_a), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_graph_compute(be, g_b), GGML_STATUS_SUCCESS);
        for (size_t i = 0; i < ga.all.size(); i++) {
            ggml_tensor * ta = ga.all[i];
            if (!(ta->flags & GGML_TENSOR_FLAG_OUTPUT) || ta->op == GGML_OP_NONE || !ta->buffer) continue;
            std::vector<float> va((size_t) ggml_nelements(ta)), vb(va.size());
            ggml_backend_tensor_get(ta, va.data(), 0, va.size() * sizeof(float));
            ggml_backend_tensor_get(gb.all[i], vb.data(), 0, vb.size() * sizeof(float));
            ASSERT_EQ(memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0)
                << "seed " << seed << " tensor " << i << " (" << ggml_op_desc(ta) << ")";
        }
        ggml_backend_buffer_free(buf_b);
        ggml_gallocr_free(galloc);
        ggml_free(ctx_b);
        ggml_free(ctx_a);
    }
    ggml_backend_free(be);
}

} // namespace
