// test-ext-rules.cpp — the central fusion legality checks and ggml_ext_graph_delay, one test per
// rule of the spec's "Fusion" section.

#include "test-ext-common.h"

#include <algorithm>

using namespace ext_test;

namespace {

struct legal_result {
    bool        ok;
    std::string why;
};

legal_result legal(const struct ggml_cgraph * g, const struct ggml_tensor * first, int n) {
    char       why[256] = "";
    const int  i        = node_index(g, first);
    EXPECT_GE(i, 0);
    const bool ok = ggml_ext_fusion_is_legal(g, i, n, why, sizeof(why));
    return {ok, why};
}

#define EXPECT_LEGAL(r)   EXPECT_TRUE((r).ok) << (r).why
#define EXPECT_ILLEGAL(r, text)                                                                              \
    do {                                                                                                     \
        const legal_result r_ = (r);                                                                         \
        EXPECT_FALSE(r_.ok);                                                                                 \
        EXPECT_NE(r_.why.find(text), std::string::npos) << "reason: " << r_.why;                             \
    } while (0)

// ==============================================================================================
// Fusion legality

TEST(FusionRules, fusion_accepts_pure_chain) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, t1, a);
    struct ggml_tensor * t3 = ggml_sqr(gc.ctx, t2);
    ggml_set_output(t3);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, t3);
    EXPECT_LEGAL(legal(g, t1, 2));
    EXPECT_LEGAL(legal(g, t1, 3));
    EXPECT_LEGAL(legal(g, t2, 2));
}

TEST(FusionRules, fusion_rejects_trivial_or_out_of_range) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, t1, a);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_FALSE(ggml_ext_fusion_is_legal(g, 0, 1, nullptr, 0));
    EXPECT_FALSE(ggml_ext_fusion_is_legal(g, 1, 2, nullptr, 0));
    EXPECT_FALSE(ggml_ext_fusion_is_legal(g, -1, 2, nullptr, 0));
}

TEST(FusionRules, fusion_rejects_external_use) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, t1, a);
    struct ggml_tensor * t3 = ggml_sqr(gc.ctx, t1); // second consumer of the intermediate
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    ggml_build_forward_expand(g, t3);
    EXPECT_ILLEGAL(legal(g, t1, 2), "outside the match");
}

TEST(FusionRules, fusion_counts_repeated_internal_uses) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, t1, t1); // uses t1 twice, both inside
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_LEGAL(legal(g, t1, 2));
}

TEST(FusionRules, fusion_rejects_external_use_outside_graph_view) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, t1, a);
    struct ggml_tensor * t3 = ggml_sqr(gc.ctx, t1);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    ggml_build_forward_expand(g, t3);
    // a view of just [t1, t2]: the consumer t3 lies outside it but still counts
    struct ggml_cgraph view = ggml_graph_view(g, 0, 2);
    EXPECT_FALSE(ggml_ext_fusion_is_legal(&view, 0, 2, nullptr, 0));
}

TEST(FusionRules, fusion_rejects_output_flag_on_intermediate) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, t1, a);
    ggml_set_output(t1);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_ILLEGAL(legal(g, t1, 2), "output");
}

TEST(FusionRules, fusion_accepts_output_flag_on_final_node) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, t1, a);
    ggml_set_output(t2);
    struct ggml_tensor * t3 = ggml_sqr(gc.ctx, t2); // and external consumers of the output are fine
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t3);
    EXPECT_LEGAL(legal(g, t1, 2));
}

TEST(FusionRules, fusion_rejects_missing_compute_flag) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, t1, a);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    t1->flags &= ~GGML_TENSOR_FLAG_COMPUTE;
    EXPECT_ILLEGAL(legal(g, t1, 2), "not marked for computation");
}

TEST(FusionRules, fusion_rejects_user_custom_callback) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    auto                 fn = [](struct ggml_tensor *, int, int, void *) {};
    struct ggml_tensor * t2 = ggml_custom_4d(gc.ctx, GGML_TYPE_F32, 8, 1, 1, 1, &t1, 1, fn, 1, nullptr);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_ILLEGAL(legal(g, t1, 2), "unknown side effects");
}

TEST(FusionRules, fusion_accepts_extension_nodes) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = axpb(gc.ctx, a, 2, 1);
    struct ggml_tensor * t2 = axpb(gc.ctx, t1, 3, 0);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_LEGAL(legal(g, t1, 2));
}

TEST(FusionRules, fusion_accepts_internal_view) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * b  = gc.f32(4, 2);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * v  = ggml_reshape_2d(gc.ctx, t1, 4, 2);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, v, b);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    ASSERT_EQ(node_index(g, v), node_index(g, t1) + 1);
    EXPECT_LEGAL(legal(g, t1, 3));
}

TEST(FusionRules, fusion_rejects_view_of_external_storage) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * b  = gc.f32(4, 2);
    struct ggml_tensor * v  = ggml_reshape_2d(gc.ctx, a, 4, 2);
    struct ggml_tensor * t2 = ggml_add(gc.ctx, v, b);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_ILLEGAL(legal(g, v, 2), "view");

    // also when the viewed storage is an earlier node outside the match
    graph_ctx            gc2;
    struct ggml_tensor * x  = gc2.f32(8);
    struct ggml_tensor * p  = ggml_sqr(gc2.ctx, x);
    struct ggml_tensor * s  = ggml_sqr(gc2.ctx, x);
    struct ggml_tensor * w  = ggml_reshape_2d(gc2.ctx, p, 4, 2);
    struct ggml_tensor * o  = ggml_add(gc2.ctx, w, ggml_reshape_2d(gc2.ctx, s, 4, 2));
    struct ggml_cgraph * g2 = gc2.graph();
    ggml_build_forward_expand(g2, p);
    ggml_build_forward_expand(g2, s);
    ggml_build_forward_expand(g2, o);
    const int iw = node_index(g2, w);
    ASSERT_GE(iw, 0);
    EXPECT_FALSE(ggml_ext_fusion_is_legal(g2, iw, g2->n_nodes - iw, nullptr, 0));
}

TEST(FusionRules, fusion_rejects_final_view) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * v  = ggml_reshape_2d(gc.ctx, t1, 4, 2);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, v);
    EXPECT_ILLEGAL(legal(g, t1, 2), "view");
}

TEST(FusionRules, fusion_accepts_inplace_intermediate_owned_in_match) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add_inplace(gc.ctx, t1, a); // writes t1's storage
    struct ggml_tensor * t3 = ggml_sqr(gc.ctx, t2);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t3);
    ASSERT_EQ(t2->view_src, t1);
    EXPECT_LEGAL(legal(g, t1, 3));
}

TEST(FusionRules, fusion_rejects_inplace_write_outside_match) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t0 = ggml_sqr(gc.ctx, a);
    struct ggml_tensor * t1 = ggml_add_inplace(gc.ctx, t0, a); // owner t0 is before the match
    struct ggml_tensor * t2 = ggml_sqr(gc.ctx, t1);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_ILLEGAL(legal(g, t1, 2), "in-place");

    // an in-place write into a leaf (an input) is outside too
    graph_ctx            gc2;
    struct ggml_tensor * b  = gc2.f32(8);
    struct ggml_tensor * u1 = ggml_scale_inplace(gc2.ctx, b, 2.0f);
    struct ggml_tensor * u2 = ggml_sqr(gc2.ctx, u1);
    struct ggml_cgraph * g2 = gc2.graph();
    ggml_build_forward_expand(g2, u2);
    EXPECT_ILLEGAL(legal(g2, u1, 2), "in-place");

    // a CPY into external storage in the middle of a match is an in-place write outside it
    graph_ctx            gc3;
    struct ggml_tensor * x  = gc3.f32(8);
    struct ggml_tensor * d  = gc3.f32(8);
    struct ggml_tensor * c1 = ggml_sqr(gc3.ctx, x);
    struct ggml_tensor * c2 = ggml_cpy(gc3.ctx, c1, d);
    struct ggml_tensor * c3 = ggml_sqr(gc3.ctx, c2);
    struct ggml_cgraph * g3 = gc3.graph();
    ggml_build_forward_expand(g3, c3);
    EXPECT_ILLEGAL(legal(g3, c1, 3), "in-place");
}

TEST(FusionRules, fusion_accepts_terminal_cpy) {
    graph_ctx            gc;
    struct ggml_tensor * a   = gc.f32(8);
    struct ggml_tensor * dst = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_F16, 8);
    struct ggml_tensor * t1  = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2  = ggml_cpy(gc.ctx, t1, dst);
    struct ggml_cgraph * g   = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_LEGAL(legal(g, t1, 2));

    // a copy into part of a larger destination is still a terminal CPY
    graph_ctx            gc2;
    struct ggml_tensor * b   = gc2.f32(8);
    struct ggml_tensor * big = gc2.f32(32);
    struct ggml_tensor * u1  = ggml_sqr(gc2.ctx, b);
    struct ggml_tensor * u2  = ggml_cpy(gc2.ctx, u1, ggml_view_1d(gc2.ctx, big, 8, 8 * sizeof(float)));
    struct ggml_cgraph * g2  = gc2.graph();
    ggml_build_forward_expand(g2, u2);
    // nodes: u1, view(big), cpy — the destination view sits inside the match; it only
    // describes where the terminal CPY writes
    const int iu = node_index(g2, u1);
    const int ic = node_index(g2, u2);
    ASSERT_EQ(ic, iu + 2);
    EXPECT_LEGAL(legal(g2, u1, 3));

    // but not when that view is also read by another node
    graph_ctx            gc3;
    struct ggml_tensor * x   = gc3.f32(8);
    struct ggml_tensor * bg  = gc3.f32(32);
    struct ggml_tensor * x1  = ggml_sqr(gc3.ctx, x);
    struct ggml_tensor * dv  = ggml_view_1d(gc3.ctx, bg, 8, 0);
    struct ggml_tensor * x2  = ggml_cpy(gc3.ctx, x1, dv);
    struct ggml_tensor * x3  = ggml_sqr(gc3.ctx, dv);
    struct ggml_cgraph * g3  = gc3.graph();
    ggml_build_forward_expand(g3, x2);
    ggml_build_forward_expand(g3, x3);
    EXPECT_FALSE(legal(g3, x1, 3).ok);
}

TEST(FusionRules, fusion_accepts_owning_cast_in_chain) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_cast(gc.ctx, t1, GGML_TYPE_F16); // references itself as src[1]
    struct ggml_tensor * t3 = ggml_cast(gc.ctx, t2, GGML_TYPE_F32);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t3);
    EXPECT_LEGAL(legal(g, t1, 3));
}

TEST(FusionRules, fusion_accepts_full_writeback_to_owner) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8, 2);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add_inplace(gc.ctx, t1, a);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_LEGAL(legal(g, t1, 2));

    // the output flag propagates to the owner and is retained
    ggml_set_output(t2);
    ASSERT_TRUE(t1->flags & GGML_TENSOR_FLAG_OUTPUT);
    EXPECT_LEGAL(legal(g, t1, 2));

    // through an internal chain: owner, in-place intermediate, writeback
    graph_ctx            gc2;
    struct ggml_tensor * b  = gc2.f32(8);
    struct ggml_tensor * u1 = ggml_mul(gc2.ctx, b, b);
    struct ggml_tensor * u2 = ggml_scale_inplace(gc2.ctx, u1, 0.5f);
    struct ggml_tensor * u3 = ggml_add_inplace(gc2.ctx, u2, b);
    struct ggml_cgraph * g2 = gc2.graph();
    ggml_build_forward_expand(g2, u3);
    EXPECT_LEGAL(legal(g2, u1, 3));
}

TEST(FusionRules, fusion_rejects_partial_writeback) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8, 4);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * v  = ggml_view_2d(gc.ctx, t1, 8, 2, t1->nb[1], 0); // first half only
    struct ggml_tensor * t2 = ggml_scale_inplace(gc.ctx, v, 2.0f);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_ILLEGAL(legal(g, t1, 3), "full shape");

    // same shape but shifted: the offset differs
    graph_ctx            gc2;
    struct ggml_tensor * b  = gc2.f32(8);
    struct ggml_tensor * u1 = ggml_mul(gc2.ctx, b, b);
    struct ggml_tensor * w  = ggml_view_1d(gc2.ctx, u1, 4, 4 * sizeof(float));
    struct ggml_tensor * u2 = ggml_scale_inplace(gc2.ctx, w, 2.0f);
    struct ggml_cgraph * g2 = gc2.graph();
    ggml_build_forward_expand(g2, u2);
    EXPECT_ILLEGAL(legal(g2, u1, 3), "full shape");

    // same bytes, different layout (transposed strides)
    graph_ctx            gc3;
    struct ggml_tensor * c  = gc3.f32(4, 4);
    struct ggml_tensor * x1 = ggml_mul(gc3.ctx, c, c);
    struct ggml_tensor * tr = ggml_transpose(gc3.ctx, x1);
    struct ggml_tensor * x2 = ggml_add_inplace(gc3.ctx, tr, tr);
    struct ggml_cgraph * g3 = gc3.graph();
    ggml_build_forward_expand(g3, x2);
    EXPECT_ILLEGAL(legal(g3, x1, 3), "full shape");
}

TEST(FusionRules, fusion_rejects_writeback_owner_with_external_consumer) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_add_inplace(gc.ctx, t1, a);
    struct ggml_tensor * t3 = ggml_sqr(gc.ctx, t1); // reads the owner after the writeback
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    ggml_build_forward_expand(g, t3);
    EXPECT_ILLEGAL(legal(g, t1, 2), "owner");
}

TEST(FusionRules, fusion_rejects_writeback_outside_match) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t0 = ggml_sqr(gc.ctx, a);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, t0, a);
    struct ggml_tensor * t2 = ggml_add_inplace(gc.ctx, t0, t1); // writes t0, which is not in [t1, t2]
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    EXPECT_ILLEGAL(legal(g, t1, 2), "outside the match");
}

// ==============================================================================================
// graph_delay

struct node_snapshot {
    const struct ggml_tensor * t;
    int32_t                   flags;
    enum ggml_op              op;
    const struct ggml_tensor * src[GGML_MAX_SRC];
    int64_t                   ne[GGML_MAX_DIMS];
    size_t                    nb[GGML_MAX_DIMS];
    const struct ggml_tensor * view_src;
    size_t                    view_offs;
    int32_t                   op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)];
    std::string               name;
    int                       uses;
};

std::vector<node_snapshot> snapshot(struct ggml_cgraph * g) {
    std::vector<node_snapshot> v;
    for (int i = 0; i < g->n_nodes; ++i) {
        struct ggml_tensor * t = g->nodes[i];
        node_snapshot        s{};
        s.t     = t;
        s.flags = t->flags;
        s.op    = t->op;
        for (int k = 0; k < GGML_MAX_SRC; ++k) s.src[k] = t->src[k];
        for (int d = 0; d < GGML_MAX_DIMS; ++d) {
            s.ne[d] = t->ne[d];
            s.nb[d] = t->nb[d];
        }
        s.view_src  = t->view_src;
        s.view_offs = t->view_offs;
        memcpy(s.op_params, t->op_params, sizeof(s.op_params));
        s.name = t->name;
        s.uses = ggml_graph_use_count(g, t);
        v.push_back(s);
    }
    return v;
}

std::vector<const struct ggml_tensor *> order_of(const struct ggml_cgraph * g) {
    return std::vector<const struct ggml_tensor *>(g->nodes, g->nodes + g->n_nodes);
}

// p = mul(a, b); x = sqr(c); y = sqrt(x); q = add(p, y)
struct delay_graph {
    graph_ctx            gc;
    struct ggml_tensor * a, *b, *c, *p, *x, *y, *q;
    struct ggml_cgraph * g;

    delay_graph() {
        a = gc.f32(8);
        b = gc.f32(8);
        c = gc.f32(8);
        p = ggml_mul(gc.ctx, a, b);
        x = ggml_sqr(gc.ctx, c);
        y = ggml_sqrt(gc.ctx, x);
        q = ggml_add(gc.ctx, p, y);
        g = gc.graph();
        ggml_build_forward_expand(g, p);
        ggml_build_forward_expand(g, x);
        ggml_build_forward_expand(g, y);
        ggml_build_forward_expand(g, q);
    }
};

TEST(Delay, delay_moves_independent_range) {
    delay_graph d;
    ASSERT_EQ(order_of(d.g), (std::vector<const struct ggml_tensor *>{d.p, d.x, d.y, d.q}));
    ASSERT_TRUE(ggml_ext_graph_delay(d.g, 0, 1, 2)) << ggml_ext_last_error();
    EXPECT_EQ(order_of(d.g), (std::vector<const struct ggml_tensor *>{d.x, d.y, d.p, d.q}));
}

TEST(Delay, delay_moves_multi_node_range) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * c  = gc.f32(8);
    struct ggml_tensor * p1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * p2 = ggml_sqr(gc.ctx, p1);
    struct ggml_tensor * x  = ggml_sqr(gc.ctx, c);
    struct ggml_tensor * q  = ggml_add(gc.ctx, p2, x);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, p2);
    ggml_build_forward_expand(g, x);
    ggml_build_forward_expand(g, q);
    ASSERT_TRUE(ggml_ext_graph_delay(g, 0, 2, 2)) << ggml_ext_last_error();
    EXPECT_EQ(order_of(g), (std::vector<const struct ggml_tensor *>{x, p1, p2, q}));
}

TEST(Delay, delay_rejects_invalid_range) {
    delay_graph d;
    auto        before = order_of(d.g);
    EXPECT_FALSE(ggml_ext_graph_delay(d.g, 0, 1, 0));
    EXPECT_FALSE(ggml_ext_graph_delay(d.g, 0, 0, 2));
    EXPECT_FALSE(ggml_ext_graph_delay(d.g, 2, 1, 4));
    EXPECT_FALSE(ggml_ext_graph_delay(d.g, -1, 1, 2));
    EXPECT_FALSE(ggml_ext_graph_delay(nullptr, 0, 1, 2));
    EXPECT_EQ(order_of(d.g), before);
}

TEST(Delay, delay_rejects_dependency) {
    delay_graph d;
    auto        before = order_of(d.g);
    // moving x past y: y uses x
    EXPECT_FALSE(ggml_ext_graph_delay(d.g, 1, 1, 2));
    EXPECT_NE(std::string(ggml_ext_last_error()).find("depends on moved node"), std::string::npos);
    // moving p past q: q uses p (indirect crossings are caught at the first user)
    EXPECT_FALSE(ggml_ext_graph_delay(d.g, 0, 1, 3));
    EXPECT_EQ(order_of(d.g), before);
}

TEST(Delay, delay_rejects_dependency_through_view) {
    graph_ctx            gc;
    struct ggml_tensor * a = gc.f32(8);
    struct ggml_tensor * p = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * v = ggml_reshape_2d(gc.ctx, p, 4, 2);
    struct ggml_tensor * y = ggml_sqr(gc.ctx, v);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, y);
    auto before = order_of(g);
    // moving [p, v] past y: y reads p's storage through the view
    EXPECT_FALSE(ggml_ext_graph_delay(g, 0, 2, 2));
    EXPECT_EQ(order_of(g), before);
    // a crossed in-place write into a moved node's storage is a use too
    graph_ctx            gc2;
    struct ggml_tensor * b  = gc2.f32(8);
    struct ggml_tensor * p2 = ggml_mul(gc2.ctx, b, b);
    struct ggml_tensor * w  = ggml_scale_inplace(gc2.ctx, p2, 2.0f);
    struct ggml_cgraph * g2 = gc2.graph();
    ggml_build_forward_expand(g2, w);
    EXPECT_FALSE(ggml_ext_graph_delay(g2, 0, 1, 1));
}

TEST(Delay, delay_rejects_unknown_side_effect) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * c  = gc.f32(8);
    struct ggml_tensor * p  = ggml_mul(gc.ctx, a, a);
    auto                 fn = [](struct ggml_tensor *, int, int, void *) {};
    struct ggml_tensor * u  = ggml_custom_4d(gc.ctx, GGML_TYPE_F32, 8, 1, 1, 1, &c, 1, fn, 1, nullptr);
    struct ggml_tensor * q  = ggml_add(gc.ctx, p, u);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, p);
    ggml_build_forward_expand(g, u);
    ggml_build_forward_expand(g, q);
    auto before = order_of(g);
    EXPECT_FALSE(ggml_ext_graph_delay(g, 0, 1, 1)); // crossing the callback
    EXPECT_NE(std::string(ggml_ext_last_error()).find("unknown side effects"), std::string::npos);
    EXPECT_EQ(order_of(g), before);

    // moving the callback is refused as well
    graph_ctx            gc2;
    struct ggml_tensor * x  = gc2.f32(8);
    struct ggml_tensor * u2 = ggml_custom_4d(gc2.ctx, GGML_TYPE_F32, 8, 1, 1, 1, &x, 1, fn, 1, nullptr);
    struct ggml_tensor * s  = ggml_sqr(gc2.ctx, x);
    struct ggml_cgraph * g2 = gc2.graph();
    ggml_build_forward_expand(g2, u2);
    ggml_build_forward_expand(g2, s);
    EXPECT_FALSE(ggml_ext_graph_delay(g2, 0, 1, 1));

    // extension nodes are pure by contract: they may move and be crossed
    graph_ctx            gc3;
    struct ggml_tensor * e  = gc3.f32(8);
    struct ggml_tensor * f  = gc3.f32(8);
    struct ggml_tensor * e1 = axpb(gc3.ctx, e, 2, 0);
    struct ggml_tensor * f1 = axpb(gc3.ctx, f, 3, 0);
    struct ggml_cgraph * g3 = gc3.graph();
    ggml_build_forward_expand(g3, e1);
    ggml_build_forward_expand(g3, f1);
    EXPECT_TRUE(ggml_ext_graph_delay(g3, 0, 1, 1)) << ggml_ext_last_error();
}

TEST(Delay, delay_rejects_aliasing_write) {
    // crossed in-place write into storage a moved node reads
    graph_ctx            gc;
    struct ggml_tensor * a = gc.f32(8);
    struct ggml_tensor * p = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * w = ggml_scale_inplace(gc.ctx, a, 2.0f);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, p);
    ggml_build_forward_expand(g, w);
    auto before = order_of(g);
    EXPECT_FALSE(ggml_ext_graph_delay(g, 0, 1, 1));
    EXPECT_NE(std::string(ggml_ext_last_error()).find("writes storage"), std::string::npos);
    EXPECT_EQ(order_of(g), before);

    // crossed CPY into a view overlapping a moved input's bytes
    graph_ctx            gc2;
    struct ggml_tensor * big = gc2.f32(16);
    struct ggml_tensor * in  = ggml_view_1d(gc2.ctx, big, 8, 0);
    struct ggml_tensor * p2  = ggml_sqr(gc2.ctx, in);
    struct ggml_tensor * src = gc2.f32(8);
    struct ggml_tensor * cp  = ggml_cpy(gc2.ctx, src, ggml_view_1d(gc2.ctx, big, 8, 4 * sizeof(float)));
    struct ggml_cgraph * g2  = gc2.graph();
    ggml_build_forward_expand(g2, p2);
    ggml_build_forward_expand(g2, cp);
    const int ip = node_index(g2, p2);
    EXPECT_FALSE(ggml_ext_graph_delay(g2, ip, 1, g2->n_nodes - 1));

    // moved in-place write into storage a crossed node reads
    graph_ctx            gc3;
    struct ggml_tensor * b  = gc3.f32(8);
    struct ggml_tensor * m  = ggml_scale_inplace(gc3.ctx, b, 2.0f);
    struct ggml_tensor * r  = ggml_sqr(gc3.ctx, b);
    struct ggml_cgraph * g3 = gc3.graph();
    ggml_build_forward_expand(g3, m);
    ggml_build_forward_expand(g3, r);
    EXPECT_FALSE(ggml_ext_graph_delay(g3, 0, 1, 1));
}

TEST(Delay, delay_crosses_independent_copy) {
    graph_ctx            gc;
    struct ggml_tensor * a   = gc.f32(8);
    struct ggml_tensor * c   = gc.f32(8);
    struct ggml_tensor * dst = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_F16, 8);
    struct ggml_tensor * p   = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * cp  = ggml_cpy(gc.ctx, c, dst);
    struct ggml_tensor * w   = ggml_scale_inplace(gc.ctx, c, 3.0f); // known in-place op, unrelated storage
    struct ggml_cgraph * g   = gc.graph();
    ggml_build_forward_expand(g, p);
    ggml_build_forward_expand(g, cp);
    ggml_build_forward_expand(g, w);
    ASSERT_EQ(order_of(g), (std::vector<const struct ggml_tensor *>{p, cp, w}));
    ASSERT_TRUE(ggml_ext_graph_delay(g, 0, 1, 2)) << ggml_ext_last_error();
    EXPECT_EQ(order_of(g), (std::vector<const struct ggml_tensor *>{cp, w, p}));

    // a copy into a disjoint part of the same buffer tensor is independent too
    graph_ctx            gc2;
    struct ggml_tensor * big = gc2.f32(16);
    struct ggml_tensor * in  = ggml_view_1d(gc2.ctx, big, 8, 0);
    struct ggml_tensor * p2  = ggml_sqr(gc2.ctx, in);
    struct ggml_tensor * src = gc2.f32(8);
    struct ggml_tensor * out = ggml_view_1d(gc2.ctx, big, 8, 8 * sizeof(float));
    struct ggml_tensor * cp2 = ggml_cpy(gc2.ctx, src, out);
    struct ggml_cgraph * g2  = gc2.graph();
    ggml_build_forward_expand(g2, p2);
    ggml_build_forward_expand(g2, cp2);
    const int ip = node_index(g2, p2);
    ASSERT_EQ(ip, 1); // in, p2, out, cp2
    EXPECT_TRUE(ggml_ext_graph_delay(g2, ip, 1, g2->n_nodes - 1)) << ggml_ext_last_error();
}

TEST(Delay, delay_moves_and_crosses_owning_dtype_conversion) {
    graph_ctx            gc;
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * c  = gc.f32(8);
    struct ggml_tensor * h  = ggml_cast(gc.ctx, a, GGML_TYPE_F16);
    struct ggml_tensor * x  = ggml_cast(gc.ctx, c, GGML_TYPE_F16);
    struct ggml_tensor * s  = ggml_sqr(gc.ctx, c);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, h);
    ggml_build_forward_expand(g, x);
    ggml_build_forward_expand(g, s);
    ASSERT_TRUE(ggml_ext_graph_delay(g, 0, 1, 2)) << ggml_ext_last_error(); // move h past x and s
    EXPECT_EQ(order_of(g), (std::vector<const struct ggml_tensor *>{x, s, h}));
    ASSERT_TRUE(ggml_ext_graph_delay(g, 1, 1, 2)) << ggml_ext_last_error(); // move s past h
    EXPECT_EQ(order_of(g), (std::vector<const struct ggml_tensor *>{x, h, s}));
}

TEST(Delay, delay_preserves_edges_and_metadata) {
    delay_graph d;
    ggml_set_output(d.q);
    auto before = snapshot(d.g);
    ASSERT_TRUE(ggml_ext_graph_delay(d.g, 0, 1, 2));
    auto after = snapshot(d.g);
    ASSERT_EQ(before.size(), after.size());
    auto by_tensor = [](const std::vector<node_snapshot> & v, const struct ggml_tensor * t) {
        return *std::find_if(v.begin(), v.end(), [t](const node_snapshot & s) { return s.t == t; });
    };
    for (const auto & b : before) {
        const node_snapshot a = by_tensor(after, b.t);
        EXPECT_EQ(a.flags, b.flags);
        EXPECT_EQ(a.op, b.op);
        EXPECT_EQ(memcmp(a.src, b.src, sizeof(a.src)), 0);
        EXPECT_EQ(memcmp(a.ne, b.ne, sizeof(a.ne)), 0);
        EXPECT_EQ(memcmp(a.nb, b.nb, sizeof(a.nb)), 0);
        EXPECT_EQ(a.view_src, b.view_src);
        EXPECT_EQ(a.view_offs, b.view_offs);
        EXPECT_EQ(memcmp(a.op_params, b.op_params, sizeof(a.op_params)), 0);
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.uses, b.uses);
    }
    EXPECT_EQ(d.g->n_leafs, 3);
    // still topologically ordered
    for (int i = 0; i < d.g->n_nodes; ++i) {
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            const struct ggml_tensor * s = d.g->nodes[i]->src[k];
            if (s && node_index(d.g, s) >= 0) {
                EXPECT_LT(node_index(d.g, s), i);
            }
        }
    }
}

// An optimize callback that delays the MUL producer next to its ADD consumer.
void opt_delay_mul(ggml_backend_dev_t, struct ggml_cgraph * g, void *) {
    for (int i = 0; i < g->n_nodes; ++i) {
        if (g->nodes[i]->op != GGML_OP_MUL) continue;
        for (int j = i + 2; j < g->n_nodes; ++j) {
            if (g->nodes[j]->op == GGML_OP_ADD && (g->nodes[j]->src[0] == g->nodes[i] || g->nodes[j]->src[1] == g->nodes[i])) {
                ggml_ext_graph_delay(g, i, 1, j - 1);
                break;
            }
        }
    }
}

// A rule that matches MUL followed by ADD without looking at uses: legality must decide.
int match_careless(ggml_backend_dev_t, const struct ggml_cgraph * g, int first, void * ud) {
    static_cast<kernel_counters *>(ud)->match++;
    if (first + 1 >= g->n_nodes) return 0;
    return g->nodes[first]->op == GGML_OP_MUL && g->nodes[first + 1]->op == GGML_OP_ADD ? 2 : 0;
}

TEST(Delay, delay_legality_rechecked_after_reordering) {
    ggml_backend_dev_t dev = new_fake_dev();
    kernel_counters    c;
    auto               d = mul_add_rule("test.delay.rule", &c);
    d.match              = match_careless;
    d.optimize           = opt_delay_mul;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));

    {   // m = mul(a, b); x = sqr(z); s = add(m, x): after delaying m, [m, s] fuses
        graph_ctx            gc;
        struct ggml_tensor * a = gc.f32(8);
        struct ggml_tensor * b = gc.f32(8);
        struct ggml_tensor * z = gc.f32(8);
        struct ggml_tensor * m = ggml_mul(gc.ctx, a, b);
        struct ggml_tensor * x = ggml_sqr(gc.ctx, z);
        struct ggml_tensor * s = ggml_add(gc.ctx, m, x);
        struct ggml_cgraph * g = gc.graph();
        ggml_build_forward_expand(g, m);
        ggml_build_forward_expand(g, x);
        ggml_build_forward_expand(g, s);
        ggml_ext_plan * p0 = ggml_ext_plan_new(dev, g, 0, g->n_nodes, true);
        EXPECT_FALSE(ggml_ext_plan_has_extensions(p0));
        ggml_ext_plan_free(p0);

        ggml_ext_run_optimizers(dev, g);
        ASSERT_EQ(order_of(g), (std::vector<const struct ggml_tensor *>{x, m, s}));
        ggml_ext_plan * p = ggml_ext_plan_new(dev, g, 0, g->n_nodes, true);
        ASSERT_EQ(ggml_ext_plan_n_steps(p), 2);
        EXPECT_TRUE(ggml_ext_plan_get_step(p, 1)->fused);
        EXPECT_EQ(ggml_ext_plan_get_step(p, 1)->first, 1);
        ggml_ext_plan_free(p);
    }
    {   // the same, but m also feeds a later node: the reordered pair matches yet stays illegal
        graph_ctx            gc;
        struct ggml_tensor * a = gc.f32(8);
        struct ggml_tensor * z = gc.f32(8);
        struct ggml_tensor * m = ggml_mul(gc.ctx, a, a);
        struct ggml_tensor * x = ggml_sqr(gc.ctx, z);
        struct ggml_tensor * s = ggml_add(gc.ctx, m, x);
        struct ggml_tensor * t = ggml_sqrt(gc.ctx, m);
        struct ggml_cgraph * g = gc.graph();
        ggml_build_forward_expand(g, m);
        ggml_build_forward_expand(g, x);
        ggml_build_forward_expand(g, s);
        ggml_build_forward_expand(g, t);
        ggml_ext_run_optimizers(dev, g);
        ASSERT_EQ(order_of(g), (std::vector<const struct ggml_tensor *>{x, m, s, t}));
        const int before = c.match;
        ggml_ext_plan * p = ggml_ext_plan_new(dev, g, 0, g->n_nodes, true);
        EXPECT_GT(c.match, before);
        EXPECT_FALSE(ggml_ext_plan_has_extensions(p));
        ggml_ext_plan_free(p);
    }
}

} // namespace
