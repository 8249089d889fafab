// Header compatibility with upstream ggml for existing clients (issue 13 item 2): the
// declarations, constants and private-header layout that stable-diffusion.cpp-class programs
// compile against. Most checks are static_asserts (a difference fails the build of this test);
// the rest run the declared functions.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "ggml/src/ggml-impl.h" // the path clients use (installed as include/ggml/src/ggml-impl.h)

// --- declarations with upstream's exact types -------------------------------------------------

static_assert(std::is_same<decltype(&ggml_backend_tensor_copy), void (*)(const ggml_tensor *, ggml_tensor *)>::value,
              "ggml_backend_tensor_copy takes a const source");
static_assert(std::is_same<decltype(&ggml_backend_tensor_copy_async),
                           void (*)(ggml_backend_t, ggml_backend_t, const ggml_tensor *, ggml_tensor *)>::value,
              "ggml_backend_tensor_copy_async takes a const source");
static_assert(std::is_same<ggml_guid_t, uint8_t (*)[16]>::value, "ggml_guid_t is uint8_t (*)[16]");
static_assert(std::is_same<decltype(&ggml_guid_matches), bool (*)(ggml_guid_t, ggml_guid_t)>::value, "");
static_assert(std::is_same<ggml_backend_split_buffer_type_t,
                           ggml_backend_buffer_type_t (*)(int, const float *)>::value, "");

// --- constants with upstream's values ----------------------------------------------------------

static_assert(GGML_TYPE_Q4_0 == 2 && GGML_TYPE_Q4_1 == 3 && GGML_TYPE_Q5_0 == 6 && GGML_TYPE_Q5_1 == 7, "");
static_assert(GGML_TYPE_Q8_0 == 8 && GGML_TYPE_COUNT == 45, ""); // leejet/ggml: + F8_E4M3 = 43, F8_E5M2 = 44
static_assert(GGML_TYPE_F8_E4M3 == 43 && GGML_TYPE_F8_E5M2 == 44, "");

// GGML_MAX_NAME is overridable (#ifndef) and fixed to the library's build value
static_assert(GGML_MAX_NAME == GGML_BUILD_MAX_NAME, "");
static_assert(sizeof(((ggml_tensor *) nullptr)->name) == GGML_MAX_NAME, "");
static_assert(sizeof(ggml_tensor) % GGML_MEM_ALIGN == 0, "upstream asserts the tensor size is aligned");

// --- ggml-impl.h: clients build a ggml_cgraph positionally ---------------------------------------

static_assert(offsetof(ggml_cgraph, size) < offsetof(ggml_cgraph, n_nodes) &&
                  offsetof(ggml_cgraph, n_nodes) < offsetof(ggml_cgraph, n_leafs) &&
                  offsetof(ggml_cgraph, n_leafs) < offsetof(ggml_cgraph, nodes) &&
                  offsetof(ggml_cgraph, nodes) < offsetof(ggml_cgraph, grads) &&
                  offsetof(ggml_cgraph, grads) < offsetof(ggml_cgraph, grad_accs) &&
                  offsetof(ggml_cgraph, grad_accs) < offsetof(ggml_cgraph, leafs) &&
                  offsetof(ggml_cgraph, leafs) < offsetof(ggml_cgraph, use_counts) &&
                  offsetof(ggml_cgraph, use_counts) < offsetof(ggml_cgraph, visited_hash_set) &&
                  offsetof(ggml_cgraph, visited_hash_set) < offsetof(ggml_cgraph, order) &&
                  offsetof(ggml_cgraph, order) < offsetof(ggml_cgraph, uid),
              "ggml_cgraph fields in upstream's order");

namespace {

int unused_macro_compiles(int x) {
    GGML_UNUSED(x);
    return 0;
}

TEST(ClientHeaders, UnusedMacroIsAnExpression) {
    EXPECT_EQ(unused_macro_compiles(3), 0);
}

TEST(ClientHeaders, GuidMatchesComparesAllSixteenBytes) {
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ASSERT_TRUE(cpu);
    ggml_guid_t g = ggml_backend_guid(cpu.get());
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(ggml_guid_matches(g, g));
    ggml_guid other;
    for (int i = 0; i < 16; ++i) other[i] = (*g)[i];
    EXPECT_TRUE(ggml_guid_matches(g, &other));
    other[15] ^= 1; // differ only in the last byte
    EXPECT_FALSE(ggml_guid_matches(g, &other));
    EXPECT_TRUE(ggml_backend_is_cpu(cpu.get()));
}

TEST(ClientHeaders, ConstSourceCopy) {
    ggml_init_params ip = { 4 * ggml_tensor_overhead(), nullptr, true };
    ggml_context_ptr ctx(ggml_init(ip));
    ASSERT_TRUE(ctx);
    ggml_tensor * a = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 5);
    ggml_tensor * b = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 5);
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), cpu.get()));
    ASSERT_TRUE(buf);
    const float in[5] = { 1, -2, 3.5f, 0, 7 };
    ggml_backend_tensor_set(a, in, 0, sizeof(in));
    const ggml_tensor * ca = a;
    ggml_backend_tensor_copy(ca, b);
    float out[5] = {};
    ggml_backend_tensor_get(b, out, 0, sizeof(out));
    for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], in[i]);
    ggml_backend_tensor_copy_async(cpu.get(), cpu.get(), ca, b);
}

// ggml-cpp.h: each alias frees its object with the matching call (leaks show under ASan).
TEST(ClientHeaders, SmartPointersOwnAndFree) {
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ASSERT_TRUE(cpu);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_buffer(cpu.get(), 256));
    ASSERT_TRUE(buf);
    ggml_gallocr_ptr galloc(ggml_gallocr_new(ggml_backend_get_default_buffer_type(cpu.get())));
    ASSERT_TRUE(galloc);
    ggml_backend_t backends[1] = { cpu.get() };
    ggml_backend_sched_ptr sched(ggml_backend_sched_new(backends, nullptr, 1, 64, false, true));
    ASSERT_TRUE(sched);
    ggml_backend_event_ptr ev(ggml_backend_event_new(ggml_backend_get_device(cpu.get()))); // NULL on CPU
    EXPECT_FALSE(ev);
    ggml_init_params ip = { 1024, nullptr, false };
    ggml_context_ptr ctx(ggml_init(ip));
    EXPECT_TRUE(ctx);
    sched.reset(); // the scheduler before the backend it references
}

TEST(ClientHeaders, GraphBuiltPositionally) {
    ggml_init_params ip = { 8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_tensor * a = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_tensor * s = ggml_sqr(ctx.get(), a);
    ggml_cgraph * g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, s);
    // a by-value copy through positional initialisation, the way clients slice graphs
    ggml_cgraph copy = { g->size,      g->n_nodes,    g->n_leafs,         g->nodes,
                         g->grads,     g->grad_accs,  g->leafs,           g->use_counts,
                         g->visited_hash_set,         g->order,           g->uid };
    EXPECT_EQ(ggml_graph_n_nodes(&copy), 1);
    EXPECT_EQ(ggml_graph_node(&copy, 0), s);
}

} // namespace
