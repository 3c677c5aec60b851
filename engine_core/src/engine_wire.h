// The engine's half of the wire schema: a received message into an
// InputEvent (an AddRequest into a Request), and what the engine sends (one
// step's outputs for one API server, READY, a utility result, EngineDead, a
// heartbeat) into envelopes. Private to engine_server.cc (split off to keep
// it about the threads). Each Seal* clears `b` and returns the sealed bytes,
// valid until `b` is reused.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <string>

#include "engine_core.h"
#include "kv_events/cache_update.h"
#include "sightline/ipc/client_identity.h"
#include "sightline/ipc/codec.h"

namespace sightline::engine {

ipc::FinishReason ToWire(FinishReason r);

// A verified message from an API server, for the main thread.
struct InputEvent {
  enum class Kind { kAdd, kAbort, kUtility, kHeartbeat } kind;
  ipc::ClientId client;  // from the connection's identity, never from the body
  std::unique_ptr<Request> request;
  std::vector<std::string> ids;
  std::uint64_t call_id = 0;
  ipc::UtilityKind utility = ipc::UtilityKind::Health;
  std::string lora_name, lora_path;  // the LoRA utility calls' arguments
  bool need_ready = false;
};

// `env`, sent by `sender` (its connection's identity), as an event; false when it is
// to be rejected: a body naming another client than its sender, or a
// message the engine does not take.
bool DecodeInput(const ipc::Envelope& env, ipc::ClientId sender, int block_size, InputEvent* e);

// A Request from a verified AddRequest, with its prompt block hashes. The
// caller sets client_index from the sender's identity.
std::unique_ptr<Request> FromWire(const ipc::AddRequest& m, int block_size);

// An EngineOutputs with `items`.
std::span<const std::uint8_t> SealOutputs(flatbuffers::FlatBufferBuilder& b,
                                          std::uint32_t engine_index, double timestamp,
                                          std::span<const OutputItem> items);

// How many tables an EngineOutputs may hold: well under the receiver's
// verifier cap (codec.cc), which drops a message past it whole.
inline constexpr std::size_t kMaxOutputTables = 200'000;
// `items` cut into consecutive runs of at most kMaxOutputTables tables each
// (prompt logprobs make one item thousands of tables), so that no message is
// refused; an item that alone exceeds it goes in a run of its own.
std::vector<std::span<const OutputItem>> SplitOutputs(std::span<const OutputItem> items);
// The LoRA adapters served (name, path), as EngineReady and LoraAdapters carry them.
using LoraAdapterList = std::vector<std::pair<std::string, std::string>>;
// EngineReady; `loras` is the main thread's snapshot (the core changes them).
std::span<const std::uint8_t> SealReady(flatbuffers::FlatBufferBuilder& b,
                                        std::uint32_t engine_index,
                                        const std::string& served_model_name,
                                        std::uint64_t kv_cache_size_tokens, const EngineCore& core,
                                        const LoraAdapterList& loras);
std::span<const std::uint8_t> SealLoraAdapters(flatbuffers::FlatBufferBuilder& b,
                                               std::uint32_t engine_index,
                                               const LoraAdapterList& loras);
// An EngineOutputs with no outputs and this utility result.
std::span<const std::uint8_t> SealUtilityResult(flatbuffers::FlatBufferBuilder& b,
                                                std::uint32_t engine_index, double timestamp,
                                                std::uint64_t call_id, bool ok,
                                                const std::string& message, bool not_found);
std::span<const std::uint8_t> SealDead(flatbuffers::FlatBufferBuilder& b,
                                       std::uint32_t engine_index, const std::string& reason);
std::span<const std::uint8_t> SealHeartbeat(flatbuffers::FlatBufferBuilder& b, ipc::ClientId to);
std::span<const std::uint8_t> SealCacheUpdate(flatbuffers::FlatBufferBuilder& b,
                                              std::uint32_t engine_index,
                                              const CacheUpdate& update);
std::span<const std::uint8_t> SealLoad(flatbuffers::FlatBufferBuilder& b,
                                       std::uint32_t engine_index, double timestamp,
                                       std::uint32_t num_waiting, std::uint32_t num_running);

// The GetConfig utility's answer: the serving configuration as JSON.
std::string ConfigJson(const EngineCore& core, const std::string& served_model_name);

}  // namespace sightline::engine
