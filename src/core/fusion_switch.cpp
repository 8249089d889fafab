// fusion_switch.cpp — the process-wide switch of the sd fusion rules (sd_ggml_set_fusion_enabled,
// ggml_extensions.h), shared by both builds: the rules read it when they match; with an upstream
// ggml (SD_USE_UPSTREAM_GGML) there are no rules and it is only recorded.

#include "ggml_extensions.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {
std::atomic<int> g_fusion{-1}; // -1: not read from the environment yet
} // namespace

extern "C" void sd_ggml_set_fusion_enabled(bool on) { g_fusion.store(on ? 1 : 0); }

extern "C" bool sd_ggml_fusion_enabled(void) {
    int v = g_fusion.load();
    if (v < 0) {
        const char * e = getenv("SD_DISABLE_FUSION");
        const int    from_env = (e && *e && strcmp(e, "0") != 0) ? 0 : 1;
        g_fusion.compare_exchange_strong(v, from_env);
        v = g_fusion.load();
    }
    return v != 0;
}
