#include "io/atomic_file.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sdio {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string dir_of(const std::string & path) {
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::string base_of(const std::string & path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// ---------------------------------------------------------------------------------------------
// Signal cleanup. The handler may only use async-signal-safe calls (unlink, sigaction, raise), so
// the registry is fixed storage: a slot's path is written before its flag is set, and the flag
// is cleared (with the signals blocked) before the path is renamed away or reused.

constexpr int    k_slots    = 16;
constexpr size_t k_path_max = 4096;

char                          g_paths[k_slots][k_path_max];
volatile std::sig_atomic_t    g_used[k_slots];
std::atomic<int>              g_registered{0};
volatile std::sig_atomic_t    g_signals = 0; // termination signals seen (commit refuses if any came during the write)
std::mutex                    g_mutex; // registration and handler installation (not the handler)
struct sigaction              g_old[2];
const int                     k_signals[2] = {SIGINT, SIGTERM};
bool                          g_installed = false;

extern "C" void cleanup_handler(int sig, siginfo_t * info, void * ctx) {
    const int saved_errno = errno; // the program may continue (a chained graceful handler)
    // Slots stay marked: their owners release them (a slot freed here could be reused while its
    // owner still holds its index).
    for (int k = 0; k < k_slots; ++k) {
        if (g_used[k]) ::unlink(g_paths[k]);
    }
    g_signals = g_signals + 1;
    const struct sigaction * old = sig == SIGINT ? &g_old[0] : &g_old[1];
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) {
            old->sa_sigaction(sig, info, ctx); // someone else's graceful handler (e.g. an abort flag)
            errno = saved_errno;
            return;
        }
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        errno = saved_errno;
        return;
    }
    // Default action: die by the same signal, so the exit status says what happened.
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);
}

// Called with g_mutex held.
void install_handlers() {
    if (g_installed) return;
    for (int k = 0; k < 2; ++k) {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = cleanup_handler;
        sa.sa_flags     = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGINT);
        sigaddset(&sa.sa_mask, SIGTERM);
        sigaction(k_signals[k], nullptr, &g_old[k]);
        // An ignored signal (nohup, a background job) stays ignored: it cannot interrupt us.
        if (!(g_old[k].sa_flags & SA_SIGINFO) && g_old[k].sa_handler == SIG_IGN) continue;
        sigaction(k_signals[k], &sa, nullptr);
    }
    g_installed = true;
}

// Called with g_mutex held: the previous dispositions come back once nothing is registered.
void uninstall_handlers() {
    if (!g_installed || g_registered.load() != 0) return;
    for (int k = 0; k < 2; ++k) {
        struct sigaction cur;
        sigaction(k_signals[k], nullptr, &cur);
        if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == cleanup_handler) sigaction(k_signals[k], &g_old[k], nullptr);
    }
    g_installed = false;
}

// Blocks SIGINT/SIGTERM in this thread for a scope (registry updates, the commit rename).
class signals_blocked {
  public:
    signals_blocked() {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGINT);
        sigaddset(&s, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &s, &old_);
    }
    ~signals_blocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

  private:
    sigset_t old_;
};

int register_temp(const std::string & path) {
    if (path.size() >= k_path_max) return -1;
    std::lock_guard<std::mutex> lock(g_mutex);
    signals_blocked             b;
    for (int k = 0; k < k_slots; ++k) {
        if (g_used[k]) continue;
        std::memcpy(g_paths[k], path.c_str(), path.size() + 1);
        g_used[k] = 1;
        ++g_registered;
        install_handlers();
        return k;
    }
    return -1;
}

// Called with the signals blocked.
void unregister_temp(int slot) {
    if (slot < 0) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    g_used[slot] = 0;
    --g_registered;
    uninstall_handlers();
}

} // namespace

int registered_temp_files() { return g_registered.load(); }

bool check_output_path(const std::string & path, std::string & err) {
    if (path.empty()) { err = "output path is empty"; return false; }
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return true;
        err = path + ": cannot stat the output path: " + errno_text();
        return false;
    }
    if (S_ISLNK(st.st_mode)) {
        err = path + ": the output path is a symbolic link; refusing to replace it (give the link's target instead)";
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        err = path + ": the output path exists and is not a regular file (device, FIFO, socket or directory); refusing to replace it";
        return false;
    }
    return true;
}

bool same_file(const std::string & a, const std::string & b) {
    struct stat sa, sb;
    if (stat(a.c_str(), &sa) != 0 || stat(b.c_str(), &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

atomic_file::~atomic_file() { discard(); }

void atomic_file::discard() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    if (!tmp_.empty()) {
        signals_blocked b;
        ::unlink(tmp_.c_str());
        unregister_temp(slot_);
        slot_ = -1;
        tmp_.clear();
    }
}

bool atomic_file::open(const std::string & path, std::string & err) {
    discard();
    if (!check_output_path(path, err)) return false;
    path_                 = path;
    const std::string dir = dir_of(path);
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
        char suffix[24];
        std::snprintf(suffix, sizeof suffix, ".tmp.%08x%08x", (unsigned) rd(), (unsigned) rd());
        const std::string tmp = dir + "/." + base_of(path) + suffix;
        // Signals stay blocked from creating the file until it is registered: no window in
        // which a SIGINT could leave it behind.
        signals_blocked b;
        const int       fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            fd_              = fd;
            tmp_             = tmp;
            signals_at_open_ = g_signals;
            slot_ = register_temp(tmp); // -1 (no signal cleanup) only when 16 writes are open at once
            return true;
        }
        const int e = errno;
        if (e != EEXIST) {
            err = path + ": cannot create a temporary file in '" + dir + "': " + std::strerror(e);
            return false;
        }
    }
    err = path + ": cannot create a temporary file in '" + dir + "' (100 names taken)";
    return false;
}

bool atomic_file::interrupted() const { return g_signals != signals_at_open_; }

bool atomic_file::commit(std::string & err) {
    if (fd_ < 0) { err = path_ + ": nothing to commit"; return false; }
    if (fsync(fd_) != 0) {
        err = path_ + ": fsync failed: " + errno_text();
        discard();
        return false;
    }
    const int fd = fd_;
    fd_          = -1;
    if (::close(fd) != 0) {
        err = path_ + ": close failed: " + errno_text();
        discard();
        return false;
    }
    {
        signals_blocked b;
        if (g_signals != signals_at_open_) {
            err = path_ + ": interrupted by a signal";
            discard();
            return false;
        }
        // Checked again right before the rename: the target may have been swapped meanwhile.
        if (!check_output_path(path_, err)) {
            discard();
            return false;
        }
        if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
            err = path_ + ": cannot rename the temporary file into place: " + errno_text();
            discard();
            return false;
        }
        unregister_temp(slot_);
        slot_ = -1;
        tmp_.clear();
    }
    // Make the rename itself durable; failure here leaves a complete file, so it is not an error.
    const int dfd = ::open(dir_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void) fsync(dfd);
        ::close(dfd);
    }
    return true;
}

bool write_text_atomic(const std::string & path, const std::string & text, std::string & err) {
    atomic_file f;
    if (!f.open(path, err)) return false;
    const char * p = text.data();
    size_t       n = text.size();
    while (n > 0) {
        const ssize_t w = ::write(f.fd(), p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            err = path + ": write failed: " + errno_text();
            return false;
        }
        p += w;
        n -= (size_t) w;
    }
    return f.commit(err);
}

} // namespace sdio
