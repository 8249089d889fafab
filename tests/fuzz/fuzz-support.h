#pragma once

// Shared by the fuzz targets: fuzzed bytes as a file the readers can open by path, and the
// check that fails a run.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

// A fuzz target's invariant: when `c` is false, prints "<target>: check failed: <text>" and
// aborts (libFuzzer then saves the input). Each target defines CHECK(c) as
// FUZZ_CHECK("<its name>", c, #c), so the text is `c` as written (before macro expansion).
#define FUZZ_CHECK(target, c, text)                                            \
    do {                                                                       \
        if (!(c)) {                                                            \
            std::fprintf(stderr, "%s: check failed: %s\n", target, text);      \
            std::abort();                                                      \
        }                                                                      \
    } while (0)

namespace fuzz {

// Writes the bytes to an anonymous in-memory file and returns a path to it (/proc/self/fd/N);
// the file lives until the next call. Aborts when the system refuses (not an input's fault).
std::string as_file(const uint8_t * data, size_t size);

// A private directory for outputs, created once per process.
const std::string & scratch_dir();

} // namespace fuzz
