#include "fuzz-support.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace fuzz {

std::string as_file(const uint8_t * data, size_t size) {
    static int fd = -1;
    if (fd >= 0) close(fd);
    fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (fd < 0) { perror("memfd_create"); std::abort(); }
    size_t off = 0;
    while (off < size) {
        const ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) { perror("write"); std::abort(); }
        off += (size_t) w;
    }
    return "/proc/self/fd/" + std::to_string(fd);
}

const std::string & scratch_dir() {
    static const std::string dir = [] {
        const char * base = std::getenv("TMPDIR");
        std::string  tmpl = std::string(base && *base ? base : "/tmp") + "/sd-fuzz.XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!mkdtemp(buf.data())) { perror("mkdtemp"); std::abort(); }
        // Removed at exit (the targets remove their files); a plain buffer, as the string may be
        // destroyed before this runs.
        static char path[4096];
        std::snprintf(path, sizeof path, "%s", buf.data());
        std::atexit([] { rmdir(path); });
        return std::string(buf.data());
    }();
    return dir;
}

} // namespace fuzz
