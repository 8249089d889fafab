#pragma once

// cli.h — shared plumbing of the sdx subcommands: argument reading with one-line errors, the
// model options every workload command takes, progress output and atomic file writes.

#include "model/krea2.h"
#include "model/runner.h"
#include "model/weights.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sdx {

// Thrown for any failure; main prints "sdx: error: <what>" and exits with code.
struct failure : std::runtime_error {
    int code;
    failure(int c, const std::string & m) : std::runtime_error(m), code(c) {}
};
[[noreturn]] inline void usage_error(const std::string & m) { throw failure(2, m); }
[[noreturn]] inline void fail(const std::string & m) { throw failure(1, m); }

// Walks argv after the subcommand name. An option (an argument starting with '-') given twice is
// a usage error: the last one silently winning hides typos in long command lines.
class args {
  public:
    args(int argc, char ** argv) : argc_(argc), argv_(argv) {}
    bool        next();
    std::string cur() const { return argv_[i_]; }
    // the value after the current option (usage error when missing, or when it is another
    // option: "--weights --no-check" is a forgotten value, not a file named "--no-check")
    std::string value();
    long long   int_value(long long lo, long long hi);

  private:
    int                      argc_;
    char **                  argv_;
    int                      i_ = 0;
    std::vector<std::string> seen_;
};

// Strict decimal: optional '-', then digits only (no spaces, '+', hex, or trailing text), in
// [lo, hi] (usage error naming opt otherwise).
long long parse_int(const std::string & opt, const std::string & v, long long lo, long long hi);

// Model options shared by run / inspect / bench.
struct model_opts {
    krea2::config cfg;
    krea2::wtype  dtype   = krea2::wtype::int8;
    int           threads = 0;
    uint64_t      seed    = 42;
    bool          fusion  = true;
    bool          text_set = false;
    std::string   width_opt; // the first of --hidden/--heads/--kv-heads/--mlp given (they clash with --weights)
    std::string   weights;
    std::string   device = "cpu"; // --device cpu | FAMILY[:N] | DEVICE (src/model/device_spec.h)

    // true if the current argument was a model option (consumed with its value)
    bool parse(args & a);
    // after parsing: default text tokens, validation (usage error on bad combinations)
    void finish();
};
extern const char * const MODEL_OPTS_HELP;

// The weight source for these options (synthetic, or the checkpoint, which may update cfg).
std::unique_ptr<krea2::weight_source> make_source(model_opts & o);

// Loads the model in `type` (fill false: layout only, for plan inspection). Fails with a message.
void load_model(model_opts & o, krea2::wtype type, krea2::model & m, bool fill = true);
// Loads from an already opened source (make_source), polling for Ctrl-C between blocks.
void load_model(model_opts & o, krea2::wtype type, krea2::model & m, krea2::weight_source & src);
// With a --device GPU, moves m's weights into its memory (ops reading them then run there, without
// per-graph copies); when that memory cannot hold them they stay in host memory (a note says so).
void place_weights(krea2::runner & r, krea2::model & m);
// Runs the stack with a per-block progress display. Fails with a message (exit 128 + signal when
// the runner's abort callback stopped it).
krea2::runner::result run_stack(krea2::runner & r, const krea2::model & m, const krea2::build_options & bo,
                                const std::vector<float> & x, const std::vector<float> & tvec, const std::string & label);

// Progress: a bar on stderr when it is a terminal, plain lines otherwise.
class progress {
  public:
    explicit progress(std::string label);
    ~progress(); // ends an open bar line, so an error after it starts on its own line
    void update(double done, double total, const std::string & note = "");
    void finish(const std::string & note = "");

  private:
    std::string label_;
    bool        tty_;
    int         last_pct_ = -1;
    bool        open_     = false;
};

// Writes text to path through a temporary file + rename (no partial file on failure).
void write_file_atomic(const std::string & path, const std::string & text);

std::string json_escape(const std::string & s);
std::string fmt(const char * f, ...) __attribute__((format(printf, 1, 2)));
std::string human_bytes(size_t n);

int cmd_run(int argc, char ** argv);
int cmd_inspect(int argc, char ** argv);
int cmd_bench(int argc, char ** argv);
int cmd_quantize(int argc, char ** argv);
int cmd_verify(int argc, char ** argv);

} // namespace sdx
