// The one monotonic clock of Sightline. Every timestamp and deadline is read
// from it: the stamps engine and API servers put on the IPC wire (seconds, as
// doubles), heartbeats, timeouts, and the load generator's measurements.
// Every latency subtracts two stamps of one process's clock, never an
// engine's stamp from an API server's (README, "How each latency is
// measured"); std::chrono::steady_clock is CLOCK_MONOTONIC on Linux.
#pragma once

#include <chrono>
#include <cstdint>

namespace sightline {

using Clock = std::chrono::steady_clock;

// Seconds since the clock's epoch (boot): the unit of every wire timestamp.
inline double MonotonicSeconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Nanoseconds since the clock's epoch, for integer stamps (atomics, samples).
inline std::int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Seconds since the Unix epoch, from the wall clock: only for values other
// systems read as dates (a gauge whose value is a time, an event batch's
// timestamp), never for an interval (the wall clock steps).
inline double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace sightline
