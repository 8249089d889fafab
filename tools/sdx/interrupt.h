#pragma once

// interrupt.h — Ctrl-C (SIGINT) and SIGTERM as a request to stop: the handler only records the
// signal (async-signal-safe), the CPU backend's abort callback reads it so a running graph stops
// at its next poll, and the command unwinds cleanly (nothing written) with exit 128 + signal
// (130 for SIGINT, 143 for SIGTERM). A second signal while stopping gets the default action.

namespace sdx {

// Installs the handlers for its lifetime (restores the previous ones after).
// Test hook: SDX_TEST_SIGINT_AT_POLL=N (or SDX_TEST_SIGTERM_AT_POLL=N) makes the Nth call of
// abort_poll raise that signal itself, so a test interrupts at a chosen point by count, never
// by timer.
class interrupt_scope {
  public:
    interrupt_scope();
    ~interrupt_scope();
    interrupt_scope(const interrupt_scope &)             = delete;
    interrupt_scope & operator=(const interrupt_scope &) = delete;
};

// The signal received (0: none).
int interrupt_signal();

// The runner's abort callback (ggml_abort_callback): true once a stop was requested.
bool abort_poll(void * unused);

// Throws failure(128 + signal, "interrupted by ...") when a stop was requested.
void stop_if_interrupted();

} // namespace sdx
