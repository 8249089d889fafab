#pragma once

// ggml-cpu.h — the CPU backend: a persistent thread pool per backend, portable kernels for
// every op, runtime-selected SIMD paths (added by the fast-kernel work).

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ggml_sched_priority {
    GGML_SCHED_PRIO_LOW = -1,
    GGML_SCHED_PRIO_NORMAL,
    GGML_SCHED_PRIO_MEDIUM,
    GGML_SCHED_PRIO_HIGH,
    GGML_SCHED_PRIO_REALTIME,
};

struct ggml_threadpool_params {
    bool                     cpumask[GGML_MAX_N_THREADS]; // all false: inherit affinity
    int                      n_threads;
    enum ggml_sched_priority prio;
    uint32_t                 poll;       // 0: sleep at once, 100: spin long before sleeping
    bool                     strict_cpu;
    bool                     paused;
};

// struct ggml_threadpool / ggml_threadpool_t (ggml.h): persistent workers; the calling thread is worker 0

GGML_API struct ggml_threadpool_params ggml_threadpool_params_default(int n_threads);
GGML_API void ggml_threadpool_params_init(struct ggml_threadpool_params * p, int n_threads);
GGML_API bool ggml_threadpool_params_match(const struct ggml_threadpool_params * p0,
                                           const struct ggml_threadpool_params * p1);
GGML_API struct ggml_threadpool * ggml_threadpool_new(struct ggml_threadpool_params * params);
GGML_API void                     ggml_threadpool_free(struct ggml_threadpool * threadpool);
GGML_API int                      ggml_threadpool_get_n_threads(struct ggml_threadpool * threadpool);
GGML_API void                     ggml_threadpool_pause(struct ggml_threadpool * threadpool);
GGML_API void                     ggml_threadpool_resume(struct ggml_threadpool * threadpool);

// Run fn(ith, nth, data) on every thread of the pool (ith = 0 on the caller), return when all
// are done. Building block for the backend and for application kernels.
typedef void (*ggml_threadpool_task_t)(int ith, int nth, void * data);
GGML_API void ggml_threadpool_run(struct ggml_threadpool * threadpool, int n_threads, ggml_threadpool_task_t fn,
                                  void * data);

// Backend

GGML_API ggml_backend_t ggml_backend_cpu_init(void);
GGML_API bool           ggml_backend_is_cpu(ggml_backend_t backend);
GGML_API void           ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads);
GGML_API int            ggml_backend_cpu_get_n_threads(ggml_backend_t backend_cpu);
// Use an external pool instead of the backend's own.
GGML_API void           ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool_t threadpool);
// Checked between nodes and periodically inside long kernels; true stops with GGML_STATUS_ABORTED.
GGML_API void           ggml_backend_cpu_set_abort_callback(ggml_backend_t backend_cpu,
                                                            ggml_abort_callback abort_callback,
                                                            void * abort_callback_data);
// Force the portable reference kernels (disables SIMD fast paths).
GGML_API void           ggml_backend_cpu_set_use_ref(ggml_backend_t backend_cpu, bool use_ref);
GGML_API bool           ggml_backend_cpu_get_use_ref(ggml_backend_t backend_cpu);

GGML_API ggml_backend_reg_t ggml_backend_cpu_reg(void);

// CPU feature detection (runtime)
GGML_API int ggml_cpu_has_avx2(void);
GGML_API int ggml_cpu_has_avx512(void);
GGML_API int ggml_cpu_has_avx512_vnni(void);
GGML_API int ggml_cpu_has_avx512_bf16(void);
GGML_API int ggml_cpu_has_amx_int8(void);
GGML_API int ggml_cpu_has_amx_bf16(void);

// Scalar helpers on host memory (asserting a host tensor)
GGML_API struct ggml_tensor * ggml_new_i32(struct ggml_context * ctx, int32_t value);
GGML_API struct ggml_tensor * ggml_new_f32(struct ggml_context * ctx, float value);
GGML_API float   ggml_get_f32_1d(const struct ggml_tensor * tensor, int i);
GGML_API void    ggml_set_f32_1d(const struct ggml_tensor * tensor, int i, float value);
GGML_API int32_t ggml_get_i32_1d(const struct ggml_tensor * tensor, int i);
GGML_API void    ggml_set_i32_1d(const struct ggml_tensor * tensor, int i, int32_t value);

// Upstream's remaining scalar helpers (issue 13): whole-tensor fill and n-d element access on
// host memory; indices are per dimension, any strides.
GGML_API struct ggml_tensor * ggml_set_i32(struct ggml_tensor * tensor, int32_t value);
GGML_API struct ggml_tensor * ggml_set_f32(struct ggml_tensor * tensor, float value);
GGML_API int32_t ggml_get_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3);
GGML_API void    ggml_set_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value);
GGML_API float   ggml_get_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3);
GGML_API void    ggml_set_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value);

// Compute a graph whose tensors live in a context (no backend buffers) on a temporary CPU
// backend with n_threads threads.
GGML_API enum ggml_status ggml_graph_compute_with_ctx(struct ggml_context * ctx, struct ggml_cgraph * cgraph,
                                                      int n_threads);

// The rest of upstream's CPU feature queries (0 for features of other architectures).
GGML_API int ggml_cpu_has_sse3(void);
GGML_API int ggml_cpu_has_ssse3(void);
GGML_API int ggml_cpu_has_avx(void);
GGML_API int ggml_cpu_has_avx_vnni(void);
GGML_API int ggml_cpu_has_bmi2(void);
GGML_API int ggml_cpu_has_f16c(void);
GGML_API int ggml_cpu_has_fma(void);
GGML_API int ggml_cpu_has_avx512_vbmi(void);
GGML_API int ggml_cpu_has_neon(void);
GGML_API int ggml_cpu_has_arm_fma(void);
GGML_API int ggml_cpu_has_fp16_va(void);
GGML_API int ggml_cpu_has_dotprod(void);
GGML_API int ggml_cpu_has_matmul_int8(void);
GGML_API int ggml_cpu_has_sve(void);
GGML_API int ggml_cpu_get_sve_cnt(void);
GGML_API int ggml_cpu_has_sme(void);
GGML_API int ggml_cpu_has_riscv_v(void);
GGML_API int ggml_cpu_get_rvv_vlen(void);
GGML_API int ggml_cpu_has_vsx(void);
GGML_API int ggml_cpu_has_vxe(void);
GGML_API int ggml_cpu_has_wasm_simd(void);
GGML_API int ggml_cpu_has_llamafile(void);

// Row converters
GGML_API void ggml_cpu_fp32_to_fp16(const float * x, ggml_fp16_t * y, int64_t n);
GGML_API void ggml_cpu_fp16_to_fp32(const ggml_fp16_t * x, float * y, int64_t n);
GGML_API void ggml_cpu_fp32_to_bf16(const float * x, ggml_bf16_t * y, int64_t n);
GGML_API void ggml_cpu_bf16_to_fp32(const ggml_bf16_t * x, float * y, int64_t n);

// Instruction-set level (docs/architecture.md, "Kernel dispatch"): every CPU kernel is chosen
// from a table by level, x86-64: portable < avx2 (AVX2+FMA+F16C) < avx_vnni < avx512 (+VNNI, +BF16
// where present) < amx (opt-in). The CPU's level is capped by GGML_CPU_ISA (read once, same names,
// "native" = no cap) or by ggml_cpu_set_isa(): nothing above the cap runs, so the AVX2 kernels can
// be tested and timed on an AVX-512 machine. GGML_CPU_AMX=1 is the older name for a cap of amx.
// ggml_cpu_set_isa: NULL, "", "auto" or "native" restores the default (GGML_CPU_ISA's cap if that is
// set, else no cap up to avx512); false for an unknown name
// (a level above the CPU's is accepted and acts as no cap). Process-wide; call between computations.
GGML_API bool         ggml_cpu_set_isa(const char * level);
GGML_API const char * ggml_cpu_get_isa(void);          // the active level ("avx2", ...)
GGML_API const char * ggml_cpu_get_isa_detected(void); // the CPU's own level, uncapped
// The levels this CPU can run, lowest first ("portable" is level 0): tests iterate over them.
GGML_API int          ggml_cpu_isa_count(void);
GGML_API const char * ggml_cpu_isa_level(int i);
// Whether a feature ("avx2", "fma", "avx512_vnni", ...) or a level ("avx2", "avx512", ...) may be
// used now: the CPU has it and it is at or below the cap. (ggml_cpu_has_* report the CPU, uncapped.)
GGML_API bool         ggml_cpu_isa_can_use(const char * feature);

// Kernel choice per op family (docs/architecture.md, "Kernel choice"): where two kernels with the
// same semantics exist, a table of measured CPUs picks one. spec: NULL, "" or "auto" restores the
// table's choice; a kernel name forces it for every family it is a kernel of; "FAMILY=KERNEL,..."
// per family. FAMILY: mul_mat_bf16 (BF16-weight GEMM), flash_attn (F16/BF16 K/V, GGML_PREC_DEFAULT)
// with KERNEL f32fma (widened to F32, FMA) or bf16dot (rounded to BF16, vdpbf16ps); mul_mat_quant
// (block-quantized weights) with KERNEL vnni (AVX512-VNNI tiles) or vecdot (portable reference
// dot products); auto for any family.
// The environment variable GGML_CPU_KERNEL takes the same syntax (read once, at first use).
// Process-wide; call it between computations. Returns false and changes nothing for a spec it
// cannot parse or a kernel this CPU cannot run.
GGML_API bool         ggml_cpu_set_kernel_override(const char * spec);
// The kernel a family uses now ("f32fma", "bf16dot", "tiles", "vecdot"); NULL for an unknown family.
GGML_API const char * ggml_cpu_get_kernel(const char * family);
// Name of the kernel-table row that matched this CPU ("default (no measured row)" if none did).
GGML_API const char * ggml_cpu_kernel_table_row(void);
// The processor's model name (CPUID brand string, else /proc/cpuinfo).
GGML_API const char * ggml_cpu_model_name(void);
// The kernel table's key for this CPU: CPUID vendor string (13 bytes with the NUL; "" off x86),
// display family and model, and the AVX512_BF16 / AMX-BF16 feature bits (CPUID and OS state).
GGML_API void         ggml_cpu_get_identity(char vendor[13], unsigned * family, unsigned * model, bool * avx512_bf16,
                                            bool * amx_bf16);
// Which kernel the CPU backend runs for this node now, e.g. "avx512 bf16dot", "avx512 f32fma",
// "avx512 vnni q4_K", "portable vec_dot_ref" (quantized weights), "portable" (MUL_MAT and
// FLASH_ATTN_EXT are specific; other ops say "default" or "portable").
GGML_API const char * ggml_backend_cpu_node_kernel(ggml_backend_t backend_cpu, const struct ggml_tensor * node);

#ifdef __cplusplus
}
#endif
