// device_spec.cpp — --device resolution against the backend registry (see device_spec.h).

#include "device_spec.h"

#include <cctype>
#include <cstdlib>
#include <strings.h>

namespace krea2 {

namespace {

std::string lower(std::string s) {
    for (char & c : s) c = (char) std::tolower((unsigned char) c);
    return s;
}

bool same_name(const std::string & a, const char * b) {
    return b != nullptr && strcasecmp(a.c_str(), b) == 0;
}

// Families this project can be built with: when one is asked for but absent, say how to get it.
struct known_family {
    const char * reg_name;
    const char * cmake_option;
};
const known_family KNOWN_FAMILIES[] = {
    {"Vulkan", "-DGGML_VULKAN=ON"},
    {"CUDA", "-DGGML_CUDA=ON"},
};

// "cpu, vulkan[:N], cuda[:N]": what --device accepts in this process besides exact names.
std::string accepted_families() {
    std::string s = "cpu";
    for (size_t i = 0; i < ggml_backend_reg_count(); i++) {
        const std::string name = lower(ggml_backend_reg_name(ggml_backend_reg_get(i)));
        if (name != "cpu") s += ", " + name + "[:N]";
    }
    return s;
}

// "cuda", "CUDA1": the family itself or one of its device names (family name + digits).
bool names_family(const std::string & spec, const char * reg_name) {
    const std::string s = lower(spec), f = lower(reg_name);
    if (s.compare(0, f.size(), f) != 0) return false;
    for (size_t i = f.size(); i < s.size(); i++) {
        if (!std::isdigit((unsigned char) s[i])) return false;
    }
    return true;
}

bool choose(ggml_backend_dev_t dev, device_choice & out) {
    // a CPU-type device is the CPU backend the runner always has
    out.dev = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU ? nullptr : dev;
    return true;
}

} // namespace

std::string registry_devices() {
    std::string s;
    for (size_t r = 0; r < ggml_backend_reg_count(); r++) {
        ggml_backend_reg_t reg = ggml_backend_reg_get(r);
        for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); i++) {
            if (!s.empty()) s += ", ";
            s += ggml_backend_dev_name(ggml_backend_reg_dev_get(reg, i));
        }
    }
    return s.empty() ? "none" : s;
}

bool resolve_device(const std::string & spec, device_choice & out, std::string & err) {
    out = device_choice();
    const std::string where = "--device '" + spec + "': ";
    const std::string here  = "devices here: " + registry_devices();
    if (spec.empty()) {
        err = where + "empty (" + here + ")";
        return false;
    }
    if (same_name(spec, "cpu")) return true;

    // an exact device name first: "Vulkan0" is a device, not family "vulkan0"
    for (size_t r = 0; r < ggml_backend_reg_count(); r++) {
        ggml_backend_reg_t reg = ggml_backend_reg_get(r);
        for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); i++) {
            ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, i);
            if (same_name(spec, ggml_backend_dev_name(dev))) return choose(dev, out);
        }
    }

    // FAMILY or FAMILY:N
    std::string  family = spec;
    size_t       index  = 0;
    const size_t colon  = spec.find(':');
    if (colon != std::string::npos) {
        family              = spec.substr(0, colon);
        const std::string n = spec.substr(colon + 1);
        char *            end = nullptr;
        const unsigned long v = n.empty() || !std::isdigit((unsigned char) n[0]) ? 0 : strtoul(n.c_str(), &end, 10);
        if (n.empty() || end == nullptr || *end != '\0' || v > 1024) {
            err = where + "'" + n + "' is not a device index";
            return false;
        }
        index = (size_t) v;
    }
    ggml_backend_reg_t reg = nullptr;
    for (size_t r = 0; r < ggml_backend_reg_count() && reg == nullptr; r++) {
        if (same_name(family, ggml_backend_reg_name(ggml_backend_reg_get(r)))) reg = ggml_backend_reg_get(r);
    }
    if (reg == nullptr) {
        for (const known_family & k : KNOWN_FAMILIES) {
            if (names_family(family, k.reg_name)) {
                err = where + "this build has no " + k.reg_name + " backend (configure with " + k.cmake_option + "; " +
                      here + ")";
                return false;
            }
        }
        err = where + "not one of " + accepted_families() + " or a device name (" + here + ")";
        return false;
    }
    const size_t n = ggml_backend_reg_dev_count(reg);
    if (index >= n) {
        const std::string reg_name = ggml_backend_reg_name(reg);
        err = where + "no such " + reg_name + " device (" + std::to_string(n) + " found";
        // the Vulkan backend leaves CPU drivers out by default (upstream's rule): say how to get one
        if (same_name(reg_name, "Vulkan") && !getenv("GGML_VK_VISIBLE_DEVICES")) {
            err += "; a CPU Vulkan driver such as lavapipe is used only when GGML_VK_VISIBLE_DEVICES names its index, "
                   "e.g. GGML_VK_VISIBLE_DEVICES=0";
        }
        err += "; " + here + ")";
        return false;
    }
    return choose(ggml_backend_reg_dev_get(reg, index), out);
}

} // namespace krea2
