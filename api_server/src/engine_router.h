// EngineRouter: an API server's engines under data parallelism (DESIGN.md
// §2), one EngineClient per engine, its index the engine's data-parallel
// rank, and the choice of the engine that serves each request.
//
// The choice is vLLM's internal balancer: the engine with the lowest
// waiting * 4 + running, from each engine's latest EngineLoad (about every
// 100 ms). The scan starts at (engines * client_index) / client_count, so
// that API servers that see equal scores spread their ties, and the chosen
// engine's waiting count is raised by client_count locally until its next
// EngineLoad arrives (vLLM's guess that every API server sends one too), so
// a burst between two loads does not all go to one engine. A request may
// name its engine instead (the X-data-parallel-rank header).
//
// Then prefix affinity, which vLLM's balancer lacks (SGLang's router has a
// form of it): a request whose prompt's leading full blocks are cached on an
// engine (the engines say what they cache: CacheUpdate) goes to the one
// holding the most of them, unless its score exceeds the lowest by more than
// kPrefixAffinityBound, so a hot prefix cannot pile its traffic onto one
// engine while another idles.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine_client.h"
#include "sightline/status.h"

namespace sightline::api {

// How far above the lowest score an engine holding a request's prefix may
// be and still get it: four waiting requests' worth (or sixteen running).
// Recomputing a prefix costs one prefill; waiting behind four requests costs
// at least four, so past this the load wins.
inline constexpr std::uint64_t kPrefixAffinityBound = 16;

// vLLM's score of an engine: waiting requests weigh four running ones.
inline std::uint64_t LoadScore(std::uint64_t waiting, std::uint64_t running) {
  return waiting * 4 + running;
}

// The index of the lowest score, scanning from `start` (the first of equal
// scores wins); an engine without a score (not alive) is skipped.
// scores.size() when none has one.
std::size_t LeastLoaded(std::span<const std::optional<std::uint64_t>> scores, std::size_t start);

// Parses an X-data-parallel-rank header value: a plain decimal rank, one of
// `ranks`; `place` is its place there. False, with the client's error
// message, otherwise.
bool ParseDataParallelRank(std::string_view value, std::span<const std::uint32_t> ranks,
                           std::uint32_t* place, std::string* error);

class EngineRouter {
 public:
  struct Options {
    std::vector<EngineClient::Options> engines;  // engine i at index i
    std::uint32_t client_index = 0, client_count = 1;
    bool prefix_affinity = true;
  };
  explicit EngineRouter(Options options);
  ~EngineRouter();
  EngineRouter(const EngineRouter&) = delete;
  EngineRouter& operator=(const EngineRouter&) = delete;

  // Connects to every engine and waits for each one's EngineReady. They must
  // serve the same model the same way (name, context, vocabulary, EOS,
  // logprobs, speculation, block size, LoRA adapters); several must each
  // report the rank of their place (one may have any: an API server of one
  // rank, as under an external balancer). `info` is the first one's.
  Status Start(EngineInfo* info);
  // Stops every client (no output handler runs after it returns).
  void Stop();

  std::size_t size() const { return engines_.size(); }
  EngineClient* engine(std::size_t place) { return engines_[place].get(); }
  // Each engine's rank (its engine_index), by place; known after Start.
  std::span<const std::uint32_t> ranks() const { return ranks_; }
  // Whether any engine is alive / healthy (EngineClient's meanings).
  bool alive() const;
  bool healthy() const;
  // The ranks of the engines not healthy now.
  std::vector<std::uint32_t> unhealthy() const;

  // The engine for a new request: the one at `place` when given (the caller
  // checked it is below size()), else among the healthy ones (those alive
  // when none is healthy) the one holding the longest cached prefix of
  // `prompt_blocks` (its block hashes' first 64 bits, in order) within the
  // affinity bound, else the least loaded. Null when no engine is alive (or
  // the named one is gone).
  // A request for LoRA adapter `lora` goes only to an engine that serves it
  // (a restarted engine has only its --lora-modules).
  EngineClient* Pick(std::optional<std::uint32_t> place,
                     std::span<const std::uint64_t> prompt_blocks = {},
                     const std::string& lora = "");
  bool prefix_affinity() const { return prefix_affinity_ && engines_.size() > 1; }

  // The LoRA adapters served: every one some engine serves (each engine
  // gets every load and unload, see lora_routes.h, but a restarted one has
  // only its --lora-modules), in the engines' order.
  std::shared_ptr<const LoraAdapterList> lora_adapters() const;

 private:
  struct Local {  // one engine's counts as this API server sees them
    std::uint64_t waiting = 0, running = 0, version = 0;
  };
  const std::uint32_t client_index_, client_count_;
  const bool prefix_affinity_;
  std::vector<std::unique_ptr<EngineClient>> engines_;
  std::vector<std::uint32_t> ranks_;
  std::mutex mu_;
  std::vector<Local> local_;  // guarded by mu_
};

}  // namespace sightline::api
