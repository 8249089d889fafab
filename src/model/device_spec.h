#pragma once

// device_spec.h — what a --device argument names, resolved against the backend registry:
//   cpu                     the CPU backend alone (any case)
//   FAMILY / FAMILY:N       device N (default 0) of a registry family, by its name in any case
//                           (vulkan, cuda, ...)
//   NAME                    a device by its exact ggml name (Vulkan0, CUDA1, ...; any case)
// No family is hard-coded: a build with another backend accepts its devices the same way.

#include "ggml-backend.h"

#include <string>

namespace krea2 {

struct device_choice {
    ggml_backend_dev_t dev = nullptr; // nullptr: the CPU backend alone
};

// false with a one-line err that names what is wrong and the devices that exist (and how to
// get a missing family or a CPU Vulkan driver) when spec names nothing in this process.
bool resolve_device(const std::string & spec, device_choice & out, std::string & err);

// "CPU, Vulkan0" — every device of the registry, in registry order.
std::string registry_devices();

} // namespace krea2
