// test-plan-replay.cpp — whole-plan device replay without a device (spec, "sd.cpp integration":
// CAPTURE_SAFE whole-plan capture, REPLAY_REUSABLE and its cache): the plan key, the decisions of
// ggml_plan_replay_state (backend/plan-replay-cache.h) and the plan-hook protocol over a fake
// capture runtime (backend/plan-replay-hooks.h). Plans are real ggml graphs in no_alloc contexts
// whose tensors get fake device addresses (never dereferenced); executors are fake handles whose
// releases are recorded.

#include "backend/plan-replay-cache.h"
#include "backend/plan-replay-hooks.h"

#include "ggml-backend.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace {

using action = ggml_plan_replay_action;

constexpr size_t MiB = 1024u * 1024u;

// Two registered-kernel stand-ins: only their addresses enter the key.
ggml_ext_kernel_desc kernel_a = {};
ggml_ext_kernel_desc kernel_b = {};

// ---------------------------------------------------------------------------------------------
// Fake executors: an int id per handle; releases are recorded in order.

std::vector<int> & released() {
    static std::vector<int> r;
    return r;
}

void release_fake(void * handle) {
    int * id = static_cast<int *>(handle);
    released().push_back(*id);
    delete id;
}

ggml_plan_executor fake_executor(int id) { return ggml_plan_executor(new int(id), release_fake); }

int id_of(void * handle) { return handle != nullptr ? *static_cast<int *>(handle) : -1; }

bool was_released(int id) { return std::count(released().begin(), released().end(), id) == 1; }

// ---------------------------------------------------------------------------------------------
// A scheduled plan over a three-node graph: c = a + b (native step), d = c * b, e = d * 0.5
// (one extension step of two nodes). Every tensor sits at base + a fixed offset.

struct plan_options {
    uintptr_t base            = 0x10000000;
    uint32_t  ext_flags       = GGML_EXT_KERNEL_CAPTURE_SAFE | GGML_EXT_KERNEL_REPLAY_REUSABLE;
    size_t    workspace_bytes = 4096;
    const ggml_ext_kernel_desc * kernel = &kernel_a;
    int64_t   rows            = 4;
    ggml_type type            = GGML_TYPE_F32;
    float     scale           = 0.5f;
    bool      swap_mul        = false; // d = b * c instead of c * b
};

struct fake_plan {
    ggml_context *                      ctx = nullptr;
    ggml_tensor *                       a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr, *e = nullptr;
    std::vector<ggml_backend_plan_step> steps;
    ggml_backend_plan_info              info{};
    int                                 identity_tag = 0; // plan_identity points here

    ~fake_plan() {
        if (ctx != nullptr) ggml_free(ctx);
    }
};

std::unique_ptr<fake_plan> make_plan(const plan_options & o = {}) {
    auto p = std::make_unique<fake_plan>();
    ggml_init_params params{ 1024 * 1024, nullptr, true };
    p->ctx = ggml_init(params);
    p->a   = ggml_new_tensor_2d(p->ctx, o.type, 8, o.rows);
    p->b   = ggml_new_tensor_2d(p->ctx, o.type, 8, o.rows);
    p->c   = ggml_add(p->ctx, p->a, p->b);
    p->d   = o.swap_mul ? ggml_mul(p->ctx, p->b, p->c) : ggml_mul(p->ctx, p->c, p->b);
    p->e   = ggml_scale(p->ctx, p->d, o.scale);
    ggml_tensor * all[] = { p->a, p->b, p->c, p->d, p->e };
    for (size_t i = 0; i < 5; i++) all[i]->data = reinterpret_cast<void *>(o.base + i * 0x1000);

    ggml_cgraph * graph = ggml_new_graph(p->ctx);
    ggml_build_forward_expand(graph, p->e);

    p->steps = {
        { 0, 1, nullptr, 0, 0 },
        { 1, 2, o.kernel, o.ext_flags, o.workspace_bytes },
    };
    p->info.graph                   = graph;
    p->info.i_start                 = 0;
    p->info.i_end                   = ggml_graph_n_nodes(graph);
    p->info.steps                   = p->steps.data();
    p->info.n_steps                 = (int) p->steps.size();
    p->info.n_ext_steps             = 1;
    p->info.workspace               = nullptr;
    p->info.workspace_bytes         = o.workspace_bytes;
    p->info.plan_identity           = &p->identity_tag;
    p->info.all_ext_capture_safe    = (o.ext_flags & GGML_EXT_KERNEL_CAPTURE_SAFE) != 0;
    p->info.all_ext_replay_reusable = (o.ext_flags & GGML_EXT_KERNEL_CAPTURE_SAFE) != 0 &&
                                      (o.ext_flags & GGML_EXT_KERNEL_REPLAY_REUSABLE) != 0;
    return p;
}

const void * const stream_1 = reinterpret_cast<const void *>(0x51);
const void * const stream_2 = reinterpret_cast<const void *>(0x52);

// Runs a plan through warm-up and capture; the capture yields executor `id`.
void capture(ggml_plan_replay_state & state, const fake_plan & p, int id, const void * stream = stream_1) {
    const ggml_plan_replay_env env;
    ASSERT_EQ(state.begin(p.info, stream, env), action::WARM_UP);
    ASSERT_EQ(state.begin(p.info, stream, env), action::CAPTURE);
    state.capture_succeeded(fake_executor(id));
}

ggml_plan_key key_of(const fake_plan & p, const void * stream = stream_1) {
    ggml_plan_key key;
    EXPECT_TRUE(ggml_plan_key_build(p.info, stream, &key));
    return key;
}

class PlanReplay : public ::testing::Test {
  protected:
    void SetUp() override { released().clear(); }
    ggml_plan_replay_env  env;
    ggml_plan_replay_state state;
};

// =============================================================================================
// Plan keys

TEST_F(PlanReplay, key_is_equal_for_equal_plans_in_different_metadata_arenas) {
    auto p1 = make_plan();
    auto p2 = make_plan();
    EXPECT_EQ(key_of(*p1), key_of(*p2));
}

TEST_F(PlanReplay, key_never_dereferences_old_graph) {
    auto          p1  = make_plan();
    ggml_plan_key key = key_of(*p1);
    p1.reset(); // the graph, its tensors and its metadata arena are gone
    ggml_plan_key copy = key;
    auto          p2   = make_plan();
    EXPECT_EQ(copy, key_of(*p2));
    EXPECT_EQ(key, copy);
    plan_options moved;
    moved.base = 0x20000000;
    auto p3    = make_plan(moved);
    EXPECT_NE(key, key_of(*p3));
}

TEST_F(PlanReplay, key_covers_addresses_metadata_op_params_kernels_workspace_and_stream) {
    const ggml_plan_key base = key_of(*make_plan());
    plan_options        o;
    o.base = 0x20000000;
    EXPECT_NE(base, key_of(*make_plan(o))) << "data address";
    o      = {};
    o.rows = 5;
    EXPECT_NE(base, key_of(*make_plan(o))) << "shape";
    o      = {};
    o.type = GGML_TYPE_F16;
    EXPECT_NE(base, key_of(*make_plan(o))) << "type";
    o       = {};
    o.scale = 0.25f;
    EXPECT_NE(base, key_of(*make_plan(o))) << "op params";
    o        = {};
    o.kernel = &kernel_b;
    EXPECT_NE(base, key_of(*make_plan(o))) << "selected kernel";
    o           = {};
    o.ext_flags = GGML_EXT_KERNEL_CAPTURE_SAFE;
    EXPECT_NE(base, key_of(*make_plan(o))) << "kernel flags";
    o                 = {};
    o.workspace_bytes = 8192;
    EXPECT_NE(base, key_of(*make_plan(o))) << "workspace requirement";
    o          = {};
    o.swap_mul = true;
    EXPECT_NE(base, key_of(*make_plan(o))) << "graph structure (operand order)";
    EXPECT_NE(base, key_of(*make_plan(), stream_2)) << "stream";

    auto p = make_plan();
    p->c->nb[1] += 64;
    EXPECT_NE(base, key_of(*p)) << "strides";
}

TEST_F(PlanReplay, key_covers_the_workspace_address) {
    ggml_backend_buffer_t ws1 = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 4096);
    ggml_backend_buffer_t ws2 = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 4096);
    ASSERT_NE(ws1, nullptr);
    ASSERT_NE(ws2, nullptr);
    auto p1            = make_plan();
    auto p2            = make_plan();
    p1->info.workspace = ws1;
    p2->info.workspace = ws2;
    EXPECT_NE(key_of(*p1), key_of(*p2));
    p2->info.workspace = ws1;
    EXPECT_EQ(key_of(*p1), key_of(*p2));
    ggml_backend_buffer_free(ws1);
    ggml_backend_buffer_free(ws2);
}

TEST_F(PlanReplay, malformed_plan_info_is_rejected_and_keeps_ordinary_dispatch) {
    ggml_plan_key key;
    auto          p = make_plan();

    ggml_backend_plan_info bad = p->info;
    bad.graph                  = nullptr;
    EXPECT_FALSE(ggml_plan_key_build(bad, stream_1, &key));
    bad       = p->info;
    bad.i_end = p->info.i_end + 1;
    EXPECT_FALSE(ggml_plan_key_build(bad, stream_1, &key));
    bad         = p->info;
    bad.i_start = 2;
    bad.i_end   = 1;
    EXPECT_FALSE(ggml_plan_key_build(bad, stream_1, &key));
    bad       = p->info;
    bad.steps = nullptr;
    EXPECT_FALSE(ggml_plan_key_build(bad, stream_1, &key));
    bad       = p->info;
    bad.i_end = 2; // the extension step [1, 3) leaves the range
    EXPECT_FALSE(ggml_plan_key_build(bad, stream_1, &key));
    EXPECT_FALSE(ggml_plan_key_build(p->info, stream_1, nullptr));

    for (int i = 0; i < 3; i++) EXPECT_EQ(state.begin(bad, stream_1, env), action::ORDINARY);
}

// =============================================================================================
// Capture decisions

TEST_F(PlanReplay, first_execution_warms_up_then_captures_then_replays) {
    auto p = make_plan();
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::WARM_UP);
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::CAPTURE);
    state.capture_succeeded(fake_executor(1));
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(state.begin(p->info, stream_1, env), action::REPLAY);
        EXPECT_EQ(id_of(state.replay_handle()), 1);
    }
    EXPECT_TRUE(released().empty());
}

TEST_F(PlanReplay, changing_a_tensor_address_invalidates_and_rewarms) {
    auto p = make_plan();
    capture(state, *p, 1);
    p->b->data = reinterpret_cast<void *>(0x30000000); // same plan identity, new address
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::WARM_UP);
    EXPECT_TRUE(was_released(1));
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::CAPTURE);
    state.capture_succeeded(fake_executor(2));
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::REPLAY);
    EXPECT_EQ(id_of(state.replay_handle()), 2);
}

TEST_F(PlanReplay, changing_the_stream_invalidates) {
    auto p = make_plan();
    capture(state, *p, 1, stream_1);
    EXPECT_EQ(state.begin(p->info, stream_2, env), action::WARM_UP);
    EXPECT_TRUE(was_released(1));
    EXPECT_EQ(state.begin(p->info, stream_2, env), action::CAPTURE);
}

TEST_F(PlanReplay, changing_shapes_op_params_kernels_or_workspace_invalidates_even_with_the_same_identity) {
    auto edits = std::vector<void (*)(fake_plan &)>{
        [](fake_plan & p) { p.c->ne[1] = 2; },
        [](fake_plan & p) { p.d->nb[2] *= 2; },
        [](fake_plan & p) { p.e->op_params[0] ^= 1; },
        [](fake_plan & p) { p.steps[1].kernel = &kernel_b; },
        [](fake_plan & p) { p.steps[1].workspace = 1; },
        [](fake_plan & p) { p.info.workspace_bytes = 1; },
    };
    int id = 1;
    for (auto edit : edits) {
        ggml_plan_replay_state s;
        auto                   p = make_plan();
        capture(s, *p, id);
        edit(*p);
        EXPECT_EQ(s.begin(p->info, stream_1, env), action::WARM_UP) << "edit " << id;
        EXPECT_TRUE(was_released(id));
        id++;
    }
}

TEST_F(PlanReplay, mixed_plan_with_unflagged_extension_keeps_ordinary_dispatch) {
    plan_options o;
    o.ext_flags = 0; // the extension step did not opt in
    auto p      = make_plan(o);
    for (int i = 0; i < 4; i++) EXPECT_EQ(state.begin(p->info, stream_1, env), action::ORDINARY);
    EXPECT_EQ(state.n_live(), 0u);
}

TEST_F(PlanReplay, plan_whose_extensions_all_opt_in_is_captured_with_its_native_fragments) {
    plan_options o;
    o.ext_flags = GGML_EXT_KERNEL_CAPTURE_SAFE;
    auto p      = make_plan(o);
    ASSERT_EQ(p->steps[0].kernel, nullptr); // a native step is part of the plan
    capture(state, *p, 1);
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::REPLAY);
}

TEST_F(PlanReplay, plan_without_extension_steps_is_captured_whole) {
    // "when every selected extension opts in": with none selected, the scheduler marks the plan
    // capture-safe and reusable, and its native fragments are captured as one graph
    auto p = make_plan();
    p->steps.pop_back();
    p->steps[0].n_nodes             = p->info.i_end;
    p->info.n_steps                 = 1;
    p->info.n_ext_steps             = 0;
    p->info.workspace_bytes         = 0;
    p->info.all_ext_capture_safe    = true;
    p->info.all_ext_replay_reusable = true;
    capture(state, *p, 1);
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::REPLAY);
    auto rebuilt = make_plan();
    rebuilt->steps                        = p->steps;
    rebuilt->info.steps                   = rebuilt->steps.data();
    rebuilt->info.n_steps                 = 1;
    rebuilt->info.n_ext_steps             = 0;
    rebuilt->info.workspace_bytes         = 0;
    EXPECT_EQ(state.begin(rebuilt->info, stream_1, env), action::REPLAY);
}

TEST_F(PlanReplay, disable_graphs_env_keeps_ordinary_dispatch) {
    EXPECT_FALSE(ggml_plan_replay_env_disables_graphs(nullptr));
    EXPECT_TRUE(ggml_plan_replay_env_disables_graphs("1"));
    env.graphs_disabled = true;
    auto p              = make_plan();
    for (int i = 0; i < 4; i++) EXPECT_EQ(state.begin(p->info, stream_1, env), action::ORDINARY);
}

TEST_F(PlanReplay, legacy_scratch_pool_keeps_ordinary_dispatch) {
    env.stable_scratch = false; // no VMM: native scratch may move between executions
    auto p             = make_plan();
    for (int i = 0; i < 4; i++) EXPECT_EQ(state.begin(p->info, stream_1, env), action::ORDINARY);
}

TEST_F(PlanReplay, enclosing_capture_records_directly_without_nested_capture) {
    auto                 p         = make_plan();
    ggml_plan_replay_env enclosing = env;
    enclosing.enclosing_capture    = true;
    for (int i = 0; i < 3; i++) EXPECT_EQ(state.begin(p->info, stream_1, enclosing), action::RECORD_DIRECTLY);
    // a recording is no execution: the plan still warms up first
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::WARM_UP);
    EXPECT_EQ(state.begin(p->info, stream_1, enclosing), action::RECORD_DIRECTLY);
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::CAPTURE);
    state.capture_succeeded(fake_executor(1));
    // a captured plan inside someone else's capture is recorded again, not replayed into it
    EXPECT_EQ(state.begin(p->info, stream_1, enclosing), action::RECORD_DIRECTLY);
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::REPLAY);
}

TEST_F(PlanReplay, capture_failure_is_not_retried) {
    auto p = make_plan();
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::WARM_UP);
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::CAPTURE);
    state.capture_failed();
    for (int i = 0; i < 3; i++) EXPECT_EQ(state.begin(p->info, stream_1, env), action::ORDINARY);
}

TEST_F(PlanReplay, failed_launch_drops_the_executor_and_rewarms) {
    auto p = make_plan();
    capture(state, *p, 1);
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::REPLAY);
    state.replay_failed();
    EXPECT_TRUE(was_released(1));
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::WARM_UP);
}

TEST_F(PlanReplay, plans_over_different_node_ranges_keep_their_own_captures) {
    // two splits of one backend (say, a CPU split in between): both stay captured
    auto first = make_plan();
    auto second = make_plan();
    second->steps.erase(second->steps.begin());
    second->info.steps   = second->steps.data();
    second->info.n_steps = 1;
    second->info.n_ext_steps = 1;
    second->info.i_start = 1;
    first->steps.pop_back();
    first->info.n_steps = 1;
    first->info.n_ext_steps = 0;
    first->info.i_end   = 1;
    capture(state, *first, 1);
    capture(state, *second, 2);
    for (int i = 0; i < 2; i++) {
        EXPECT_EQ(state.begin(first->info, stream_1, env), action::REPLAY);
        EXPECT_EQ(id_of(state.replay_handle()), 1);
        EXPECT_EQ(state.begin(second->info, stream_1, env), action::REPLAY);
        EXPECT_EQ(id_of(state.replay_handle()), 2);
    }
    EXPECT_EQ(state.n_live(), 2u);
}

// =============================================================================================
// Reuse across scheduler rebuilds

TEST_F(PlanReplay, reusable_plan_survives_scheduler_rebuild) {
    auto old_plan = make_plan();
    capture(state, *old_plan, 1);
    EXPECT_EQ(state.begin(old_plan->info, stream_1, env), action::REPLAY);

    old_plan.reset(); // the scheduler rebuilds: a new plan in a new metadata arena
    auto rebuilt = make_plan();
    EXPECT_EQ(state.begin(rebuilt->info, stream_1, env), action::REPLAY);
    EXPECT_EQ(id_of(state.replay_handle()), 1);
    EXPECT_TRUE(released().empty());
    EXPECT_EQ(state.cache().size(), 0u); // the executor moved back into a live plan
}

TEST_F(PlanReplay, reusable_plan_with_a_different_key_after_rebuild_warms_up) {
    auto old_plan = make_plan();
    capture(state, *old_plan, 1);
    plan_options o;
    o.base       = 0x40000000;
    auto rebuilt = make_plan(o);
    EXPECT_EQ(state.begin(rebuilt->info, stream_1, env), action::WARM_UP);
    EXPECT_EQ(state.cache().size(), 1u); // kept for a later plan equal to the old one
    EXPECT_TRUE(released().empty());
}

TEST_F(PlanReplay, non_reusable_plan_is_not_reused_across_rebuilds) {
    plan_options o;
    o.ext_flags   = GGML_EXT_KERNEL_CAPTURE_SAFE;
    auto old_plan = make_plan(o);
    capture(state, *old_plan, 1);
    auto rebuilt = make_plan(o);
    EXPECT_EQ(state.begin(rebuilt->info, stream_1, env), action::WARM_UP);
    EXPECT_TRUE(was_released(1));
    EXPECT_EQ(state.cache().size(), 0u);
}

TEST_F(PlanReplay, cache_keeps_at_most_16_retired_plans_oldest_evicted) {
    std::vector<std::unique_ptr<fake_plan>> plans;
    for (int i = 0; i <= 17; i++) {
        plan_options o;
        o.base = 0x10000000 + (uintptr_t) i * 0x100000;
        plans.push_back(make_plan(o));
    }
    // plans 0..16 are captured in turn; each next plan over the same nodes retires the previous
    for (int i = 0; i <= 16; i++) capture(state, *plans[i], i);
    EXPECT_EQ(state.begin(plans[17]->info, stream_1, env), action::WARM_UP); // retires plan 16
    EXPECT_EQ(state.cache().size(), 16u);
    EXPECT_EQ(released(), std::vector<int>{ 0 }); // 17 retired: the oldest went

    auto again_1 = make_plan([] { plan_options o; o.base = 0x10000000 + 1 * 0x100000; return o; }());
    EXPECT_EQ(state.begin(again_1->info, stream_1, env), action::REPLAY);
    EXPECT_EQ(id_of(state.replay_handle()), 1);
    auto again_0 = make_plan();
    EXPECT_EQ(state.begin(again_0->info, stream_1, env), action::WARM_UP);
}

TEST_F(PlanReplay, cache_keeps_at_most_256_MiB_of_workspaces) {
    std::vector<std::unique_ptr<fake_plan>> plans;
    for (int i = 0; i < 4; i++) {
        plan_options o;
        o.base            = 0x10000000 + (uintptr_t) i * 0x100000;
        o.workspace_bytes = 100 * MiB;
        plans.push_back(make_plan(o));
    }
    for (int i = 0; i < 3; i++) capture(state, *plans[i], i);
    EXPECT_EQ(state.begin(plans[3]->info, stream_1, env), action::WARM_UP);
    // 3 x 100 MiB retired: the oldest is evicted to stay within 256 MiB
    EXPECT_EQ(state.cache().size(), 2u);
    EXPECT_EQ(state.cache().workspace_bytes(), 200 * MiB);
    EXPECT_EQ(released(), std::vector<int>{ 0 });
}

TEST_F(PlanReplay, oversized_workspace_keeps_plan_local_capture_only) {
    plan_options o;
    o.workspace_bytes = 256 * MiB + 1;
    auto p            = make_plan(o);
    capture(state, *p, 1);
    EXPECT_EQ(state.begin(p->info, stream_1, env), action::REPLAY); // plan-local replay works
    auto rebuilt = make_plan(o);
    EXPECT_EQ(state.begin(rebuilt->info, stream_1, env), action::WARM_UP);
    EXPECT_TRUE(was_released(1));
    EXPECT_EQ(state.cache().size(), 0u);
}

TEST_F(PlanReplay, cache_unit_bounds_and_take) {
    ggml_plan_replay_cache cache(2, 10);
    auto                   p0 = make_plan();
    plan_options           o;
    o.base  = 0x50000000;
    auto p1 = make_plan(o);
    o.base  = 0x60000000;
    auto p2 = make_plan(o);
    EXPECT_TRUE(cache.retire(key_of(*p0), 4, fake_executor(0)));
    EXPECT_TRUE(cache.retire(key_of(*p1), 4, fake_executor(1)));
    EXPECT_FALSE(cache.retire(key_of(*p2), 11, fake_executor(2))); // alone over the bound
    EXPECT_TRUE(was_released(2));
    EXPECT_TRUE(cache.retire(key_of(*p2), 4, fake_executor(3))); // 12 bytes > 10: evicts 0
    EXPECT_TRUE(was_released(0));
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_EQ(cache.workspace_bytes(), 8u);
    ggml_plan_executor e = cache.take(key_of(*p1));
    EXPECT_EQ(id_of(e.handle()), 1);
    EXPECT_FALSE(cache.take(key_of(*p1)));
    EXPECT_EQ(cache.workspace_bytes(), 4u);
    cache.clear();
    EXPECT_TRUE(was_released(3));
}

TEST_F(PlanReplay, destroy_releases_everything) {
    auto a = make_plan();
    capture(state, *a, 1);
    auto b = make_plan([] { plan_options o; o.base = 0x70000000; return o; }());
    capture(state, *b, 2); // retires a into the cache
    EXPECT_EQ(state.cache().size(), 1u);
    state.clear();
    EXPECT_TRUE(was_released(1));
    EXPECT_TRUE(was_released(2));
    EXPECT_EQ(state.n_live(), 0u);
    EXPECT_EQ(state.cache().size(), 0u);
}

// =============================================================================================
// Plan-hook protocol over a fake capture runtime

struct fake_runtime : ggml_plan_capture_runtime {
    bool other_capture = false; // someone else captures the stream
    bool query_ok      = true;
    bool begin_ok      = true;
    bool end_ok        = true;
    bool launch_ok     = true;
    bool work_is_ok    = true;
    int  next_id       = 100;

    bool                open    = false;
    int                 begins  = 0, ends = 0, aborts = 0;
    std::vector<int>    launches;

    bool stream_is_capturing(const void *, bool * capturing) override {
        *capturing = other_capture || open;
        return query_ok;
    }
    bool begin_capture(const void *) override {
        begins++;
        if (!begin_ok) return false;
        open = true;
        return true;
    }
    bool end_capture(const void *, ggml_plan_executor * exec) override {
        ends++;
        open = false;
        if (!end_ok) return false;
        *exec = fake_executor(next_id++);
        return true;
    }
    void abort_capture(const void *) override {
        aborts++;
        open = false;
    }
    bool launch(void * executor, const void *) override {
        if (!launch_ok) return false;
        launches.push_back(id_of(executor));
        return true;
    }
    bool work_ok() override { return work_is_ok; }
};

class PlanReplayHooks : public PlanReplay {
  protected:
    ggml_plan_replay_session session;
    fake_runtime             rt;

    ggml_backend_plan_action begin(const fake_plan & p) {
        return ggml_plan_replay_begin(session, rt, &p.info, stream_1, env);
    }
    ggml_status end() { return ggml_plan_replay_end(session, rt); }
};

TEST_F(PlanReplayHooks, first_execution_warms_up_then_captures_then_replays) {
    auto p = make_plan();
    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE); // warm-up
    EXPECT_EQ(rt.begins, 0);
    EXPECT_EQ(end(), GGML_STATUS_SUCCESS);

    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE); // the scheduler records into the capture
    EXPECT_EQ(rt.begins, 1);
    EXPECT_TRUE(rt.open);
    EXPECT_EQ(ggml_plan_replay_step_end(session, rt), GGML_STATUS_SUCCESS);
    EXPECT_EQ(end(), GGML_STATUS_SUCCESS); // ends, instantiates, launches
    EXPECT_FALSE(rt.open);
    EXPECT_EQ(rt.launches, std::vector<int>{ 100 });

    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_REPLAYED);
    EXPECT_EQ(end(), GGML_STATUS_SUCCESS);
    EXPECT_EQ(rt.launches, (std::vector<int>{ 100, 100 }));
    EXPECT_EQ(rt.begins, 1);
}

TEST_F(PlanReplayHooks, enclosing_capture_records_directly_without_nested_capture) {
    auto p           = make_plan();
    rt.other_capture = true;
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
        EXPECT_EQ(session.last_action, action::RECORD_DIRECTLY);
        EXPECT_EQ(end(), GGML_STATUS_SUCCESS);
    }
    EXPECT_EQ(rt.begins, 0);
    EXPECT_TRUE(rt.launches.empty());
}

TEST_F(PlanReplayHooks, capture_failure_propagates_without_retry) {
    auto p    = make_plan();
    rt.end_ok = false;
    begin(*p);
    end();
    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(rt.begins, 1);
    EXPECT_EQ(end(), GGML_STATUS_FAILED); // propagated
    EXPECT_TRUE(rt.launches.empty());     // the partial recording is not run
    for (int i = 0; i < 2; i++) {         // later executions dispatch ordinarily, no new capture
        EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
        EXPECT_EQ(session.last_action, action::ORDINARY);
        EXPECT_EQ(end(), GGML_STATUS_SUCCESS);
    }
    EXPECT_EQ(rt.begins, 1);
}

TEST_F(PlanReplayHooks, failing_step_during_capture_ends_the_capture_and_propagates) {
    auto p = make_plan();
    begin(*p);
    end();
    begin(*p);
    ASSERT_TRUE(rt.open);
    rt.work_is_ok = false;
    EXPECT_EQ(ggml_plan_replay_step_end(session, rt), GGML_STATUS_FAILED);
    EXPECT_FALSE(rt.open); // the stream is usable again at once
    EXPECT_EQ(rt.aborts, 1);
    EXPECT_EQ(end(), GGML_STATUS_FAILED);
    EXPECT_TRUE(rt.launches.empty());
    rt.work_is_ok = true;
    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(session.last_action, action::ORDINARY);
}

TEST_F(PlanReplayHooks, capture_that_cannot_start_runs_ordinarily) {
    auto p      = make_plan();
    rt.begin_ok = false;
    begin(*p);
    end();
    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(session.last_action, action::ORDINARY);
    EXPECT_EQ(end(), GGML_STATUS_SUCCESS);
}

TEST_F(PlanReplayHooks, failed_replay_launch_skips_the_range_and_propagates) {
    auto p = make_plan();
    begin(*p);
    end();
    begin(*p);
    end();
    rt.launch_ok = false;
    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_REPLAYED); // no silent re-execution
    EXPECT_EQ(end(), GGML_STATUS_FAILED);
    rt.launch_ok = true;
    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(session.last_action, action::WARM_UP);
}

TEST_F(PlanReplayHooks, missing_plan_end_closes_the_open_capture_at_the_next_begin) {
    auto p = make_plan();
    begin(*p);
    end();
    begin(*p); // capture opened, plan_end never comes (the scheduler stopped on an error)
    ASSERT_TRUE(rt.open);
    EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(rt.aborts, 1);
    EXPECT_FALSE(rt.open);
    EXPECT_EQ(session.last_action, action::ORDINARY);
}

TEST_F(PlanReplayHooks, disable_graphs_env_keeps_ordinary_dispatch) {
    env.graphs_disabled = true;
    auto p              = make_plan();
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
        EXPECT_EQ(end(), GGML_STATUS_SUCCESS);
    }
    EXPECT_EQ(rt.begins, 0);
}

TEST_F(PlanReplayHooks, failed_capture_query_keeps_ordinary_dispatch) {
    rt.query_ok = false;
    auto p      = make_plan();
    for (int i = 0; i < 3; i++) EXPECT_EQ(begin(*p), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(rt.begins, 0);
}

TEST_F(PlanReplayHooks, no_plan_info_executes) {
    EXPECT_EQ(ggml_plan_replay_begin(session, rt, nullptr, stream_1, env), GGML_BACKEND_PLAN_EXECUTE);
    EXPECT_EQ(end(), GGML_STATUS_SUCCESS);
}

} // namespace
