// KV-cache residency sampling (--kv-cache-metrics): for a random sample of
// allocated blocks, how long they lived, how long they sat idle before
// eviction, and the gaps between their last accesses. Feeds the
// vllm:kv_block_* histograms (METRICS.md §4).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "sightline/clock.h"

namespace sightline::engine {

class KvResidencyCollector : public BlockPool::Observer {
 public:
  struct Eviction {
    double lifetime_s;                 // allocation -> eviction
    double idle_s;                     // last access -> eviction
    std::vector<double> reuse_gaps_s;  // between the last <= 4 accesses (<= 3 gaps)
  };
  using Clock = std::function<std::int64_t()>;  // nanoseconds, monotonic

  // `sample_rate` must be in (0, 1]; see ValidSampleRate.
  KvResidencyCollector(double sample_rate, std::uint64_t seed,
                       Clock now = sightline::MonotonicNanos);
  static bool ValidSampleRate(double rate) { return rate > 0 && rate <= 1; }

  void OnAllocated(const KVCacheBlock& b) override;
  void OnAccessed(const KVCacheBlock& b) override;
  void OnEvicted(const KVCacheBlock& b) override;
  void OnReset() override { tracked_.clear(); }

  // Evictions since the last call.
  std::vector<Eviction> Drain();

 private:
  struct Tracked {
    std::int64_t birth;
    std::deque<std::int64_t> accesses;  // the last <= 4, allocation included
  };
  double rate_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  Clock now_;
  std::unordered_map<std::int32_t, Tracked> tracked_;  // by block id
  std::vector<Eviction> events_;
};

}  // namespace sightline::engine
