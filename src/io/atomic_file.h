#pragma once

// Output files that appear whole or not at all: a temporary file created next to the target
// (random name, O_EXCL|O_NOFOLLOW, so a planted file or symlink is never opened), renamed over
// the target on commit. Until then the temporary is registered for removal on SIGINT/SIGTERM,
// and the destructor removes it on every error path (including exceptions), so an interrupted
// or failed write leaves neither a partial output nor a stray temporary, and an existing output
// stays as it was.
//
// The target itself is checked first: an existing symlink, device, FIFO or directory at the
// output path is refused (never replaced by a regular file).

#include <string>

namespace sdio {

class atomic_file {
  public:
    atomic_file() = default;
    ~atomic_file(); // removes the temporary unless committed
    atomic_file(const atomic_file &) = delete;
    atomic_file & operator=(const atomic_file &) = delete;

    // Checks the target and creates the temporary; err is one line naming path.
    bool open(const std::string & path, std::string & err);
    int                 fd() const { return fd_; }
    const std::string & temp_path() const { return tmp_; }

    // true once SIGINT/SIGTERM arrived after open() (the temporary is gone then; the program's
    // own handler, if any, ran): stop writing, commit will fail.
    bool interrupted() const;

    // fsync, close, rename over the target, fsync the directory. False (temporary removed) when
    // any step fails or a termination signal arrived during the write.
    bool commit(std::string & err);

  private:
    std::string path_, tmp_;
    int         fd_   = -1;
    int         slot_ = -1; // in the signal-cleanup registry
    long        signals_at_open_ = 0;
    void        discard();
};

// Checks that path can be an output (absent, or a regular file that is not a symlink); false
// with a message otherwise. Used to fail before long work rather than after it.
bool check_output_path(const std::string & path, std::string & err);

// true when a and b name the same existing file (device and inode: also through links, "./"
// prefixes or hard links); false when either does not exist.
bool same_file(const std::string & a, const std::string & b);

// Writes text to path through an atomic_file.
bool write_text_atomic(const std::string & path, const std::string & text, std::string & err);

// Test hook: the number of temporaries currently registered for signal cleanup.
int registered_temp_files();

} // namespace sdio
