// memory_check.cpp — the peak-memory pre-check of sdx run / bench (see memory_check.h).

#include "memory_check.h"

#include "cli.h"

#include <cstdlib>

namespace sdx {

krea2::memory_estimate check_memory(krea2::runner & r, const model_opts & o, const std::vector<run_phase> & phases,
                                    int check_phase, krea2::available_memory & avail) {
    std::vector<krea2::phase_spec> specs;
    for (const run_phase & p : phases) specs.push_back(p.spec);
    krea2::memory_estimate e;
    std::string            err;
    if (!krea2::estimate_memory(r, o.cfg, specs, e, err)) fail(err);

    avail = krea2::query_available_memory();
    if (const char * hook = std::getenv("SDX_TEST_MEM_AVAILABLE")) {
        avail.bytes  = (size_t) parse_int("SDX_TEST_MEM_AVAILABLE", hook, 0, INT64_MAX);
        avail.source = "SDX_TEST_MEM_AVAILABLE";
    }
    if (avail.bytes == SIZE_MAX || e.total <= avail.bytes) return e;

    const run_phase & at = phases[(size_t) e.peak_phase];
    std::string       m  = "not enough memory: this run needs " + human_bytes(e.total) + " at its peak (" +
                    krea2::wtype_name(at.spec.type) + " weights " + human_bytes(e.weights) + ", compute buffer " +
                    human_bytes(e.compute) + ", CPU work buffer " + human_bytes(e.cpu_work) + ", host copies " +
                    human_bytes(e.host) + ", process " + human_bytes(e.process) + (e.peak_while_loading ? ", while loading " : ", while running ") + at.label +
                    "), " + human_bytes(avail.bytes) + " available (" + avail.source + ")";
    const std::string fit = krea2::suggest_fit(r, o.cfg, specs, avail.bytes, check_phase, o.text_set);
    m += fit.empty() ? "; nothing smaller of this width fits: use a smaller --dtype or width" : "; " + fit;
    fail(m);
}

} // namespace sdx
