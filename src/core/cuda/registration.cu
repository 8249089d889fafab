// registration.cu — the CUDA half of sd_ggml_register_extensions(): recognises a CUDA device by
// its registry ("CUDA"), finds the backend services through get_proc_address (public API only)
// and registers every sd CUDA kernel and fusion rule on it with GGML_EXT_KERNEL_CAPTURE_SAFE |
// GGML_EXT_KERNEL_REPLAY_REUSABLE. Compiled only with GGML_CUDA=ON (the X(cuda) entry of
// SD_BACKEND_EXTENSIONS, src/CMakeLists.txt).
//
// With no CUDA device (a GGML_CUDA build on a machine without a GPU) the registry lists none, so
// this registrar is never asked about a CUDA device; the first call records why
// (sd_cuda_extensions_status()) and every call succeeds, so sd_ggml_register_extensions() still succeeds for the CPU (and Vulkan) kernels.

#include "cuda_kernels.h"

#include "../ggml_extensions.h"
#include "../kernel_desc.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace SD_CUDA_NAMESPACE {

namespace {

ggml_backend_reg_t cuda_reg() {
    static ggml_backend_reg_t reg = ggml_backend_reg_by_name("CUDA");
    return reg;
}

template <class T> const T * service(const char * name) {
    ggml_backend_reg_t reg = cuda_reg();
    if (!reg) return nullptr;
    const T * s = (const T *) ggml_backend_reg_get_proc_address(reg, name);
    return s && s->version >= 1 ? s : nullptr;
}

const ggml_ext_cuda_context_v1 * context_service() {
    static const ggml_ext_cuda_context_v1 * s = service<ggml_ext_cuda_context_v1>(GGML_EXT_CUDA_CONTEXT_V1);
    return s;
}
const ggml_ext_cuda_blas_v1 * blas_service() {
    static const ggml_ext_cuda_blas_v1 * s = service<ggml_ext_cuda_blas_v1>(GGML_EXT_CUDA_BLAS_V1);
    return s;
}
const ggml_ext_gpu_device_v1 * device_service() {
    static const ggml_ext_gpu_device_v1 * s = service<ggml_ext_gpu_device_v1>(GGML_EXT_GPU_DEVICE_V1);
    return s;
}

bool is_cuda_device(ggml_backend_dev_t dev) {
    return dev && cuda_reg() && ggml_backend_dev_backend_reg(dev) == cuda_reg();
}

std::mutex  g_status_mu;
std::string g_status = "not run";
int         g_registered = 0;

void set_status(const std::string & s) {
    std::lock_guard<std::mutex> lock(g_status_mu);
    g_status = s;
}

} // namespace

bool get_exec(ggml_backend_t backend, exec_ctx & ctx) {
    const ggml_ext_cuda_context_v1 * s = context_service();
    void *                           stream = nullptr;
    if (!s || !s->get(backend, &ctx.device, &stream)) return false;
    ctx.stream = (cudaStream_t) stream;
    return true;
}

cublasHandle_t get_blas(ggml_backend_t backend) {
    const ggml_ext_cuda_blas_v1 * s = blas_service();
    void *                        h = nullptr;
    if (!s || !s->get(backend, &h)) return nullptr;
    return (cublasHandle_t) h;
}

bool device_info(ggml_backend_dev_t dev, ggml_ext_gpu_device_info & info) {
    static std::mutex                                             mu;
    static std::map<ggml_backend_dev_t, ggml_ext_gpu_device_info> cache;
    if (!is_cuda_device(dev)) return false;
    std::lock_guard<std::mutex> lock(mu);
    auto                        it = cache.find(dev);
    if (it == cache.end()) {
        const ggml_ext_gpu_device_v1 * s = device_service();
        ggml_ext_gpu_device_info       i{};
        if (!s || !s->get_info(dev, &i) || i.runtime != GGML_EXT_GPU_RUNTIME_CUDA) return false;
        it = cache.emplace(dev, i).first;
    }
    info = it->second;
    return true;
}

bool fusion_enabled() {
    static const bool cuda_off = [] {
        const char * e = getenv("GGML_CUDA_DISABLE_FUSION");
        return e && *e && strcmp(e, "0") != 0;
    }();
    return !cuda_off && sd_ggml_fusion_enabled();
}

bool register_all(ggml_backend_dev_t dev, const ggml_ext_kernel_desc * descs, int n, const char * who) {
    bool ok = true;
    for (int i = 0; i < n; ++i) {
        if (!ggml_ext_register_kernel_ex(dev, &descs[i], kKernelFlags)) {
            fprintf(stderr, "%s: kernel registration failed: %s\n", who, ggml_ext_last_error());
            ok = false;
        }
    }
    return ok;
}

} // namespace SD_CUDA_NAMESPACE

extern "C" const char * sd_cuda_extensions_status(void) {
    using namespace SD_CUDA_NAMESPACE;
    std::lock_guard<std::mutex> lock(g_status_mu);
    static thread_local std::string copy;
    copy = g_status;
    return copy.c_str();
}

extern "C" bool sd_register_cuda_extensions(ggml_backend_dev_t dev) {
    using namespace SD_CUDA_NAMESPACE;
    // Once per process: say plainly when this CUDA build found nothing to register on.
    static std::once_flag announced;
    std::call_once(announced, [] {
        ggml_backend_reg_t reg = cuda_reg();
        if (!reg) {
            set_status("no CUDA backend");
        } else if (ggml_backend_reg_dev_count(reg) == 0) {
            // silent: every run of a CUDA build on a machine without a GPU would print it, and
            // tools keep stderr for their own errors (sd_cuda_extensions_status() tells why)
            set_status("no CUDA device");
        }
    });
    if (!is_cuda_device(dev)) return true; // another device kind: nothing to do here

    static sd_kernels::once_per_device once;
    return once(dev, [&] {
        ggml_ext_gpu_device_info info{};
        if (!device_info(dev, info)) {
            // a CUDA device without the GPU device service: nothing can check capabilities, so
            // nothing is registered and its nodes run where the scheduler places them
            fprintf(stderr, "sd cuda: %s has no %s service; sd CUDA kernels not registered\n",
                    ggml_backend_dev_name(dev), GGML_EXT_GPU_DEVICE_V1);
            set_status("no GPU device service");
            return true;
        }
        if (!context_service()) {
            fprintf(stderr, "sd cuda: the CUDA registry has no %s service; sd CUDA kernels not registered\n",
                    GGML_EXT_CUDA_CONTEXT_V1);
            set_status("no CUDA context service");
            return true;
        }
        if (sd_op_rope_apply() == 0 || sd_op_linear_i8() == 0 || sd_op_quantize_i8_convrot() == 0) {
            set_status("sd operator schemas missing");
            return false; // the reason was logged when the schemas failed
        }
        bool ok = register_rope(dev);
        ok      = register_convrot(dev) && ok;
        ok      = register_int8(dev) && ok;
        ok      = register_gated_residual(dev) && ok;
        ok      = register_affine(dev) && ok;
        ok      = register_convrot_fusion(dev) && ok;
        std::lock_guard<std::mutex> lock(g_status_mu);
        if (ok) g_status = "registered on " + std::to_string(++g_registered) + " device(s)";
        else g_status = std::string("registration failed on ") + ggml_backend_dev_name(dev);
        return ok;
    });
}
