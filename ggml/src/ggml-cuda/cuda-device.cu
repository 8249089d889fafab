// cuda-device.cu — device discovery, the "CUDA" registry family and its device objects.
//
// Discovery runs once, on the first registry query. A process without a driver, with a driver
// too old for this runtime, or with no visible device gets a family with zero devices: every
// error of cudaGetDeviceCount means "no devices" here, never an abort, so a CUDA build runs
// unchanged on machines without a GPU.

#include "cuda-internal.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

[[noreturn]] void ggml_cuda_error(const char * stmt, const char * func, const char * file, int line, const char * msg) {
    int dev = -1;
    (void) cudaGetDevice(&dev); // best effort: the error may be that there is no device
    GGML_LOG_ERROR("ggml-cuda: error: %s\n  current device: %d, in function %s at %s:%d\n  %s\n", msg, dev, func,
                   file, line, stmt);
    GGML_ABORT("CUDA error");
}

namespace {

struct cuda_registry_state {
    std::vector<std::unique_ptr<ggml_cuda_device>> devices;
};

void init_device_objects(ggml_cuda_device * dev); // below

cuda_registry_state * discover() {
    auto * st = new cuda_registry_state();
    int    n  = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void) cudaGetLastError(); // not sticky, but leave no error behind for later checks
        GGML_LOG_INFO("ggml-cuda: no CUDA devices (%s)\n", cudaGetErrorString(err));
        return st;
    }
    if (n > GGML_CUDA_MAX_DEVICES) {
        GGML_LOG_WARN("ggml-cuda: %d devices found; using the first %d\n", n, GGML_CUDA_MAX_DEVICES);
        n = GGML_CUDA_MAX_DEVICES;
    }
    for (int i = 0; i < n; i++) {
        auto dev     = std::make_unique<ggml_cuda_device>();
        dev->ordinal = i;
        if (cudaGetDeviceProperties(&dev->props, i) != cudaSuccess) {
            (void) cudaGetLastError();
            GGML_LOG_WARN("ggml-cuda: cannot read the properties of device %d; skipped\n", i);
            continue;
        }
        int pools = 0;
        if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, i) != cudaSuccess) {
            (void) cudaGetLastError();
            pools = 0;
        }
        dev->mem_pools   = pools != 0;
        dev->cc          = dev->props.major * 10 + dev->props.minor;
        dev->name        = std::string(GGML_CUDA_NAME) + std::to_string(st->devices.size());
        dev->description = dev->props.name;
        GGML_LOG_INFO("ggml-cuda: %s: %s, compute capability %d.%d, %.1f GiB\n", dev->name.c_str(),
                      dev->description.c_str(), dev->props.major, dev->props.minor,
                      (double) dev->props.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
        init_device_objects(dev.get());
        st->devices.push_back(std::move(dev));
    }
    return st;
}

cuda_registry_state & state() {
    // never freed: registries, buffers and leaked handles may point at the devices until exit
    static cuda_registry_state * st = discover();
    return *st;
}

// ---------------------------------------------------------------------------------------------
// ggml device interface

ggml_cuda_device * dev_of(ggml_backend_dev_t d) { return static_cast<ggml_cuda_device *>(d->context); }

const char * dev_get_name(ggml_backend_dev_t d) { return dev_of(d)->name.c_str(); }
const char * dev_get_description(ggml_backend_dev_t d) { return dev_of(d)->description.c_str(); }

void dev_get_memory(ggml_backend_dev_t d, size_t * free_mem, size_t * total_mem) {
    ggml_cuda_device * dev = dev_of(d);
    size_t f = 0, t = 0;
    int    prev = -1;
    const bool have_prev = cudaGetDevice(&prev) == cudaSuccess;
    if (cudaSetDevice(dev->ordinal) == cudaSuccess && cudaMemGetInfo(&f, &t) == cudaSuccess) {
        // live numbers
    } else {
        (void) cudaGetLastError();
        f = t = dev->props.totalGlobalMem;
    }
    if (have_prev) (void) cudaSetDevice(prev);
    if (free_mem) *free_mem = f;
    if (total_mem) *total_mem = t;
}

enum ggml_backend_dev_type dev_get_type(ggml_backend_dev_t d) {
    return dev_of(d)->props.integrated ? GGML_BACKEND_DEVICE_TYPE_IGPU : GGML_BACKEND_DEVICE_TYPE_GPU;
}

void dev_get_props(ggml_backend_dev_t d, ggml_backend_dev_props * props) {
    memset(props, 0, sizeof(*props));
    props->name        = dev_get_name(d);
    props->description = dev_get_description(d);
    props->type        = dev_get_type(d);
    dev_get_memory(d, &props->memory_free, &props->memory_total);
    props->caps.async                = true;
    props->caps.host_buffer          = true;
    props->caps.buffer_from_host_ptr = false;
    props->caps.events               = true;
    props->caps.mmap_support         = false;
}

ggml_backend_t dev_init_backend(ggml_backend_dev_t d, const char * params) {
    (void) params;
    return ggml_cuda_backend_new(dev_of(d));
}

ggml_backend_buffer_type_t dev_get_buffer_type(ggml_backend_dev_t d) { return &dev_of(d)->buft; }
ggml_backend_buffer_type_t dev_get_host_buffer_type(ggml_backend_dev_t) { return ggml_cuda_host_buft(); }

bool dev_supports_op(ggml_backend_dev_t d, const ggml_tensor * op) { return ggml_cuda_node_supported(dev_of(d), op); }

bool dev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t buft) {
    return ggml_cuda_buft_device(buft) == dev_of(d)->ordinal;
}

// Big batched ops are worth copying host weights to the device (upstream's rule: batch >= 32).
bool dev_offload_op(ggml_backend_dev_t, const ggml_tensor * op) {
    return op->ne[1] >= 32 && op->op != GGML_OP_GET_ROWS;
}

const ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_get_name,
    /* .get_description      = */ dev_get_description,
    /* .get_memory           = */ dev_get_memory,
    /* .get_type             = */ dev_get_type,
    /* .get_props            = */ dev_get_props,
    /* .init_backend         = */ dev_init_backend,
    /* .get_buffer_type      = */ dev_get_buffer_type,
    /* .get_host_buffer_type = */ dev_get_host_buffer_type,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ dev_offload_op,
    /* .event_new            = */ ggml_cuda_event_new,
    /* .event_free           = */ ggml_cuda_event_free,
    /* .event_synchronize    = */ ggml_cuda_event_synchronize,
};

// ---------------------------------------------------------------------------------------------
// Registry entry

const char * reg_get_name(ggml_backend_reg_t) { return GGML_CUDA_NAME; }
size_t       reg_get_device_count(ggml_backend_reg_t) { return state().devices.size(); }

ggml_backend_dev_t reg_get_device(ggml_backend_reg_t, size_t index) {
    ggml_cuda_device * dev = ggml_cuda_get_device((int) index);
    GGML_ASSERT(dev && "CUDA device index out of range");
    return &dev->gdev;
}

// upstream's names first, then the services (ggml-ext-cuda.h tables, plan hooks) of cuda-services
void * reg_get_proc_address(ggml_backend_reg_t, const char * name) {
    if (!name) return nullptr;
    if (strcmp(name, "ggml_backend_register_host_buffer") == 0) return (void *) ggml_backend_cuda_register_host_buffer;
    if (strcmp(name, "ggml_backend_unregister_host_buffer") == 0) {
        return (void *) ggml_backend_cuda_unregister_host_buffer;
    }
    return ggml_cuda_get_service(name);
}

const ggml_backend_reg_i reg_iface = {
    /* .get_name         = */ reg_get_name,
    /* .get_device_count = */ reg_get_device_count,
    /* .get_device       = */ reg_get_device,
    /* .get_proc_address = */ reg_get_proc_address,
};

ggml_backend_reg cuda_reg = {
    /* .api_version = */ GGML_BACKEND_API_VERSION,
    /* .iface       = */ reg_iface,
    /* .context     = */ nullptr,
};

void init_device_objects(ggml_cuda_device * dev) {
    dev->gdev.iface   = device_iface;
    dev->gdev.reg     = &cuda_reg;
    dev->gdev.context = dev;
    ggml_cuda_init_buffer_type(dev);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Internal API

int ggml_cuda_device_count() { return (int) state().devices.size(); }

ggml_cuda_device * ggml_cuda_get_device(int index) {
    cuda_registry_state & st = state();
    return index >= 0 && index < (int) st.devices.size() ? st.devices[(size_t) index].get() : nullptr;
}

ggml_backend_reg_t ggml_cuda_registry() { return &cuda_reg; }

int ggml_cuda_dev_physical_ordinal(ggml_backend_dev_t dev) {
    if (!dev || dev->reg != &cuda_reg) return -1;
    return dev_of(dev)->ordinal;
}

const cudaDeviceProp * ggml_cuda_device_props(int ordinal) {
    for (const auto & d : state().devices) {
        if (d->ordinal == ordinal) return &d->props;
    }
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Public API

extern "C" {

ggml_backend_reg_t ggml_backend_cuda_reg(void) {
    (void) state(); // discover devices before the registry lists them
    return &cuda_reg;
}

int ggml_backend_cuda_get_device_count(void) { return ggml_cuda_device_count(); }

void ggml_backend_cuda_get_device_description(int device, char * description, size_t description_size) {
    if (!description || description_size == 0) return;
    ggml_cuda_device * dev = ggml_cuda_get_device(device);
    snprintf(description, description_size, "%s", dev ? dev->description.c_str() : "");
}

void ggml_backend_cuda_get_device_memory(int device, size_t * free_mem, size_t * total_mem) {
    ggml_cuda_device * dev = ggml_cuda_get_device(device);
    if (!dev) {
        if (free_mem) *free_mem = 0;
        if (total_mem) *total_mem = 0;
        return;
    }
    dev_get_memory(&dev->gdev, free_mem, total_mem);
}

ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device) {
    ggml_cuda_device * dev = ggml_cuda_get_device(device);
    return dev ? &dev->buft : nullptr;
}

ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void) { return ggml_cuda_host_buft(); }

bool ggml_backend_cuda_register_host_buffer(void * buffer, size_t size) {
    if (!buffer || size == 0 || ggml_cuda_device_count() == 0) return false;
    const cudaError_t err = cudaHostRegister(buffer, size, cudaHostRegisterPortable);
    if (err != cudaSuccess) {
        (void) cudaGetLastError();
        GGML_LOG_WARN("ggml-cuda: cannot pin %.1f MiB of host memory: %s\n", (double) size / (1024.0 * 1024.0),
                      cudaGetErrorString(err));
        return false;
    }
    return true;
}

void ggml_backend_cuda_unregister_host_buffer(void * buffer) {
    if (!buffer || ggml_cuda_device_count() == 0) return;
    if (cudaHostUnregister(buffer) != cudaSuccess) (void) cudaGetLastError(); // not registered: nothing to undo
}

} // extern "C"
