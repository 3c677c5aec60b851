// Decoding guard for every received IPC buffer: nothing is read from a
// buffer that has not passed the FlatBuffers verifier. The message types are
// the flatc-generated ones (sightline/ipc/engine_generated.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sightline/ipc/engine_generated.h"

namespace sightline::ipc {

// The envelope of `bytes`, or null when the buffer fails verification (wrong
// size, bad offsets, unknown union member, missing required fields, ...).
const Envelope* Decode(std::span<const std::uint8_t> bytes);

// Decode() for a received frame, which may sit at any address: the stream
// sockets' reader hands out frames inside its receive buffer, each 4 bytes
// after its length (sightline/ipc/frame_stream.h), and FlatBuffers reads scalars in
// place, so a misaligned frame would be undefined behaviour (UBSan's
// alignment check). A misaligned frame is copied into `*storage` (8-byte
// aligned, the widest FlatBuffers scalar) and decoded there; the envelope
// lives as long as the frame or `*storage`, whichever it points into.
const Envelope* DecodeFrame(const void* data, std::size_t size,
                            std::vector<std::uint64_t>* storage);

// Finishes `builder` with an envelope around `body` and returns the bytes.
std::span<const std::uint8_t> Seal(flatbuffers::FlatBufferBuilder& builder, Body type,
                                   flatbuffers::Offset<void> body);

}  // namespace sightline::ipc
