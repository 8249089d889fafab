// ggml-backend-load.cpp — upstream's dynamic backend loading entry points. Every backend of this
// runtime is linked into the library and registers itself on first use of the registry, so
// loading "all" backends only has to make sure that registration happened.

#include "ggml-backend.h"

extern "C" {

void ggml_backend_load_all(void) {
    (void) ggml_backend_reg_count(); // triggers the built-in registrations
}

void ggml_backend_load_all_from_path(const char * dir_path) {
    (void) dir_path; // no backend libraries to look for
    ggml_backend_load_all();
}

} // extern "C"
