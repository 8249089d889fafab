#pragma once

// Shared benchmark plumbing: wait for an idle machine, time a callable repeatedly, summarise
// as best and median, and print rows as a table and as JSON lines.

#include <functional>
#include <string>
#include <vector>

namespace bench {

// Block until the machine has been nearly idle for one second (by /proc/stat), at most
// timeout_s. Returns false (and the caller says so in its output) if it stayed busy.
bool wait_idle(int max_busy_percent = 10, int timeout_s = 60);

struct timing {
    double best_s   = 0;
    double median_s = 0;
    int    reps     = 0;
};

// What time_it measures: wall-clock seconds (the default), or the process's CPU seconds divided
// by `threads` (set_cpu_clock): on a machine shared with other work a run's wall time grows with
// the others' load while its CPU time does not (much: caches are shared and a spinning thread
// counts), so a loaded machine can still compare kernels. Spinning OpenBLAS workers inflate it.
void set_cpu_clock(int threads); // threads <= 0: back to wall-clock time
bool cpu_clock();

// Runs fn once to warm up, then repeatedly until min_reps runs and min_time_s seconds have
// passed (at most max_reps).
timing time_it(const std::function<void()> & fn, int min_reps, double min_time_s, int max_reps = 1000);

struct row {
    std::string op;
    std::string shape;
    timing      t;
    double      work       = 0; // flops (compute-bound) or bytes (memory-bound)
    bool        is_bytes   = false;
    std::string baseline;        // what the ratio is against
    timing      base;            // baseline timing measured in the same run
    std::string kernel;          // which kernel produced the number (printed when set)
};

// Command-line reading shared by the benchmarks: every option with a value is validated and a
// bad one gets a one-line message naming the program and the option.
//   bench::arg_reader r("bench-x", argc, argv);
//   while (r.next()) {
//       if (r.flag("--smoke", o.smoke)) continue;
//       if (r.int_opt("--threads", 1, 512, o.threads)) continue;
//       return r.unknown();
//   }
//   return r.ok();
class arg_reader {
  public:
    arg_reader(const char * prog, int argc, char ** argv) : prog_(prog), argc_(argc), argv_(argv) {}

    bool next() { return ok_ && ++i_ < argc_; }
    bool is(const char * name) const { return arg() == name; }
    bool flag(const char * name, bool & out);
    bool int_opt(const char * name, long lo, long hi, int & out);
    bool double_opt(const char * name, double lo, double hi, double & out);
    bool string_opt(const char * name, std::string & out);
    bool unknown(); // reports the current argument as unknown; returns false
    bool ok() const { return ok_; }

  private:
    std::string  arg() const { return argv_[i_]; }
    const char * value(const char * name); // the next argument, or NULL with a message

    const char * prog_;
    int          argc_;
    char **      argv_;
    int          i_  = 0;
    bool         ok_ = true;
};

void print_table_header();
void print_row(const row & r);
void print_json(const row & r);

} // namespace bench
