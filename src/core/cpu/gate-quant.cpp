// gate-quant.cpp — (being written) SwiGLU -> ConvRot and Sigmoid -> Mul -> ConvRot fusions.

#include "cpu_kernels.h"

bool sd_cpu_register_gate_quant(ggml_backend_dev_t, const struct ggml_ext_cpu_parallel_v1 *) { return true; }
