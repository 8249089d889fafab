// registration.cpp — the CPU half of sd_ggml_register_extensions(): every sd CPU kernel and
// fusion rule, registered on one CPU device.

#include "cpu_kernels.h"
#include "int8.h"

#include "../ggml_extensions.h"

extern "C" bool sd_register_cpu_extensions(ggml_backend_dev_t dev) {
    if (dev == nullptr || ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_CPU) return true;
    if (sd_op_rope_apply() == 0) return false; // schemas missing: the reason was logged

    ggml_backend_reg_t               reg = ggml_backend_dev_backend_reg(dev);
    const ggml_ext_cpu_parallel_v1 * svc =
        reg ? (const ggml_ext_cpu_parallel_v1 *) ggml_backend_reg_get_proc_address(reg, GGML_EXT_CPU_PARALLEL_V1)
            : nullptr;
    if (svc != nullptr && svc->version < 1) svc = nullptr;

    bool ok = sd_cpu_register_rope(dev, svc);
    ok      = sd_cpu_register_norm_quant(dev, svc) && ok;
    ok      = sd_cpu_register_gate_quant(dev, svc) && ok;
    ok      = sd_cpu_register_int8(dev) && ok;
    return ok;
}
