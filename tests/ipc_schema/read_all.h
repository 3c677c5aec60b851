// Reads every field of a decoded envelope, so a verifier gap would show up as
// a crash or a sanitizer report (used by the tests and the libFuzzer target).
#pragma once

#include <bit>
#include <cstdint>

#include "sightline/ipc/codec.h"

namespace sightline::ipc {

inline std::size_t ReadAll(const Envelope* e) {
  std::size_t n = 0;
  auto str = [&](const flatbuffers::String* s) { n += s ? s->str().size() : 0; };
  auto ints = [&](const flatbuffers::Vector<std::int32_t>* v) {
    if (v)
      for (auto x : *v) n += static_cast<std::size_t>(x & 1);
  };
  auto loras = [&](const flatbuffers::Vector<flatbuffers::Offset<LoraAdapterInfo>>* v) {
    if (v)
      for (const auto* l : *v) {
        str(l->name());
        str(l->path());
      }
  };
  switch (e->body_type()) {
    case Body::AddRequest: {
      const auto* r = e->body_as_AddRequest();
      str(r->request_id());
      ints(r->prompt_token_ids());
      str(r->cache_salt());
      str(r->lora_name());
      if (const auto* s = r->sampling()) ints(s->stop_token_ids());
      break;
    }
    case Body::AbortRequests:
      for (const auto* id : *e->body_as_AbortRequests()->request_ids()) str(id);
      break;
    case Body::UtilityCall:
      n += static_cast<std::size_t>(e->body_as_UtilityCall()->kind());
      str(e->body_as_UtilityCall()->lora_name());
      str(e->body_as_UtilityCall()->lora_path());
      break;
    case Body::UtilityResult:
      str(e->body_as_UtilityResult()->message());
      break;
    case Body::EngineOutputs: {
      const auto* o = e->body_as_EngineOutputs();
      if (o->outputs())
        for (const auto* out : *o->outputs()) {
          str(out->request_id());
          ints(out->new_token_ids());
          if (out->events())
            for (const auto* ev : *out->events()) n += static_cast<std::size_t>(ev->type());
          if (out->prefill_stats()) n += out->prefill_stats()->num_cached_tokens();
          n += out->num_draft_tokens() + out->num_accepted_draft_tokens();
          // Read as bits: a corrupted double may be NaN or huge.
          n += std::bit_cast<std::uint64_t>(out->scheduler_time()) ^
               std::bit_cast<std::uint64_t>(out->model_forward_time()) ^
               std::bit_cast<std::uint64_t>(out->model_execute_time());
        }
      if (o->utility_result()) str(o->utility_result()->message());
      break;
    }
    case Body::EngineReady:
      str(e->body_as_EngineReady()->model_name());
      ints(e->body_as_EngineReady()->eos_token_ids());
      loras(e->body_as_EngineReady()->lora_adapters());
      break;
    case Body::LoraAdapters:
      loras(e->body_as_LoraAdapters()->adapters());
      break;
    case Body::EngineDead:
      str(e->body_as_EngineDead()->reason());
      break;
    case Body::Heartbeat:
      n += e->body_as_Heartbeat()->client_index();
      break;
    case Body::CacheUpdate:
      if (const auto* s = e->body_as_CacheUpdate()->stored()) n += s->size();
      if (const auto* r = e->body_as_CacheUpdate()->removed()) n += r->size();
      break;
    case Body::EngineLoad:
      n += e->body_as_EngineLoad()->num_waiting() + e->body_as_EngineLoad()->num_running();
      break;
    case Body::NONE:
    default:  // a member a newer schema appended; Decode's caller ignores it
      break;
  }
  return n;
}

}  // namespace sightline::ipc
