#pragma once

// Shared by the fuzz targets: fuzzed bytes as a file the readers can open by path.

#include <cstddef>
#include <cstdint>
#include <string>

namespace fuzz {

// Writes the bytes to an anonymous in-memory file and returns a path to it (/proc/self/fd/N);
// the file lives until the next call. Aborts when the system refuses (not an input's fault).
std::string as_file(const uint8_t * data, size_t size);

// A private directory for outputs, created once per process.
const std::string & scratch_dir();

} // namespace fuzz
