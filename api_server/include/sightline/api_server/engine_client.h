// EngineClient: an API server's connection to one engine (DESIGN.md §2).
//
// Two DEALER sockets with routing id "c<index>" (requests out, outputs in),
// owned by one I/O thread that also heartbeats every 0.5 s, asks for
// EngineReady until it has it, and watches the output connection: if the
// engine goes away (EngineDead, or the connection drops and stays down), the
// client turns unhealthy and every in-flight request is failed at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sightline/ipc/codec.h"
#include "sightline/status.h"

namespace sightline::api {

struct EngineInfo {
  std::string model_name;
  std::uint32_t max_model_len = 0;
  std::uint32_t block_size = 0;
  std::uint64_t num_gpu_blocks = 0;
  std::uint64_t kv_cache_size_tokens = 0;
  std::uint32_t vocab_size = 0;
  std::vector<std::int32_t> eos_token_ids;
};

// One output for one request, as the engine sent it (plus the step time).
struct RequestDelta {
  double engine_timestamp = 0;
  const ipc::RequestOutput* output = nullptr;  // null: the engine is gone (fail the request)
};

class EngineClient {
 public:
  using OutputHandler = std::function<void(const RequestDelta&)>;

  struct Options {
    std::string input_address, output_address;
    std::uint32_t client_index = 0;
    double ready_timeout_s = 30;
    double engine_gone_after_s = 1;  // output connection down this long = engine gone
  };

  explicit EngineClient(Options options);
  ~EngineClient();
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;

  // Connects and waits for EngineReady.
  Status Start(EngineInfo* info);
  // Stops the I/O thread (no handler runs after it returns); idempotent.
  void Stop();
  bool alive() const;

  // Sends a request; `handler` runs on the client's I/O thread for each of
  // its outputs until one carries a finish reason (or the engine is gone).
  // `request` must be a finished Envelope holding an AddRequest with this id
  // and this client's index (the engine routes outputs by it); checked.
  Status Submit(const std::string& request_id, std::vector<std::uint8_t> request,
                OutputHandler handler);
  void Abort(const std::vector<std::string>& request_ids);
  // A utility call; the result (ok, message) arrives on the I/O thread.
  void Utility(ipc::UtilityKind kind,
               std::function<void(bool ok, const std::string& message)> done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sightline::api
