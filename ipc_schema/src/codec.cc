#include "sightline/ipc/codec.h"

#include <cstring>

namespace sightline::ipc {

namespace {
// Bounds the verifier's work on hostile input (deeply nested or huge tables).
constexpr flatbuffers::uoffset_t kMaxDepth = 16;
constexpr flatbuffers::uoffset_t kMaxTables = 1'000'000;
}  // namespace

const Envelope* Decode(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return nullptr;
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), kMaxDepth, kMaxTables);
  if (!VerifyEnvelopeBuffer(verifier)) return nullptr;
  const Envelope* e = GetEnvelope(bytes.data());
  // The verifier accepts a union type without its table (an absent table is
  // valid FlatBuffers); a message without a body is not. Found by the fuzzer.
  return e->body_type() == Body::NONE || e->body() == nullptr ? nullptr : e;
}

const Envelope* DecodeFrame(const void* data, std::size_t size,
                            std::vector<std::uint64_t>* storage) {
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  if (reinterpret_cast<std::uintptr_t>(data) % alignof(std::uint64_t) != 0) {
    storage->assign((size + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t), 0);
    std::memcpy(storage->data(), data, size);
    bytes = reinterpret_cast<const std::uint8_t*>(storage->data());
  }
  return Decode({bytes, size});
}

std::span<const std::uint8_t> Seal(flatbuffers::FlatBufferBuilder& builder, Body type,
                                   flatbuffers::Offset<void> body) {
  builder.Finish(CreateEnvelope(builder, type, body));
  return {builder.GetBufferPointer(), builder.GetSize()};
}

}  // namespace sightline::ipc
