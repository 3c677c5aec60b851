#include "engine_wire.h"

#include <nlohmann/json.hpp>

#include "kv/block_hash.h"

namespace sightline::engine {

ipc::FinishReason ToWire(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return ipc::FinishReason::None;
    case FinishReason::kStop:
      return ipc::FinishReason::Stop;
    case FinishReason::kLength:
      return ipc::FinishReason::Length;
    case FinishReason::kAbort:
      return ipc::FinishReason::Abort;
    case FinishReason::kError:
      return ipc::FinishReason::Error;
    case FinishReason::kRepetition:
      return ipc::FinishReason::Repetition;
  }
  return ipc::FinishReason::Error;
}

std::unique_ptr<Request> FromWire(const ipc::AddRequest& m, int block_size) {
  auto r = std::make_unique<Request>();
  r->id = m.request_id()->str();
  r->tokens.assign(m.prompt_token_ids()->begin(), m.prompt_token_ids()->end());
  r->priority = m.priority();
  if (m.cache_salt()) r->cache_salt = m.cache_salt()->str();
  if (m.lora_name()) r->lora_name = m.lora_name()->str();
  r->sampling = ipc::FromWire(m.sampling());
  // Prompt block hashing happens here, off the main loop.
  ExtendBlockHashes(r->tokens, block_size, r->cache_salt, &r->block_hashes);
  return r;
}

bool DecodeInput(const ipc::Envelope& env, ipc::ClientId sender, int block_size, InputEvent* e) {
  // Who sent it is its connection's identity; a body that names someone else is refused.
  auto is_sender = [&](std::uint32_t index, std::uint64_t incarnation) {
    return ipc::ClientId{index, incarnation} == sender;
  };
  e->client = sender;
  switch (env.body_type()) {
    case ipc::Body::AddRequest: {
      const auto* m = env.body_as_AddRequest();
      if (!is_sender(m->client_index(), m->incarnation())) return false;
      e->kind = InputEvent::Kind::kAdd;
      e->request = FromWire(*m, block_size);
      e->request->client_index = sender.index;
      return true;
    }
    case ipc::Body::AbortRequests:
      e->kind = InputEvent::Kind::kAbort;
      for (const auto* id : *env.body_as_AbortRequests()->request_ids())
        e->ids.push_back(id->str());
      return true;
    case ipc::Body::UtilityCall: {
      const auto* m = env.body_as_UtilityCall();
      if (!is_sender(m->client_index(), m->incarnation())) return false;
      e->kind = InputEvent::Kind::kUtility;
      e->call_id = m->call_id();
      e->utility = m->kind();
      if (m->lora_name()) e->lora_name = m->lora_name()->str();
      if (m->lora_path()) e->lora_path = m->lora_path()->str();
      return true;
    }
    case ipc::Body::Heartbeat: {
      const auto* m = env.body_as_Heartbeat();
      if (!is_sender(m->client_index(), m->incarnation())) return false;
      e->kind = InputEvent::Kind::kHeartbeat;
      e->need_ready = m->need_ready();
      return true;
    }
    default:  // engine-to-API-server messages have no business here
      return false;
  }
}

namespace {

flatbuffers::Offset<ipc::TokenLogprobs> LogprobsToWire(flatbuffers::FlatBufferBuilder& b,
                                                       const kernels::TokenLogprobs& l) {
  return ipc::CreateTokenLogprobsDirect(b, l.token, l.logprob, l.rank, &l.top_tokens,
                                        &l.top_logprobs);
}

}  // namespace

std::vector<std::span<const OutputItem>> SplitOutputs(std::span<const OutputItem> items) {
  std::vector<std::span<const OutputItem>> runs;
  std::size_t begin = 0, tables = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const OutputItem& it = items[i];
    const std::size_t mine = 2 + it.events.size() + it.logprobs.size() +
                             it.prompt_logprobs.size();  // output, prefill stats, the rest
    if (i > begin && tables + mine > kMaxOutputTables) {
      runs.push_back(items.subspan(begin, i - begin));
      begin = i;
      tables = 0;
    }
    tables += mine;
  }
  if (begin < items.size()) runs.push_back(items.subspan(begin));
  return runs;
}

std::span<const std::uint8_t> SealOutputs(flatbuffers::FlatBufferBuilder& b,
                                          std::uint32_t engine_index, double timestamp,
                                          std::span<const OutputItem> items) {
  b.Clear();
  std::vector<flatbuffers::Offset<ipc::RequestOutput>> outs;
  std::vector<flatbuffers::Offset<ipc::RequestEvent>> evs;
  std::vector<flatbuffers::Offset<ipc::TokenLogprobs>> logprobs, prompt_logprobs;
  for (const OutputItem& it : items) {
    evs.clear();
    for (const RequestEvent& ev : it.events)
      evs.push_back(ipc::CreateRequestEvent(b, static_cast<ipc::EventType>(ev.type), ev.timestamp));
    const auto prefill = it.has_prefill_stats ? ipc::CreatePrefillStats(b, it.num_prompt_tokens,
                                                                        it.num_cached_tokens)
                                              : 0;
    logprobs.clear();
    for (const kernels::TokenLogprobs& l : it.logprobs)
      if (l.token >= 0) logprobs.push_back(LogprobsToWire(b, l));
    prompt_logprobs.clear();
    for (const kernels::TokenLogprobs& l : it.prompt_logprobs)
      prompt_logprobs.push_back(LogprobsToWire(b, l));
    outs.push_back(ipc::CreateRequestOutputDirect(
        b, it.request_id.c_str(), &it.new_tokens, ToWire(it.finish_reason), it.stop_token, &evs,
        prefill, logprobs.empty() ? nullptr : &logprobs,
        prompt_logprobs.empty() ? nullptr : &prompt_logprobs, it.num_draft_tokens,
        it.num_accepted_draft_tokens, it.scheduler_seconds, it.forward_seconds,
        it.execute_seconds));
  }
  return ipc::Seal(b, ipc::Body::EngineOutputs,
                   ipc::CreateEngineOutputsDirect(b, engine_index, timestamp, &outs).Union());
}

namespace {
std::vector<flatbuffers::Offset<ipc::LoraAdapterInfo>> LoraInfos(flatbuffers::FlatBufferBuilder& b,
                                                                 const LoraAdapterList& list) {
  std::vector<flatbuffers::Offset<ipc::LoraAdapterInfo>> out;
  for (const auto& [name, path] : list)
    out.push_back(ipc::CreateLoraAdapterInfoDirect(b, name.c_str(), path.c_str()));
  return out;
}
}  // namespace

std::span<const std::uint8_t> SealReady(flatbuffers::FlatBufferBuilder& b,
                                        std::uint32_t engine_index,
                                        const std::string& served_model_name,
                                        std::uint64_t kv_cache_size_tokens, const EngineCore& core,
                                        const LoraAdapterList& lora_list) {
  b.Clear();
  const ModelConfig& m = core.model();
  const EngineCoreConfig& c = core.config();
  auto loras = LoraInfos(b, lora_list);
  return ipc::Seal(
      b, ipc::Body::EngineReady,
      ipc::CreateEngineReadyDirect(
          b, engine_index, served_model_name.c_str(),
          static_cast<std::uint32_t>(c.scheduler.max_model_len),
          static_cast<std::uint32_t>(c.block_size), static_cast<std::uint64_t>(c.num_blocks),
          kv_cache_size_tokens, static_cast<std::uint32_t>(m.vocab_size), &m.eos_token_ids,
          core.supports_logprobs(), static_cast<std::uint32_t>(c.max_logprobs),
          static_cast<std::uint32_t>(c.speculative.enabled() ? c.speculative.num_speculative_tokens
                                                             : 0),
          loras.empty() ? nullptr : &loras)
          .Union());
}

std::span<const std::uint8_t> SealLoraAdapters(flatbuffers::FlatBufferBuilder& b,
                                               std::uint32_t engine_index,
                                               const LoraAdapterList& lora_list) {
  b.Clear();
  auto loras = LoraInfos(b, lora_list);
  return ipc::Seal(b, ipc::Body::LoraAdapters,
                   ipc::CreateLoraAdaptersDirect(b, engine_index, &loras).Union());
}

std::span<const std::uint8_t> SealUtilityResult(flatbuffers::FlatBufferBuilder& b,
                                                std::uint32_t engine_index, double timestamp,
                                                std::uint64_t call_id, bool ok,
                                                const std::string& message, bool not_found) {
  b.Clear();
  const auto result = ipc::CreateUtilityResultDirect(b, call_id, ok, message.c_str(), not_found);
  return ipc::Seal(b, ipc::Body::EngineOutputs,
                   ipc::CreateEngineOutputs(b, engine_index, timestamp, 0, result).Union());
}

std::span<const std::uint8_t> SealDead(flatbuffers::FlatBufferBuilder& b,
                                       std::uint32_t engine_index, const std::string& reason) {
  b.Clear();
  return ipc::Seal(b, ipc::Body::EngineDead,
                   ipc::CreateEngineDeadDirect(b, engine_index, reason.c_str()).Union());
}

std::span<const std::uint8_t> SealHeartbeat(flatbuffers::FlatBufferBuilder& b, ipc::ClientId to) {
  b.Clear();
  return ipc::Seal(b, ipc::Body::Heartbeat,
                   ipc::CreateHeartbeat(b, to.index, false, to.incarnation).Union());
}

std::span<const std::uint8_t> SealCacheUpdate(flatbuffers::FlatBufferBuilder& b,
                                              std::uint32_t engine_index,
                                              const CacheUpdate& update) {
  b.Clear();
  return ipc::Seal(
      b, ipc::Body::CacheUpdate,
      ipc::CreateCacheUpdateDirect(b, engine_index, update.cleared, &update.stored, &update.removed)
          .Union());
}

std::span<const std::uint8_t> SealLoad(flatbuffers::FlatBufferBuilder& b,
                                       std::uint32_t engine_index, double timestamp,
                                       std::uint32_t num_waiting, std::uint32_t num_running) {
  b.Clear();
  return ipc::Seal(
      b, ipc::Body::EngineLoad,
      ipc::CreateEngineLoad(b, engine_index, timestamp, num_waiting, num_running).Union());
}

std::string ConfigJson(const EngineCore& core, const std::string& served_model_name) {
  const EngineCoreConfig& c = core.config();
  const ModelConfig& m = core.model();
  return nlohmann::json{{"model", served_model_name},
                        {"max_model_len", c.scheduler.max_model_len},
                        {"block_size", c.block_size},
                        {"num_gpu_blocks", c.num_blocks},
                        {"max_num_seqs", c.scheduler.max_num_seqs},
                        {"max_num_batched_tokens", c.scheduler.max_num_batched_tokens},
                        {"enable_prefix_caching", c.enable_prefix_caching},
                        {"vocab_size", m.vocab_size},
                        {"eos_token_ids", m.eos_token_ids},
                        {"max_logprobs", c.max_logprobs},
                        {"num_speculative_tokens",
                         c.speculative.enabled() ? c.speculative.num_speculative_tokens : 0}}
      .dump();
}

}  // namespace sightline::engine
