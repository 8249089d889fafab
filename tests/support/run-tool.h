#pragma once

// run-tool.h — runs a program of the build (the sdx tool) through the shell and captures its exit
// code, stdout and stderr; shared by the tests that run sdx like a user would (test-model,
// test-comfy, test-sdx-vulkan). Header-only. What a test checks of the output stays in the test.

#include "io-test-files.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace sd_test {

struct tool_result {
    int         rc; // exit status, -1 when the program did not exit normally
    std::string out, err;
};

// Runs `'bin' args` with stdout and stderr sent to files under ::testing::TempDir() named after
// `tag` and this process, reads them back and removes them.
inline tool_result run_tool(const std::string & bin, const std::string & args, const std::string & tag) {
    const std::string base = ::testing::TempDir() + tag + std::to_string((long) getpid());
    const std::string cmd  = std::string("'") + bin + "' " + args + " >'" + base + ".out' 2>'" + base + ".err'";
    const int         st   = std::system(cmd.c_str());
    tool_result       r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(base + ".out"), slurp(base + ".err")};
    std::remove((base + ".out").c_str());
    std::remove((base + ".err").c_str());
    return r;
}

} // namespace sd_test
