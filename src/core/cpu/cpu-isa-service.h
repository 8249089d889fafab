#pragma once

// cpu-isa-service.h — the sd CPU kernels choose their SIMD paths through the CPU backend's
// instruction-set chooser (GGML_EXT_CPU_ISA_V1, ggml-ext.h), never by their own CPUID checks, so
// GGML_CPU_ISA caps them like the backend's own kernels. Against a ggml without the service
// (upstream) every query is false and the portable paths run.

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"

namespace sd_cpu {

inline const ggml_ext_cpu_isa_v1 * isa_service() {
    static const ggml_ext_cpu_isa_v1 * svc = static_cast<const ggml_ext_cpu_isa_v1 *>(
        ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), GGML_EXT_CPU_ISA_V1));
    return svc;
}

// Whether a feature ("avx512_vnni", "fma", ...) or a whole level ("avx2", "avx512") may be used now.
inline bool isa_can_use(const char * feature_or_level) {
    const ggml_ext_cpu_isa_v1 * s = isa_service();
    return s && s->can_use(feature_or_level);
}

} // namespace sd_cpu
