// Decoding guard for every received IPC buffer: nothing is read from a
// buffer that has not passed the FlatBuffers verifier. The message types are
// the flatc-generated ones (sightline/ipc/engine_generated.h).
#pragma once

#include <cstdint>
#include <span>

#include "sightline/ipc/engine_generated.h"

namespace sightline::ipc {

// The envelope of `bytes`, or null when the buffer fails verification (wrong
// size, bad offsets, unknown union member, missing required fields, ...).
const Envelope* Decode(std::span<const std::uint8_t> bytes);

// Finishes `builder` with an envelope around `body` and returns the bytes.
std::span<const std::uint8_t> Seal(flatbuffers::FlatBufferBuilder& builder, Body type,
                                   flatbuffers::Offset<void> body);

}  // namespace sightline::ipc
