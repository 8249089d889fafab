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
};

void print_table_header();
void print_row(const row & r);
void print_json(const row & r);

} // namespace bench
