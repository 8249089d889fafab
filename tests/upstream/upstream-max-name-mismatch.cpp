// upstream-max-name-mismatch.cpp — compiled with a GGML_MAX_NAME 16 larger than the upstream
// library's (tests/upstream/CMakeLists.txt): sd_ggml_register_extensions() must refuse, naming
// GGML_MAX_NAME, since nothing else would notice that this program's ggml_tensor is another size.

#include "ggml_extensions.h"

#include <cstdio>
#include <cstring>

int main() {
    if (sd_ggml_register_extensions()) {
        std::fprintf(stderr, "FAIL: a GGML_MAX_NAME mismatch (this program: %d) was accepted\n", GGML_MAX_NAME);
        return 1;
    }
    const char * e = sd_ggml_last_error();
    if (std::strstr(e, "GGML_MAX_NAME") == nullptr) {
        std::fprintf(stderr, "FAIL: refused without naming GGML_MAX_NAME: %s\n", e);
        return 1;
    }
    std::printf("refused as expected: %s\n", e);
    return 0;
}
