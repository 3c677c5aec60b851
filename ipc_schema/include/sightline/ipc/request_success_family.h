// vllm:request_success, the one metric family two components write: the API
// server counts every request it finishes; the engine counts the aborts of
// requests whose API server is gone for good (nobody else will). Its
// definition lives here, with the wire contract between the two, because it
// is part of that contract (who counts which finish), and because this
// header is the one both can include without linking each other. Header
// only: both components link the registry that FamilyBuilder belongs to.
#pragma once

#include "sightline/shm_registry/family_builder.h"

namespace sightline::ipc {

// The finished_reason label's values (vLLM's FinishReason), each a series
// from the start.
inline constexpr const char* kFinishedReasons[] = {"stop", "length", "abort", "error",
                                                   "repetition"};

inline metrics::CounterBuilder RequestSuccessFamily() {
  return metrics::BuildCounter()
      .Name("vllm:request_success")
      .Help("Count of successfully processed requests.")
      .Labels({"engine", "model_name", "finished_reason"});
}

}  // namespace sightline::ipc
