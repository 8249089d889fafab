// Public graph access (ggml-graph.h) and the CPU backend service ggml_ext_cpu_parallel_v1:
// leaves, recorded use counts, mapped copies of a node range, range execution, and running
// application tasks on the backend's thread pool with its abort callback.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml-graph.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace {

struct ctx_holder {
    ggml_context * ctx;
    explicit ctx_holder(bool no_alloc = true, size_t mem = 0) {
        ggml_init_params p = {mem ? mem : 256 * ggml_tensor_overhead() + 4 * ggml_graph_overhead(), nullptr, no_alloc};
        ctx                = ggml_init(p);
    }
    ~ctx_holder() { ggml_free(ctx); }
};

ggml_tensor * new_vec(ggml_context * ctx, const char * name, int64_t n = 4) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_set_name(t, name);
    return t;
}

// Maps every original to a fresh tensor of the same shape in ctx (what a caller building a
// copied inference graph does; edges and storage are the caller's business and not needed here).
struct copy_map {
    ggml_context *                         ctx;
    std::map<ggml_tensor *, ggml_tensor *> copies;
    std::vector<ggml_tensor *>             asked; // map calls in order

    static ggml_tensor * fn(ggml_tensor * original, void * ud) {
        copy_map * m = static_cast<copy_map *>(ud);
        m->asked.push_back(original);
        auto it = m->copies.find(original);
        if (it != m->copies.end()) return it->second;
        ggml_tensor * c = ggml_dup_tensor(m->ctx, original);
        ggml_format_name(c, "%s (copy)", original->name);
        m->copies[original] = c;
        return c;
    }
};

// A snapshot of a graph's observable state, to prove that a rejected call changed nothing.
struct graph_snapshot {
    std::vector<ggml_tensor *> nodes, leafs;
    std::vector<int>           counts;

    graph_snapshot(ggml_cgraph * g, const std::vector<ggml_tensor *> & probe) {
        for (int i = 0; i < ggml_graph_n_nodes(g); ++i) nodes.push_back(ggml_graph_node(g, i));
        for (int i = 0; i < ggml_graph_n_leafs(g); ++i) leafs.push_back(ggml_graph_leaf(g, i));
        for (ggml_tensor * t : probe) counts.push_back(ggml_graph_get_use_count(g, t));
    }
    bool operator==(const graph_snapshot & o) const {
        return nodes == o.nodes && leafs == o.leafs && counts == o.counts;
    }
};

} // namespace

// ---------------------------------------------------------------------------------------------
// Leaves

TEST(GraphAccess, leaf_enumeration_follows_build_order) {
    ctx_holder    h;
    ggml_tensor * a = new_vec(h.ctx, "a");
    ggml_tensor * b = new_vec(h.ctx, "b");
    ggml_tensor * c = new_vec(h.ctx, "c");
    ggml_tensor * x = ggml_add(h.ctx, b, a);     // b reached before a
    ggml_tensor * y = ggml_mul(h.ctx, x, c);
    ggml_cgraph * g = ggml_new_graph(h.ctx);
    ggml_build_forward_expand(g, y);

    ASSERT_EQ(ggml_graph_n_leafs(g), 3);
    EXPECT_EQ(ggml_graph_leaf(g, 0), b);
    EXPECT_EQ(ggml_graph_leaf(g, 1), a);
    EXPECT_EQ(ggml_graph_leaf(g, 2), c);
    EXPECT_EQ(ggml_graph_leaf(g, -1), c); // negative index counts from the end
    EXPECT_EQ(ggml_graph_leaf(g, -3), b);
}

TEST(GraphAccess, add_leaf_is_append_only) {
    ctx_holder    h;
    ggml_tensor * a = new_vec(h.ctx, "a");
    ggml_tensor * b = new_vec(h.ctx, "b");
    ggml_tensor * x = ggml_add(h.ctx, a, b);
    ggml_cgraph * g = ggml_new_graph_custom(h.ctx, 3, false);
    ggml_build_forward_expand(g, x);
    ASSERT_EQ(ggml_graph_n_leafs(g), 2);

    ggml_tensor * extra = new_vec(h.ctx, "extra");
    EXPECT_TRUE(ggml_graph_add_leaf(g, extra));
    ASSERT_EQ(ggml_graph_n_leafs(g), 3);
    EXPECT_EQ(ggml_graph_leaf(g, 0), a); // existing positions unchanged
    EXPECT_EQ(ggml_graph_leaf(g, 1), b);
    EXPECT_EQ(ggml_graph_leaf(g, 2), extra);
    EXPECT_EQ(ggml_graph_n_nodes(g), 1);
    EXPECT_EQ(ggml_graph_node(g, 0), x);
    EXPECT_EQ(ggml_graph_get_use_count(g, extra), 0);

    // rebuilding does not add it again: it is in the visited set
    ggml_build_forward_expand(g, x);
    EXPECT_EQ(ggml_graph_n_leafs(g), 3);

    EXPECT_FALSE(ggml_graph_add_leaf(g, a));     // already a leaf
    EXPECT_FALSE(ggml_graph_add_leaf(g, extra)); // duplicate
    EXPECT_FALSE(ggml_graph_add_leaf(g, x));     // a node (op != NONE)
    ggml_tensor * full = new_vec(h.ctx, "full");
    EXPECT_FALSE(ggml_graph_add_leaf(g, full)); // capacity 3 reached
    EXPECT_FALSE(ggml_graph_add_leaf(g, nullptr));
    EXPECT_EQ(ggml_graph_n_leafs(g), 3);
    EXPECT_EQ(ggml_graph_leaf(g, 2), extra);
}

// ---------------------------------------------------------------------------------------------
// Use counts

TEST(GraphAccess, use_counts_are_recorded) {
    ctx_holder    h;
    ggml_tensor * a  = new_vec(h.ctx, "a");
    ggml_tensor * b  = new_vec(h.ctx, "b");
    ggml_tensor * sq = ggml_mul(h.ctx, a, a);   // a used twice by one node
    ggml_tensor * s  = ggml_add(h.ctx, sq, b);
    ggml_tensor * t  = ggml_sub(h.ctx, sq, s);  // sq has two consumers
    ggml_cgraph * g  = ggml_new_graph(h.ctx);
    ggml_build_forward_expand(g, t);

    EXPECT_EQ(ggml_graph_get_use_count(g, a), 2);
    EXPECT_EQ(ggml_graph_get_use_count(g, b), 1);
    EXPECT_EQ(ggml_graph_get_use_count(g, sq), 2);
    EXPECT_EQ(ggml_graph_get_use_count(g, s), 1);
    EXPECT_EQ(ggml_graph_get_use_count(g, t), 0);

    ggml_tensor * absent = new_vec(h.ctx, "absent");
    EXPECT_EQ(ggml_graph_get_use_count(g, absent), 0);
    EXPECT_EQ(ggml_graph_get_use_count(g, nullptr), 0);
}

// ---------------------------------------------------------------------------------------------
// Mapped copies

namespace {

// a, b leaves; n0 = a*b; n1 = n0+a; n2 = n1*n1; n3 = n0-n2 (n0 consumed after the range [1, 3))
struct chain_graph {
    ctx_holder    h;
    ggml_tensor * a, * b, * c, * n0, * n1, * n2, * n3;
    ggml_cgraph * g;
    chain_graph() {
        a  = new_vec(h.ctx, "a");
        b  = new_vec(h.ctx, "b");
        c  = new_vec(h.ctx, "c");
        n0 = ggml_mul(h.ctx, a, b);
        n1 = ggml_add(h.ctx, n0, c);
        n2 = ggml_mul(h.ctx, n1, n1);
        n3 = ggml_sub(h.ctx, n0, n2);
        g  = ggml_new_graph(h.ctx);
        ggml_build_forward_expand(g, n3);
    }
};

} // namespace

TEST(GraphAccess, graph_copy_keeps_node_order) {
    chain_graph src;
    ASSERT_EQ(ggml_graph_n_nodes(src.g), 4);
    ctx_holder  dh;
    ggml_cgraph * dst = ggml_new_graph(dh.ctx);
    copy_map      m{dh.ctx, {}, {}};

    ASSERT_TRUE(ggml_graph_copy_mapped(dst, src.g, 0, 4, copy_map::fn, &m));
    ASSERT_EQ(ggml_graph_n_nodes(dst), 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ggml_graph_node(dst, i), m.copies.at(ggml_graph_node(src.g, i)));
    ASSERT_EQ(ggml_graph_n_leafs(dst), 3);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(ggml_graph_leaf(dst, i), m.copies.at(ggml_graph_leaf(src.g, i)));
    for (auto & kv : m.copies) {
        EXPECT_EQ(ggml_graph_get_use_count(dst, kv.second), ggml_graph_get_use_count(src.g, kv.first)) << kv.first->name;
        EXPECT_EQ(kv.second->flags & GGML_TENSOR_FLAG_COMPUTE, kv.first->flags & GGML_TENSOR_FLAG_COMPUTE);
    }
    // each original is mapped once
    std::set<ggml_tensor *> unique(m.asked.begin(), m.asked.end());
    EXPECT_EQ(unique.size(), m.asked.size());
}

TEST(GraphAccess, graph_copy_keeps_external_consumer_counts) {
    chain_graph src;
    ctx_holder  dh;
    ggml_cgraph * dst = ggml_new_graph(dh.ctx);
    copy_map      m{dh.ctx, {}, {}};

    // range [1, 3) = n1, n2: n0 and c are inputs; n0 is also used by n3 outside the range
    ASSERT_TRUE(ggml_graph_copy_mapped(dst, src.g, 1, 3, copy_map::fn, &m));
    ASSERT_EQ(ggml_graph_n_nodes(dst), 2);
    EXPECT_EQ(ggml_graph_node(dst, 0), m.copies.at(src.n1));
    EXPECT_EQ(ggml_graph_node(dst, 1), m.copies.at(src.n2));
    // only the leaf the range uses; n0 is a node of src, not a leaf
    ASSERT_EQ(ggml_graph_n_leafs(dst), 1);
    EXPECT_EQ(ggml_graph_leaf(dst, 0), m.copies.at(src.c));

    EXPECT_EQ(ggml_graph_get_use_count(dst, m.copies.at(src.n0)), 2); // n1 and n3 (outside)
    EXPECT_EQ(ggml_graph_get_use_count(dst, m.copies.at(src.n1)), 2); // n2 uses it twice
    EXPECT_EQ(ggml_graph_get_use_count(dst, m.copies.at(src.n2)), 1); // n3, outside the range
    EXPECT_EQ(ggml_graph_get_use_count(dst, m.copies.at(src.c)), 1);
    EXPECT_EQ(m.copies.count(src.a), 0u); // not referenced by the range
    EXPECT_EQ(m.copies.count(src.n3), 0u);
}

namespace {

struct bad_map {
    ggml_context *                         ctx;
    int                                    mode; // 0: NULL for n2, 1: n1 and n2 to one copy
    std::map<ggml_tensor *, ggml_tensor *> copies;
    ggml_tensor *                          n1 = nullptr, * n2 = nullptr;
    ggml_tensor *                          shared = nullptr;

    static ggml_tensor * fn(ggml_tensor * original, void * ud) {
        bad_map * m = static_cast<bad_map *>(ud);
        if (m->mode == 0 && original == m->n2) return nullptr;
        if (m->mode == 1 && (original == m->n1 || original == m->n2)) {
            if (!m->shared) m->shared = ggml_dup_tensor(m->ctx, original);
            return m->shared;
        }
        auto it = m->copies.find(original);
        if (it != m->copies.end()) return it->second;
        return m->copies[original] = ggml_dup_tensor(m->ctx, original);
    }
};

} // namespace

TEST(GraphAccess, graph_copy_invalid_mapping_leaves_destination_unchanged) {
    chain_graph src;
    ctx_holder  dh;

    // dst already holds a graph of its own
    ggml_tensor * p = new_vec(dh.ctx, "p");
    ggml_tensor * q = ggml_scale(dh.ctx, p, 2.0f);
    ggml_cgraph * dst = ggml_new_graph_custom(dh.ctx, 4, false);
    ggml_build_forward_expand(dst, q);

    for (int mode = 0; mode < 2; ++mode) {
        bad_map m{dh.ctx, mode, {}, src.n1, src.n2};
        // pre-create copies to probe their counts and flags afterwards
        bad_map::fn(src.n0, &m);
        bad_map::fn(src.c, &m);
        std::vector<ggml_tensor *> probe = {p, q, m.copies[src.n0], m.copies[src.c]};
        const int32_t              flags_before = m.copies[src.n0]->flags;
        graph_snapshot             before(dst, probe);

        EXPECT_FALSE(ggml_graph_copy_mapped(dst, src.g, 0, 4, bad_map::fn, &m)) << "mode " << mode;
        EXPECT_TRUE(graph_snapshot(dst, probe) == before) << "mode " << mode;
        EXPECT_EQ(m.copies[src.n0]->flags, flags_before);
    }

    // a valid mapping that does not fit: 4 nodes + 1 existing > capacity 4
    copy_map                   m{dh.ctx, {}, {}};
    std::vector<ggml_tensor *> probe = {p, q};
    graph_snapshot             before(dst, probe);
    EXPECT_FALSE(ggml_graph_copy_mapped(dst, src.g, 0, 4, copy_map::fn, &m));
    EXPECT_TRUE(graph_snapshot(dst, probe) == before);
    for (auto & kv : m.copies) EXPECT_EQ(ggml_graph_get_use_count(dst, kv.second), 0);

    // the same copy with 3 nodes fits (1 + 3 nodes, 1 + 3 leaves)
    EXPECT_TRUE(ggml_graph_copy_mapped(dst, src.g, 0, 3, copy_map::fn, &m));
    EXPECT_EQ(ggml_graph_n_nodes(dst), 4);
    EXPECT_EQ(ggml_graph_n_leafs(dst), 4);

    // leaves over capacity: node n0 fits, its leaves a and b do not (1 + 2 > 2)
    ggml_cgraph * tight = ggml_new_graph_custom(dh.ctx, 2, false);
    ASSERT_TRUE(ggml_graph_add_leaf(tight, new_vec(dh.ctx, "t")));
    copy_map       m2{dh.ctx, {}, {}};
    graph_snapshot tight_before(tight, {});
    EXPECT_FALSE(ggml_graph_copy_mapped(tight, src.g, 0, 1, copy_map::fn, &m2));
    EXPECT_TRUE(graph_snapshot(tight, {}) == tight_before);
    EXPECT_EQ(ggml_graph_n_nodes(tight), 0);

    // bad ranges
    EXPECT_FALSE(ggml_graph_copy_mapped(dst, src.g, 2, 1, copy_map::fn, &m));
    EXPECT_FALSE(ggml_graph_copy_mapped(dst, src.g, 0, 5, copy_map::fn, &m));
    EXPECT_FALSE(ggml_graph_copy_mapped(dst, src.g, 0, 1, nullptr, &m));
}

TEST(GraphAccess, copy_use_counts_for_segment) {
    chain_graph src;
    // the segment [1, 3) rebuilt over the same tensors only knows in-segment consumers
    ggml_cgraph * seg = ggml_new_graph(src.h.ctx);
    ggml_build_forward_expand(seg, src.n2);
    EXPECT_EQ(ggml_graph_get_use_count(seg, src.n2), 0);
    EXPECT_EQ(ggml_graph_get_use_count(seg, src.n0), 1);

    EXPECT_TRUE(ggml_graph_copy_use_counts(seg, src.g, 1, 3));
    EXPECT_EQ(ggml_graph_get_use_count(seg, src.n0), 2); // n3 outside the segment
    EXPECT_EQ(ggml_graph_get_use_count(seg, src.n1), 2);
    EXPECT_EQ(ggml_graph_get_use_count(seg, src.n2), 1);
    EXPECT_EQ(ggml_graph_get_use_count(seg, src.c), 1);

    // a segment graph lacking a used tensor: false, nothing written
    ctx_holder    h2;
    ggml_tensor * other = new_vec(h2.ctx, "other");
    ggml_cgraph * small = ggml_new_graph(h2.ctx);
    ggml_build_forward_expand(small, ggml_add(h2.ctx, other, other));
    EXPECT_TRUE(ggml_graph_add_leaf(small, src.c));
    EXPECT_FALSE(ggml_graph_copy_use_counts(small, src.g, 1, 3));
    EXPECT_EQ(ggml_graph_get_use_count(small, src.c), 0);
}

// ---------------------------------------------------------------------------------------------
// Range execution

namespace {

struct compute_fixture {
    ctx_holder            h;
    ggml_backend_t        backend = nullptr;
    ggml_backend_buffer_t buf     = nullptr;
    ggml_tensor *         a, * c, * n0, * n1, * n2, * n3;
    ggml_cgraph *         g;

    compute_fixture() {
        a  = new_vec(h.ctx, "a", 8);
        c  = new_vec(h.ctx, "c", 8);
        n0 = ggml_add(h.ctx, a, c);
        n1 = ggml_mul(h.ctx, n0, c);
        n2 = ggml_sub(h.ctx, n1, a);
        n3 = ggml_scale(h.ctx, n2, 0.5f);
        g  = ggml_new_graph(h.ctx);
        ggml_build_forward_expand(g, n3);
        backend = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(backend, 2);
        buf = ggml_backend_alloc_ctx_tensors(h.ctx, backend); // every tensor its own storage
        std::vector<float> va(8), vc(8);
        for (int i = 0; i < 8; ++i) {
            va[i] = 0.25f * (float) i - 1.0f;
            vc[i] = 1.5f - 0.125f * (float) i;
        }
        ggml_backend_tensor_set(a, va.data(), 0, sizeof(float) * 8);
        ggml_backend_tensor_set(c, vc.data(), 0, sizeof(float) * 8);
        for (ggml_tensor * t : {n0, n1, n2, n3}) fill(t, -777.0f);
    }
    ~compute_fixture() {
        ggml_backend_buffer_free(buf);
        ggml_backend_free(backend);
    }
    static void fill(ggml_tensor * t, float v) {
        std::vector<float> x(8, v);
        ggml_backend_tensor_set(t, x.data(), 0, sizeof(float) * 8);
    }
    static std::vector<float> get(ggml_tensor * t) {
        std::vector<float> x(8);
        ggml_backend_tensor_get(t, x.data(), 0, sizeof(float) * 8);
        return x;
    }
};

} // namespace

TEST(GraphAccess, compute_range_computes_only_the_range) {
    compute_fixture f;
    ASSERT_EQ(ggml_graph_n_nodes(f.g), 4);
    compute_fixture::fill(f.n0, 3.0f); // as if an earlier range had produced it

    ASSERT_EQ(ggml_backend_graph_compute_range(f.backend, f.g, 1, 3), GGML_STATUS_SUCCESS);
    const auto a = compute_fixture::get(f.a), c = compute_fixture::get(f.c);
    const auto n0 = compute_fixture::get(f.n0), n1 = compute_fixture::get(f.n1);
    const auto n2 = compute_fixture::get(f.n2), n3 = compute_fixture::get(f.n3);
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(n0[i], 3.0f);             // before the range: untouched
        EXPECT_EQ(n1[i], 3.0f * c[i]);      // computed from the existing n0
        EXPECT_EQ(n2[i], n1[i] - a[i]);
        EXPECT_EQ(n3[i], -777.0f);          // after the range: untouched
    }

    EXPECT_EQ(ggml_backend_graph_compute_range(f.backend, f.g, 2, 2), GGML_STATUS_SUCCESS); // empty
    EXPECT_NE(ggml_backend_graph_compute_range(f.backend, f.g, 3, 2), GGML_STATUS_SUCCESS);
    EXPECT_NE(ggml_backend_graph_compute_range(f.backend, f.g, -1, 2), GGML_STATUS_SUCCESS);
    EXPECT_NE(ggml_backend_graph_compute_range(f.backend, f.g, 0, 5), GGML_STATUS_SUCCESS);
    EXPECT_EQ(compute_fixture::get(f.n3)[0], -777.0f);
}

TEST(GraphAccess, consecutive_ranges_equal_whole_graph) {
    compute_fixture whole;
    ASSERT_EQ(ggml_backend_graph_compute(whole.backend, whole.g), GGML_STATUS_SUCCESS);
    const auto expect = compute_fixture::get(whole.n3);

    for (int k = 0; k <= 4; ++k) {
        compute_fixture f;
        ASSERT_EQ(ggml_backend_graph_compute_range(f.backend, f.g, 0, k), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_graph_compute_range(f.backend, f.g, k, 4), GGML_STATUS_SUCCESS);
        EXPECT_EQ(compute_fixture::get(f.n3), expect) << "split at " << k;
    }
}

// ---------------------------------------------------------------------------------------------
// CPU service ggml_ext_cpu_parallel_v1

namespace {

const ggml_ext_cpu_parallel_v1 * cpu_service() {
    return static_cast<const ggml_ext_cpu_parallel_v1 *>(
        ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), GGML_EXT_CPU_PARALLEL_V1));
}

struct backend_holder {
    ggml_backend_t b;
    explicit backend_holder(int n_threads) : b(ggml_backend_cpu_init()) { ggml_backend_cpu_set_n_threads(b, n_threads); }
    ~backend_holder() { ggml_backend_free(b); }
};

struct seen_threads {
    std::mutex                            mu;
    std::set<int>                         ith;
    std::set<int>                         nth;
    std::set<std::thread::id>             ids;
    static void task(int ith, int nth, void * data) {
        seen_threads *              s = static_cast<seen_threads *>(data);
        std::lock_guard<std::mutex> lock(s->mu);
        s->ith.insert(ith);
        s->nth.insert(nth);
        s->ids.insert(std::this_thread::get_id());
    }
};

} // namespace

TEST(CpuParallel, service_found_through_proc_address) {
    const ggml_ext_cpu_parallel_v1 * svc = cpu_service();
    ASSERT_NE(svc, nullptr);
    EXPECT_EQ(svc->version, 1u);
    EXPECT_NE(svc->parallel_for, nullptr);
    EXPECT_NE(svc->should_abort, nullptr);
    EXPECT_NE(svc->n_threads, nullptr);
    backend_holder be(3);
    EXPECT_EQ(svc->n_threads(be.b), 3);
}

TEST(CpuParallel, unknown_service_returns_null) {
    EXPECT_EQ(ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), "ggml_ext_cuda_context_v1"), nullptr);
    EXPECT_EQ(ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), "ggml_ext_cpu_parallel_v2"), nullptr);
}

TEST(CpuParallel, runs_on_n_threads_distinct_ith) {
    const ggml_ext_cpu_parallel_v1 * svc = cpu_service();
    ASSERT_NE(svc, nullptr);
    for (int n : {1, 3}) {
        backend_holder be(n);
        seen_threads   s;
        ASSERT_EQ(svc->parallel_for(be.b, seen_threads::task, &s), GGML_STATUS_SUCCESS);
        EXPECT_EQ((int) s.ith.size(), n);
        EXPECT_EQ(*s.ith.begin(), 0);
        EXPECT_EQ(*s.ith.rbegin(), n - 1);
        EXPECT_EQ(s.nth, std::set<int>{n});
        EXPECT_EQ((int) s.ids.size(), n);
        // the pool persists: a second run works the same
        seen_threads s2;
        ASSERT_EQ(svc->parallel_for(be.b, seen_threads::task, &s2), GGML_STATUS_SUCCESS);
        EXPECT_EQ((int) s2.ith.size(), n);
    }
}

TEST(CpuParallel, runs_on_external_threadpool) {
    const ggml_ext_cpu_parallel_v1 * svc = cpu_service();
    ASSERT_NE(svc, nullptr);
    ggml_threadpool_params p    = ggml_threadpool_params_default(2);
    ggml_threadpool *      pool = ggml_threadpool_new(&p);
    ASSERT_NE(pool, nullptr);
    {
        backend_holder be(2);
        ggml_backend_cpu_set_threadpool(be.b, pool);
        EXPECT_EQ(svc->n_threads(be.b), 2);
        seen_threads s;
        ASSERT_EQ(svc->parallel_for(be.b, seen_threads::task, &s), GGML_STATUS_SUCCESS);
        EXPECT_EQ(s.ith, (std::set<int>{0, 1}));
    }
    ggml_threadpool_free(pool);
}

namespace {

struct abort_state {
    std::atomic<bool> stop{false};
    std::atomic<int>  polls{0};
    std::atomic<int>  ran{0};
    std::atomic<int>  saw_abort{0};
    const ggml_ext_cpu_parallel_v1 * svc     = nullptr;
    ggml_backend_t                   backend = nullptr;

    static bool callback(void * data) {
        abort_state * s = static_cast<abort_state *>(data);
        s->polls++;
        return s->stop.load();
    }
    // thread 0 asks to stop; every thread then waits until should_abort reports it. No time
    // bound here (a bound would fail on a slow or loaded machine): should_abort must turn true
    // once the service polls the callback again, and if it never does the test hangs and ctest's
    // per-test limit reports it.
    static void task(int ith, int nth, void * data) {
        (void) nth;
        abort_state * s = static_cast<abort_state *>(data);
        s->ran++;
        if (ith == 0) s->stop.store(true);
        while (!s->svc->should_abort(s->backend)) std::this_thread::yield();
        s->saw_abort++;
    }
};

} // namespace

TEST(CpuParallel, abort_callback_stops_run) {
    const ggml_ext_cpu_parallel_v1 * svc = cpu_service();
    ASSERT_NE(svc, nullptr);
    backend_holder be(2);
    abort_state    s;
    s.svc     = svc;
    s.backend = be.b;
    ggml_backend_cpu_set_abort_callback(be.b, abort_state::callback, &s);

    // the callback fires during the run: every thread sees should_abort, the run reports it
    EXPECT_EQ(svc->parallel_for(be.b, abort_state::task, &s), GGML_STATUS_ABORTED);
    EXPECT_EQ(s.ran.load(), 2);
    EXPECT_EQ(s.saw_abort.load(), 2);

    // already asking to stop before the run: the task never starts
    s.ran = 0;
    EXPECT_EQ(svc->parallel_for(be.b, abort_state::task, &s), GGML_STATUS_ABORTED);
    EXPECT_EQ(s.ran.load(), 0);

    // the flag is per run: once the callback is content the backend works again
    s.stop = false;
    ggml_backend_cpu_set_abort_callback(be.b, nullptr, nullptr);
    seen_threads st;
    EXPECT_EQ(svc->parallel_for(be.b, seen_threads::task, &st), GGML_STATUS_SUCCESS);
    EXPECT_EQ(st.ith.size(), 2u);
    EXPECT_FALSE(svc->should_abort(be.b));
}

namespace {

struct nested_state {
    const ggml_ext_cpu_parallel_v1 * svc;
    ggml_backend_t                   backend;
    std::atomic<int>                 inner_calls{0};
    std::atomic<int>                 inner_nth_sum{0};
    std::atomic<int>                 inner_ok{0};

    static void inner(int ith, int nth, void * data) {
        nested_state * s = static_cast<nested_state *>(data);
        (void) ith;
        s->inner_calls++;
        s->inner_nth_sum += nth;
    }
    static void outer(int ith, int nth, void * data) {
        (void) ith;
        (void) nth;
        nested_state * s = static_cast<nested_state *>(data);
        if (s->svc->parallel_for(s->backend, inner, s) == GGML_STATUS_SUCCESS) s->inner_ok++;
    }
};

} // namespace

TEST(CpuParallel, nested_parallel_for_does_not_deadlock) {
    const ggml_ext_cpu_parallel_v1 * svc = cpu_service();
    ASSERT_NE(svc, nullptr);
    backend_holder be(2);
    nested_state   s{svc, be.b};
    ASSERT_EQ(svc->parallel_for(be.b, nested_state::outer, &s), GGML_STATUS_SUCCESS);
    EXPECT_EQ(s.inner_ok.load(), 2);
    EXPECT_EQ(s.inner_calls.load(), 2);   // each outer thread ran the inner task inline...
    EXPECT_EQ(s.inner_nth_sum.load(), 2); // ...as a single-thread run
}

namespace {

struct custom_cb_state {
    const ggml_ext_cpu_parallel_v1 * svc;
    ggml_backend_t                   backend;
    std::atomic<int>                 inner_calls{0};
    std::atomic<int>                 ok{0};

    static void inner(int, int nth, void * data) {
        custom_cb_state * s = static_cast<custom_cb_state *>(data);
        if (nth == 1) s->inner_calls++;
    }
    static void op(ggml_tensor * dst, int ith, int nth, void * userdata) {
        (void) dst;
        (void) ith;
        (void) nth;
        custom_cb_state * s = static_cast<custom_cb_state *>(userdata);
        if (s->svc->parallel_for(s->backend, inner, s) == GGML_STATUS_SUCCESS) s->ok++;
    }
};

} // namespace

// A native CUSTOM callback already runs on the pool, so the service must not start a pool run
TEST(CpuParallel, parallel_for_inside_native_custom_op_runs_inline) {
    const ggml_ext_cpu_parallel_v1 * svc = cpu_service();
    ASSERT_NE(svc, nullptr);
    backend_holder  be(2);
    custom_cb_state s{svc, be.b};
    ctx_holder      h(false, 16 * ggml_tensor_overhead() + ggml_graph_overhead() + 4096);
    ggml_tensor *   a   = new_vec(h.ctx, "a");
    ggml_tensor *   out = ggml_custom_4d(h.ctx, GGML_TYPE_F32, 4, 1, 1, 1, &a, 1, custom_cb_state::op, 2, &s);
    ggml_cgraph *   g   = ggml_new_graph(h.ctx);
    ggml_build_forward_expand(g, out);
    ASSERT_EQ(ggml_backend_graph_compute(be.b, g), GGML_STATUS_SUCCESS);
    EXPECT_EQ(s.ok.load(), 2);
    EXPECT_EQ(s.inner_calls.load(), 2);
}
