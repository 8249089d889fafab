// ggml-backend-reg.cpp — the process-wide registry of backend families (regs) and their devices.
// The CPU family registers itself on first use and is always kept last, so "first device of a
// type" and init_best prefer accelerators that were registered later.

#include "backend/ggml-backend-impl.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"
#endif
#ifdef GGML_USE_VULKAN
#include "ggml-vulkan.h"
#endif
#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"
#endif

#include <algorithm>
#include <mutex>
#include <strings.h>
#include <vector>

namespace {

class backend_registry {
public:
    backend_registry() {
        cpu_reg_ = ggml_backend_cpu_reg();
        if (cpu_reg_ != nullptr) {
            add_reg(cpu_reg_);
        }
#ifdef GGML_USE_CUDA
        add_reg(ggml_backend_cuda_reg()); // every CUDA device (none without a GPU), before the CPU
#endif
#ifdef GGML_USE_CUDA
        add_reg(ggml_backend_cuda_reg()); // every CUDA device (none without a GPU), before the CPU
#endif
#ifdef GGML_USE_VULKAN
        add_reg(ggml_backend_vk_reg()); // every usable Vulkan device, listed before the CPU
#endif
    }

    void add_reg(ggml_backend_reg_t reg) {
        if (reg == nullptr) {
            return;
        }
        // query the family outside the lock: its callbacks may use the public API
        std::vector<ggml_backend_dev_t> devs;
        const size_t n = reg->iface.get_device_count(reg);
        for (size_t i = 0; i < n; i++) {
            devs.push_back(reg->iface.get_device(reg, i));
        }

        std::lock_guard<std::mutex> lock(mtx_);
        if (std::find(regs_.begin(), regs_.end(), reg) != regs_.end()) {
            return;
        }
        if (reg == cpu_reg_) {
            regs_.push_back(reg);
        } else {
            regs_.insert(regs_.begin() + first_cpu_reg_index(), reg);
        }
        for (ggml_backend_dev_t dev : devs) {
            add_dev_locked(dev, reg == cpu_reg_);
        }
    }

    void add_dev(ggml_backend_dev_t dev) {
        if (dev == nullptr) {
            return;
        }
        std::lock_guard<std::mutex> lock(mtx_);
        add_dev_locked(dev, false);
    }

    std::vector<ggml_backend_reg_t> regs() {
        std::lock_guard<std::mutex> lock(mtx_);
        return regs_;
    }

    std::vector<ggml_backend_dev_t> devs() {
        std::lock_guard<std::mutex> lock(mtx_);
        return devs_;
    }

private:
    size_t first_cpu_reg_index() const {
        for (size_t i = 0; i < regs_.size(); i++) {
            if (regs_[i] == cpu_reg_) {
                return i;
            }
        }
        return regs_.size();
    }

    // is_cpu comes from the family the device was listed by, so a CPU device whose reg field
    // is unset still sorts last
    void add_dev_locked(ggml_backend_dev_t dev, bool is_cpu) {
        if (std::find(devs_.begin(), devs_.end(), dev) != devs_.end()) {
            return;
        }
        is_cpu = is_cpu || (cpu_reg_ != nullptr && dev->reg == cpu_reg_);
        size_t pos = devs_.size();
        if (!is_cpu) {
            for (size_t i = 0; i < devs_.size(); i++) {
                if (dev_is_cpu_[i]) {
                    pos = i;
                    break;
                }
            }
        }
        devs_.insert(devs_.begin() + pos, dev);
        dev_is_cpu_.insert(dev_is_cpu_.begin() + pos, is_cpu);
    }

    std::mutex                      mtx_;
    ggml_backend_reg_t              cpu_reg_ = nullptr;
    std::vector<ggml_backend_reg_t> regs_;
    std::vector<ggml_backend_dev_t> devs_;
    std::vector<bool>               dev_is_cpu_; // parallel to devs_
};

backend_registry & get_registry() {
    static backend_registry reg;
    return reg;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Family accessors

const char * ggml_backend_reg_name(ggml_backend_reg_t reg) {
    GGML_ASSERT(reg != nullptr);
    return reg->iface.get_name(reg);
}

size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg) {
    GGML_ASSERT(reg != nullptr);
    return reg->iface.get_device_count(reg);
}

ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index) {
    GGML_ASSERT(reg != nullptr);
    return reg->iface.get_device(reg, index);
}

void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name) {
    GGML_ASSERT(reg != nullptr);
    if (reg->iface.get_proc_address == nullptr || name == nullptr) {
        return nullptr;
    }
    return reg->iface.get_proc_address(reg, name);
}

// ---------------------------------------------------------------------------------------------
// Registration

void ggml_backend_register(ggml_backend_reg_t reg) {
    get_registry().add_reg(reg);
}

void ggml_backend_device_register(ggml_backend_dev_t device) {
    get_registry().add_dev(device);
}

// ---------------------------------------------------------------------------------------------
// Global lookups

size_t ggml_backend_reg_count(void) {
    return get_registry().regs().size();
}

ggml_backend_reg_t ggml_backend_reg_get(size_t index) {
    std::vector<ggml_backend_reg_t> regs = get_registry().regs();
    GGML_ASSERT(index < regs.size() && "backend reg index out of range");
    return regs[index];
}

ggml_backend_reg_t ggml_backend_reg_by_name(const char * name) {
    if (name == nullptr) {
        return nullptr;
    }
    for (ggml_backend_reg_t reg : get_registry().regs()) {
        if (strcasecmp(ggml_backend_reg_name(reg), name) == 0) {
            return reg;
        }
    }
    return nullptr;
}

size_t ggml_backend_dev_count(void) {
    return get_registry().devs().size();
}

ggml_backend_dev_t ggml_backend_dev_get(size_t index) {
    std::vector<ggml_backend_dev_t> devs = get_registry().devs();
    GGML_ASSERT(index < devs.size() && "backend device index out of range");
    return devs[index];
}

ggml_backend_dev_t ggml_backend_dev_by_name(const char * name) {
    if (name == nullptr) {
        return nullptr;
    }
    for (ggml_backend_dev_t dev : get_registry().devs()) {
        if (strcasecmp(ggml_backend_dev_name(dev), name) == 0) {
            return dev;
        }
    }
    return nullptr;
}

ggml_backend_dev_t ggml_backend_dev_by_type(enum ggml_backend_dev_type type) {
    for (ggml_backend_dev_t dev : get_registry().devs()) {
        if (ggml_backend_dev_type(dev) == type) {
            return dev;
        }
    }
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Convenience initialisation

ggml_backend_t ggml_backend_init_by_name(const char * name, const char * params) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(name);
    if (dev == nullptr) {
        return nullptr;
    }
    return ggml_backend_dev_init(dev, params);
}

ggml_backend_t ggml_backend_init_by_type(enum ggml_backend_dev_type type, const char * params) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(type);
    if (dev == nullptr) {
        return nullptr;
    }
    return ggml_backend_dev_init(dev, params);
}

ggml_backend_t ggml_backend_init_best(void) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
    if (dev == nullptr) {
        dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_IGPU);
    }
    if (dev == nullptr) {
        dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    }
    if (dev == nullptr) {
        return nullptr;
    }
    return ggml_backend_dev_init(dev, nullptr);
}
