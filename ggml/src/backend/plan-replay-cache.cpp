// plan-replay-cache.cpp — plan keys, the reusable-plan cache and the per-backend replay
// decisions (see plan-replay-cache.h for the rules and why they are what they are).

#include "backend/plan-replay-cache.h"

#include "ggml.h"

#include <cstring>
#include <unordered_map>
#include <utility>

// =============================================================================================
// Plan key

namespace {

// Appends the words of one plan and hashes them as it goes (the hash only speeds up unequal
// comparisons; equality always compares every word).
struct key_writer {
    ggml_plan_key & key;

    void put(uint64_t w) {
        key.words.push_back(w);
        // splitmix64 finaliser over the running hash: cheap and spreads single-bit differences
        uint64_t z = key.hash ^ (w + 0x9e3779b97f4a7c15ull + (key.hash << 6) + (key.hash >> 2));
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        key.hash   = z ^ (z >> 31);
    }
    void put_ptr(const void * p) { put((uint64_t) (uintptr_t) p); }

    // what device work reads of a tensor: its layout and where it lives
    void put_layout(const ggml_tensor * t) {
        put((uint64_t) t->type);
        for (int d = 0; d < GGML_MAX_DIMS; d++) put((uint64_t) t->ne[d]);
        for (int d = 0; d < GGML_MAX_DIMS; d++) put((uint64_t) t->nb[d]);
        put_ptr(t->data);
        put_ptr(t->extra); // backend-private per-tensor state (upstream: split buffers)
    }
};

// Distinct tags keep differently shaped parts of the key from lining up by accident.
enum : uint64_t {
    TAG_HEADER = 0x706c616e6b657931ull, // "plankey1"
    TAG_NODE   = 1,
    TAG_SRC    = 2,
    TAG_NO_SRC = 3,
    TAG_STEP   = 4,
};

bool plan_info_valid(const ggml_backend_plan_info & info) {
    if (info.graph == nullptr) return false;
    const int n_nodes = ggml_graph_n_nodes(info.graph);
    if (info.i_start < 0 || info.i_start > info.i_end || info.i_end > n_nodes) return false;
    if (info.n_steps < 0 || (info.n_steps > 0 && info.steps == nullptr)) return false;
    for (int s = 0; s < info.n_steps; s++) {
        const ggml_backend_plan_step & step = info.steps[s];
        if (step.n_nodes < 0 || step.first < info.i_start || step.first + step.n_nodes > info.i_end) return false;
    }
    return true;
}

} // namespace

bool ggml_plan_key_build(const ggml_backend_plan_info & info, const void * stream, ggml_plan_key * out) {
    if (out == nullptr || !plan_info_valid(info)) return false;

    ggml_plan_key key;
    // about 60 words per node with two sources: one allocation per key for typical graphs
    key.words.reserve(8 + (size_t) (info.i_end - info.i_start) * 64 + (size_t) info.n_steps * 6);
    key_writer w{ key };
    w.put(TAG_HEADER);
    w.put_ptr(stream);
    w.put((uint64_t) (info.i_end - info.i_start));
    w.put(info.workspace != nullptr ? (uint64_t) (uintptr_t) ggml_backend_buffer_get_base(info.workspace) : 0);
    w.put((uint64_t) info.workspace_bytes);

    // position of each node in the range: sources produced inside the range are recorded by
    // position, so two plans with the same data addresses but different wiring differ
    std::unordered_map<const ggml_tensor *, int> position;
    position.reserve((size_t) (info.i_end - info.i_start));
    for (int i = info.i_start; i < info.i_end; i++) {
        const ggml_tensor * node = ggml_graph_node(info.graph, i);
        if (node == nullptr) return false;
        position.emplace(node, i - info.i_start);
    }

    for (int i = info.i_start; i < info.i_end; i++) {
        const ggml_tensor * node = ggml_graph_node(info.graph, i);
        w.put(TAG_NODE);
        w.put((uint64_t) node->op);
        w.put((uint64_t) (uint32_t) node->flags);
        w.put_layout(node);
        for (size_t p = 0; p < GGML_MAX_OP_PARAMS / sizeof(int32_t); p++) w.put((uint64_t) (uint32_t) node->op_params[p]);
        for (int s = 0; s < GGML_MAX_SRC; s++) {
            const ggml_tensor * src = node->src[s];
            if (src == nullptr) {
                w.put(TAG_NO_SRC);
                continue;
            }
            w.put(TAG_SRC);
            const auto it = position.find(src);
            w.put(it == position.end() ? ~0ull : (uint64_t) it->second);
            w.put_layout(src);
        }
    }

    for (int s = 0; s < info.n_steps; s++) {
        const ggml_backend_plan_step & step = info.steps[s];
        w.put(TAG_STEP);
        w.put((uint64_t) (step.first - info.i_start));
        w.put((uint64_t) step.n_nodes);
        w.put_ptr(step.kernel); // registration descriptors are immutable and live as long as ggml
        w.put((uint64_t) step.flags);
        w.put((uint64_t) step.workspace);
    }

    *out = std::move(key);
    return true;
}

// =============================================================================================
// Executor

ggml_plan_executor::ggml_plan_executor(ggml_plan_executor && other) noexcept
    : handle_(other.handle_), release_(other.release_) {
    other.handle_  = nullptr;
    other.release_ = nullptr;
}

ggml_plan_executor & ggml_plan_executor::operator=(ggml_plan_executor && other) noexcept {
    if (this != &other) {
        reset();
        handle_        = other.handle_;
        release_       = other.release_;
        other.handle_  = nullptr;
        other.release_ = nullptr;
    }
    return *this;
}

void ggml_plan_executor::reset() {
    if (handle_ != nullptr && release_ != nullptr) release_(handle_);
    handle_  = nullptr;
    release_ = nullptr;
}

// =============================================================================================
// Cache of retired reusable plans

bool ggml_plan_replay_cache::retire(ggml_plan_key key, size_t workspace_bytes, ggml_plan_executor exec) {
    if (!exec || max_entries_ == 0 || workspace_bytes > max_workspace_bytes_) {
        return false; // exec released here
    }
    // one entry per key: an older capture of the same key is superseded
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->key == key) {
            workspace_bytes_ -= it->workspace_bytes;
            entries_.erase(it);
            break;
        }
    }
    entries_.push_back(entry{ std::move(key), workspace_bytes, std::move(exec) });
    workspace_bytes_ += workspace_bytes;
    // the new entry fits on its own, so eviction stops before reaching it
    while (entries_.size() > max_entries_ || workspace_bytes_ > max_workspace_bytes_) {
        workspace_bytes_ -= entries_.front().workspace_bytes;
        entries_.pop_front();
    }
    return true;
}

ggml_plan_executor ggml_plan_replay_cache::take(const ggml_plan_key & key) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->key == key) {
            ggml_plan_executor exec = std::move(it->exec);
            workspace_bytes_ -= it->workspace_bytes;
            entries_.erase(it);
            return exec;
        }
    }
    return ggml_plan_executor();
}

void ggml_plan_replay_cache::clear() {
    entries_.clear();
    workspace_bytes_ = 0;
}

// =============================================================================================
// Decisions

const char * ggml_plan_replay_action_name(ggml_plan_replay_action action) {
    switch (action) {
        case ggml_plan_replay_action::ORDINARY:        return "ordinary";
        case ggml_plan_replay_action::WARM_UP:         return "warm-up";
        case ggml_plan_replay_action::CAPTURE:         return "capture";
        case ggml_plan_replay_action::REPLAY:          return "replay";
        case ggml_plan_replay_action::RECORD_DIRECTLY: return "record-directly";
    }
    return "?";
}

bool ggml_plan_replay_env_disables_graphs(const char * value) {
    return value != nullptr;
}

void ggml_plan_replay_state::retire(live_iter it) {
    if (current_ == &*it) current_ = nullptr;
    if (it->reusable && it->ph == phase::captured) {
        // an oversized workspace is refused here: that plan had plan-local capture only
        cache_.retire(std::move(it->key), it->workspace_bytes, std::move(it->exec));
    }
    live_.erase(it);
}

void ggml_plan_replay_state::adopt_cached(live_plan & plan) {
    if (!plan.reusable) return;
    ggml_plan_executor exec = cache_.take(plan.key);
    if (exec) {
        plan.exec = std::move(exec);
        plan.ph   = phase::captured;
    }
}

ggml_plan_replay_action ggml_plan_replay_state::begin(const ggml_backend_plan_info & info, const void * stream,
                                                      const ggml_plan_replay_env & env) {
    current_ = nullptr;
    // "When every selected extension opts in": a plan without extension steps opts in vacuously
    if (env.graphs_disabled || !env.stable_scratch || !info.all_ext_capture_safe) {
        return ggml_plan_replay_action::ORDINARY;
    }
    ggml_plan_key key;
    if (!ggml_plan_key_build(info, stream, &key)) {
        return ggml_plan_replay_action::ORDINARY;
    }
    // the enclosing capture records this execution; our own state stays as it is (a recording
    // is not an execution, so it neither warms up nor captures this plan)
    if (env.enclosing_capture) {
        return ggml_plan_replay_action::RECORD_DIRECTLY;
    }
    const bool reusable = info.all_ext_replay_reusable;

    live_iter it = live_.begin();
    for (; it != live_.end(); ++it) {
        if (it->identity == info.plan_identity && it->i_start == info.i_start && it->i_end == info.i_end) break;
    }
    if (it != live_.end()) {
        live_.splice(live_.begin(), live_, it); // most recently used first
        live_plan & plan = live_.front();
        if (plan.key != key) {
            // same plan, different addresses / stream / metadata / kernels: the capture no
            // longer describes this execution; warm up again (a reusable plan may find an
            // equivalent capture in the cache)
            plan.exec.reset();
            plan.key             = std::move(key);
            plan.reusable        = reusable;
            plan.workspace_bytes = info.workspace_bytes;
            plan.ph              = plan.ph == phase::failed ? phase::failed : phase::cold;
            if (plan.ph == phase::cold) adopt_cached(plan);
        }
    } else {
        // a rebuilt plan replaces whatever plan ran over these nodes before
        for (live_iter l = live_.begin(); l != live_.end();) {
            const live_iter next     = std::next(l);
            const bool      overlaps = l->i_start < info.i_end && info.i_start < l->i_end;
            if (overlaps) retire(l);
            l = next;
        }
        live_.push_front(live_plan{ info.plan_identity, info.i_start, info.i_end, std::move(key), reusable,
                                    info.workspace_bytes, phase::cold, ggml_plan_executor() });
        while (live_.size() > max_live_ && max_live_ > 0) retire(std::prev(live_.end()));
        adopt_cached(live_.front());
    }

    live_plan & plan = live_.front();
    switch (plan.ph) {
        case phase::failed:
            return ggml_plan_replay_action::ORDINARY;
        case phase::cold:
            plan.ph = phase::warmed;
            return ggml_plan_replay_action::WARM_UP;
        case phase::warmed:
            plan.ph  = phase::capturing;
            current_ = &plan;
            return ggml_plan_replay_action::CAPTURE;
        case phase::capturing:
            // the previous capture never reported back: treat it as failed rather than guess
            plan.ph = phase::failed;
            return ggml_plan_replay_action::ORDINARY;
        case phase::captured:
            current_ = &plan;
            return ggml_plan_replay_action::REPLAY;
    }
    return ggml_plan_replay_action::ORDINARY;
}

void * ggml_plan_replay_state::replay_handle() const {
    return current_ != nullptr && current_->ph == phase::captured ? current_->exec.handle() : nullptr;
}

void ggml_plan_replay_state::capture_succeeded(ggml_plan_executor exec) {
    if (current_ == nullptr || current_->ph != phase::capturing) return; // exec released
    if (!exec) {
        current_->ph = phase::failed;
        return;
    }
    current_->exec = std::move(exec);
    current_->ph   = phase::captured;
}

void ggml_plan_replay_state::capture_failed() {
    if (current_ == nullptr) return;
    current_->exec.reset();
    current_->ph = phase::failed;
    current_     = nullptr;
}

void ggml_plan_replay_state::replay_failed() {
    if (current_ == nullptr) return;
    current_->exec.reset();
    current_->ph = phase::cold;
    current_     = nullptr;
}

void ggml_plan_replay_state::clear() {
    current_ = nullptr;
    live_.clear();
    cache_.clear();
}
