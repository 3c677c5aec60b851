#include "kv/kv_residency.h"

namespace sightline::engine {

namespace {
constexpr double kNanos = 1e9;
constexpr std::size_t kHistory = 4;
}  // namespace

KvResidencyCollector::KvResidencyCollector(double sample_rate, std::uint64_t seed, Clock now)
    : rate_(sample_rate), rng_(seed), now_(std::move(now)) {}

void KvResidencyCollector::OnAllocated(const KVCacheBlock& b) {
  if (uniform_(rng_) >= rate_) return;
  const std::int64_t t = now_();
  tracked_[b.id] = Tracked{t, {t}};
}

void KvResidencyCollector::OnAccessed(const KVCacheBlock& b) {
  auto it = tracked_.find(b.id);
  if (it == tracked_.end()) return;
  auto& acc = it->second.accesses;
  acc.push_back(now_());
  if (acc.size() > kHistory) acc.pop_front();
}

void KvResidencyCollector::OnEvicted(const KVCacheBlock& b) {
  auto it = tracked_.find(b.id);
  if (it == tracked_.end()) return;
  const std::int64_t t = now_();
  const Tracked& tr = it->second;
  Eviction e{(t - tr.birth) / kNanos, (t - tr.accesses.back()) / kNanos, {}};
  for (std::size_t i = 1; i < tr.accesses.size(); ++i)
    e.reuse_gaps_s.push_back((tr.accesses[i] - tr.accesses[i - 1]) / kNanos);
  events_.push_back(std::move(e));
  tracked_.erase(it);
}

std::vector<KvResidencyCollector::Eviction> KvResidencyCollector::Drain() {
  std::vector<Eviction> out;
  out.swap(events_);
  return out;
}

}  // namespace sightline::engine
