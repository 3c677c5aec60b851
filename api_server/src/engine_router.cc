#include "engine_router.h"

#include <algorithm>
#include <limits>

namespace sightline::api {

std::size_t LeastLoaded(std::span<const std::optional<std::uint64_t>> scores, std::size_t start) {
  const std::size_t n = scores.size();
  std::size_t best = n;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (start + k) % n;
    if (scores[i] && (best == n || *scores[i] < *scores[best])) best = i;
  }
  return best;
}

bool ParseDataParallelRank(std::string_view value, std::span<const std::uint32_t> ranks,
                           std::uint32_t* place, std::string* error) {
  std::uint64_t v = 0;
  bool digits = !value.empty() && value.size() <= 9;  // no overflow below 10^9
  for (char c : value) digits = digits && c >= '0' && c <= '9';
  if (digits)
    for (char c : value) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  const auto it = std::find(ranks.begin(), ranks.end(), v);
  if (!digits || it == ranks.end()) {
    std::string served;
    for (std::uint32_t r : ranks) served += (served.empty() ? "" : ", ") + std::to_string(r);
    *error = "X-data-parallel-rank: '" + std::string(value) +
             "' is not a data-parallel rank of this server (it serves " + served + ")";
    return false;
  }
  *place = static_cast<std::uint32_t>(it - ranks.begin());
  return true;
}

EngineRouter::EngineRouter(Options options)
    : client_index_(options.client_index),
      client_count_(std::max(1u, options.client_count)),
      prefix_affinity_(options.prefix_affinity) {
  for (EngineClient::Options& o : options.engines)
    engines_.push_back(std::make_unique<EngineClient>(std::move(o)));
  local_.resize(engines_.size());
}

EngineRouter::~EngineRouter() {
  Stop();
}

namespace {

// What every engine must agree on: the API server validates and renders
// requests once, for whichever engine serves them.
Status SameServing(const EngineInfo& a, const EngineInfo& b) {
  auto differ = [&](const std::string& what) {
    return Status::InvalidArgument("engine " + std::to_string(b.engine_index) +
                                   " differs from engine " + std::to_string(a.engine_index) +
                                   " in " + what +
                                   "; data-parallel engines must serve the same model alike");
  };
  if (a.model_name != b.model_name) return differ("its model name");
  if (a.max_model_len != b.max_model_len) return differ("max_model_len");
  if (a.vocab_size != b.vocab_size) return differ("vocab_size");
  if (a.eos_token_ids != b.eos_token_ids) return differ("its EOS tokens");
  if (a.logprobs_supported != b.logprobs_supported || a.max_logprobs != b.max_logprobs)
    return differ("logprobs");
  if (a.num_speculative_tokens != b.num_speculative_tokens) return differ("speculative decoding");
  if (a.block_size != b.block_size) return differ("block_size");
  if (a.lora_adapters != b.lora_adapters) return differ("its LoRA adapters");
  return Status::Ok();
}

}  // namespace

Status EngineRouter::Start(EngineInfo* info) {
  if (engines_.empty()) return Status::InvalidArgument("no engine to connect to");
  ranks_.clear();
  for (std::size_t place = 0; place < engines_.size(); ++place) {
    EngineInfo e;
    if (Status s = engines_[place]->Start(&e); !s.ok()) return s;
    if (engines_.size() > 1 && e.engine_index != place)
      return Status::InvalidArgument(
          "the engine at place " + std::to_string(place) + " of the engine list (--engine-input " +
          std::to_string(place + 1) + ") says it is engine " + std::to_string(e.engine_index));
    ranks_.push_back(e.engine_index);
    if (place == 0)
      *info = e;
    else if (Status s = SameServing(*info, e); !s.ok())
      return s;
  }
  return Status::Ok();
}

void EngineRouter::Stop() {
  for (auto& e : engines_) e->Stop();
}

bool EngineRouter::alive() const {
  return std::any_of(engines_.begin(), engines_.end(), [](const auto& e) { return e->alive(); });
}

bool EngineRouter::healthy() const {
  return std::any_of(engines_.begin(), engines_.end(), [](const auto& e) { return e->healthy(); });
}

std::vector<std::uint32_t> EngineRouter::unhealthy() const {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < engines_.size(); ++i)
    if (!engines_[i]->healthy()) out.push_back(i < ranks_.size() ? ranks_[i] : i);
  return out;
}

namespace {

bool Serves(const EngineClient& engine, const std::string& lora) {
  if (lora.empty()) return true;
  const auto list = engine.lora_adapters();
  return list && std::any_of(list->begin(), list->end(),
                             [&](const auto& adapter) { return adapter.first == lora; });
}

}  // namespace

EngineClient* EngineRouter::Pick(std::optional<std::uint32_t> place,
                                 std::span<const std::uint64_t> prompt_blocks,
                                 const std::string& lora) {
  const std::size_t n = engines_.size();
  auto usable = [&](std::size_t i) { return engines_[i]->alive() && Serves(*engines_[i], lora); };
  if (place) return *place < n && usable(*place) ? engines_[*place].get() : nullptr;
  if (n == 1) return usable(0) ? engines_[0].get() : nullptr;
  std::vector<std::optional<std::uint64_t>> scores(n);
  // Healthy engines first: a frozen one (alive, not heard from) would hold
  // a request until it resumes. Only when none is healthy, any alive one.
  std::vector<char> healthy(n), alive(n);
  std::vector<std::size_t> cached(n);  // each engine's cached prefix, in blocks
  bool any_healthy = false;
  for (std::size_t i = 0; i < n; ++i) {
    const bool serves = Serves(*engines_[i], lora);
    healthy[i] = serves && engines_[i]->healthy();
    alive[i] = serves && engines_[i]->alive();
    any_healthy |= healthy[i] != 0;
    if (prefix_affinity_ && !prompt_blocks.empty())
      cached[i] = engines_[i]->CachedPrefix(prompt_blocks);
  }
  std::lock_guard<std::mutex> g(mu_);
  for (std::size_t i = 0; i < n; ++i) {
    // A fresh EngineLoad replaces what this server guessed since the last.
    if (const EngineLoad l = engines_[i]->load(); l.version != local_[i].version)
      local_[i] = {l.num_waiting, l.num_running, l.version};
    if (any_healthy ? healthy[i] : alive[i])
      scores[i] = LoadScore(local_[i].waiting, local_[i].running);
  }
  std::size_t best = LeastLoaded(scores, n * client_index_ / client_count_);
  if (best == n) return nullptr;
  if (prefix_affinity_ && !prompt_blocks.empty()) {
    std::size_t most = 0, holder = n;  // the longest cached prefix; ties: the lower score
    for (std::size_t i = 0; i < n; ++i) {
      if (!scores[i]) continue;
      const std::size_t m = cached[i];
      if (m > most || (m == most && m > 0 && *scores[i] < *scores[holder])) {
        most = m;
        holder = i;
      }
    }
    if (holder != n && *scores[holder] <= *scores[best] + kPrefixAffinityBound) best = holder;
  }
  local_[best].waiting += client_count_;
  return engines_[best].get();
}

std::shared_ptr<const LoraAdapterList> EngineRouter::lora_adapters() const {
  if (engines_.size() == 1) return engines_[0]->lora_adapters();
  auto all = std::make_shared<LoraAdapterList>();
  for (const auto& e : engines_)
    if (const auto list = e->lora_adapters())
      for (const auto& adapter : *list)
        if (std::none_of(all->begin(), all->end(),
                         [&](const auto& a) { return a.first == adapter.first; }))
          all->push_back(adapter);
  return all;
}

}  // namespace sightline::api
