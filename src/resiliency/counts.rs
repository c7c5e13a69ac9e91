//! What a circuit breaker counts (gobreaker's `Counts`), and what its `trip` condition sees.

/// Requests and outcomes of the current generation (gobreaker's `Counts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests admitted.
    pub requests: u32,
    /// Successful requests.
    pub total_successes: u32,
    /// Failed requests.
    pub total_failures: u32,
    /// Successes since the last failure.
    pub consecutive_successes: u32,
    /// Failures since the last success.
    pub consecutive_failures: u32,
}

impl Counts {
    // Go's uint32 counters wrap; wrapping here too keeps debug builds from panicking.
    pub(super) fn on_request(&mut self) {
        self.requests = self.requests.wrapping_add(1);
    }

    pub(super) fn on_success(&mut self) {
        self.total_successes = self.total_successes.wrapping_add(1);
        self.consecutive_successes = self.consecutive_successes.wrapping_add(1);
        self.consecutive_failures = 0;
    }

    pub(super) fn on_failure(&mut self) {
        self.total_failures = self.total_failures.wrapping_add(1);
        self.consecutive_failures = self.consecutive_failures.wrapping_add(1);
        self.consecutive_successes = 0;
    }
}
