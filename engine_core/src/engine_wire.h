// The engine's half of the wire schema: an AddRequest into a Request, and
// one step's outputs for one API server into an EngineOutputs envelope.
// Private to engine_server.cc (split off to keep it about the threads).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sightline/engine_core/engine_core.h"
#include "sightline/ipc/codec.h"

namespace sightline::engine {

ipc::FinishReason ToWire(FinishReason r);

// A Request from a verified AddRequest, with its prompt block hashes. The
// caller sets client_index from the sender's routing id.
std::unique_ptr<Request> FromWire(const ipc::AddRequest& m, int block_size);

// Clears `b` and seals an EngineOutputs with `items` into it.
std::span<const std::uint8_t> SealOutputs(flatbuffers::FlatBufferBuilder& b,
                                          std::uint32_t engine_index, double timestamp,
                                          const std::vector<OutputItem>& items);

}  // namespace sightline::engine
