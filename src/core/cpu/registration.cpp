// registration.cpp — the CPU half of sd_ggml_register_extensions(): every sd CPU kernel and
// fusion rule, registered on one CPU device.

#include "cpu_kernels.h"

#include "../ggml_extensions.h"

#include <cstdio>

// The INT8 kernels live in int8*.cpp (their own owner). CMake defines SD_CPU_HAVE_INT8 when one
// of those files defines sd_cpu_register_int8; without it the build still links, minus INT8.
#if defined(SD_CPU_HAVE_INT8)
#include "int8.h"
#endif

extern "C" bool sd_register_cpu_extensions(ggml_backend_dev_t dev) {
    if (dev == nullptr || ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_CPU) return true;
    if (sd_op_rope_apply() == 0) return false; // schemas missing: the reason was logged

    ggml_backend_reg_t               reg = ggml_backend_dev_backend_reg(dev);
    const ggml_ext_cpu_parallel_v1 * svc =
        reg ? (const ggml_ext_cpu_parallel_v1 *) ggml_backend_reg_get_proc_address(reg, GGML_EXT_CPU_PARALLEL_V1)
            : nullptr;
    if (svc != nullptr && svc->version < 1) svc = nullptr;

    bool ok = sd_cpu_register_rope(dev, svc);

#if defined(SD_CPU_HAVE_INT8)
    sd_cpu_register_int8(dev);
#else
    // >>> INT8 CPU kernels not built (no sd_cpu_register_int8 found in src/core/cpu/int8*.cpp):
    //     sd.quantize_i8_convrot.v1 / sd.linear_i8.v1 have no CPU kernel in this build. <<<
    static bool warned = false;
    if (!warned) {
        warned = true;
        fprintf(stderr, "sd: INT8 CPU kernels are not part of this build\n");
    }
#endif
    return ok;
}
