// Sampling parameters: one struct on both sides of the wire. engine.fbs's
// SamplingParams table is the one list of fields, with their defaults; its
// generated object-API struct, SamplingParamsT, is what the API server fills
// from a request and what the engine samples with. A new field is added to
// engine.fbs alone: the two conversions below carry every field. Neither
// validates: the API server checks a request's values (its 400s), the engine
// its own invariants.
#pragma once

#include "sightline/ipc/engine_generated.h"

namespace sightline::ipc {

// `p` as a table in `b` (which must not be building another table).
inline flatbuffers::Offset<SamplingParams> ToWire(flatbuffers::FlatBufferBuilder& b,
                                                  const SamplingParamsT& p) {
  return SamplingParams::Pack(b, &p);
}

// A verified table's fields; every default when the message has none.
inline SamplingParamsT FromWire(const SamplingParams* s) {
  SamplingParamsT p;
  if (s) s->UnPackTo(&p);
  return p;
}

}  // namespace sightline::ipc
