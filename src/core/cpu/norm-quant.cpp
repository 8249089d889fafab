// norm-quant.cpp — (being written) RMSNorm -> Mul(weight) -> Mul(mod) -> Add -> Add(shift) -> ConvRot fusion.

#include "cpu_kernels.h"

bool sd_cpu_register_norm_quant(ggml_backend_dev_t, const struct ggml_ext_cpu_parallel_v1 *) { return true; }
