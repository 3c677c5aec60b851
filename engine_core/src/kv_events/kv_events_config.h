// --kv-events-config: whether and where the engine publishes its KV-cache
// events (blocks stored, evicted, all cleared), as vLLM spells the flag, so
// that a KV-aware router (llm-d) can track which prefixes each engine holds.
#pragma once

#include <string>
#include <string_view>

#include "sightline/status.h"

namespace sightline::engine {

// vLLM's KVEventsConfig: its keys and defaults.
struct KvEventsConfig {
  bool enable_kv_cache_events = false;
  // "zmq" or "null" (no publishing). Absent from the flag: "zmq" when events
  // are enabled, else "null" (vLLM's __post_init__).
  std::string publisher = "null";
  // The PUB socket: bound when it has '*' or '::' or is ipc:// or inproc://,
  // else connected (vLLM's rule; a router dials in, so bind: tcp://*:PORT).
  std::string endpoint = "tcp://*:5557";
  std::string replay_endpoint;  // the ROUTER serving replay, always bound; empty: none
  int buffer_steps = 10000;     // the most recent batches kept for replay
  int hwm = 100000;             // the PUB socket's send high-water mark; 0: unlimited
  int max_queue_size = 100000;  // batches waiting for the publisher thread
  std::string topic;            // the first frame of every message; llm-d wants kv@POD@MODEL

  bool publishes() const { return enable_kv_cache_events && publisher == "zmq"; }
};

// The flag's JSON object with the keys above. Every key is type-checked (a
// JSON null is "absent" for publisher and replay_endpoint only); unknown
// keys and a publisher other than "null"/"zmq" are refused; buffer_steps and
// max_queue_size must be >= 1, hwm >= 0 (0 is ZeroMQ's "no limit"); endpoint
// (and replay_endpoint when set) must start with tcp://, ipc:// or
// inproc://. Errors are one line starting "--kv-events-config: " and naming
// the key; on error *out is the defaults. An empty string is the defaults
// (no events).
Status ParseKvEventsConfig(std::string_view json, KvEventsConfig* out);

// vLLM's offset_endpoint_port: data-parallel rank r publishes on its own
// endpoint. Rank 0 (or an empty endpoint) is unchanged; inproc://X becomes
// inproc://X_dp<r>; tcp://HOST:PORT becomes tcp://HOST:<PORT+r>; anything
// else with r > 0 (ipc://, a tcp endpoint without a numeric port, a port
// pushed past 65535, a negative rank) sets *error and returns "".
std::string OffsetEndpointPort(const std::string& endpoint, int data_parallel_rank, Status* error);

}  // namespace sightline::engine
