#include "kv_cache_manager.h"

#include <algorithm>

namespace sightline::engine {

KVCacheManager::KVCacheManager(int num_blocks, int block_size, bool enable_caching)
    : pool_(num_blocks, enable_caching), block_size_(block_size) {}

KVCacheManager::Hit KVCacheManager::GetComputedBlocks(std::span<const BlockHash> block_hashes,
                                                      int num_tokens) const {
  Hit hit;
  if (!pool_.caching() || num_tokens <= 0) return hit;
  const std::size_t max_blocks = static_cast<std::size_t>((num_tokens - 1) / block_size_);
  for (std::size_t i = 0; i < std::min(max_blocks, block_hashes.size()); ++i) {
    KVCacheBlock* b = pool_.GetCachedBlock(block_hashes[i]);
    if (!b) break;
    hit.blocks.push_back(b);
  }
  hit.num_tokens = static_cast<int>(hit.blocks.size()) * block_size_;
  return hit;
}

void KVCacheManager::RecordAdmission(int num_tokens, const Hit& hit, bool preempted) {
  if (!pool_.caching()) return;  // no lookup happened
  if (preempted) {
    stats_.preempted_queries += static_cast<std::uint64_t>(num_tokens);
    stats_.preempted_hits += static_cast<std::uint64_t>(hit.num_tokens);
  } else {
    ++stats_.requests;
    stats_.queries += static_cast<std::uint64_t>(num_tokens);
    stats_.hits += static_cast<std::uint64_t>(hit.num_tokens);
  }
}

bool KVCacheManager::AllocateSlots(RequestKV* kv, std::span<const BlockHash> block_hashes,
                                   int num_computed_tokens, const Hit& hit, int num_new_tokens,
                                   int num_tokens_to_cache) {
  const int total = num_computed_tokens + hit.num_tokens + num_new_tokens;
  const int blocks_needed = (total + block_size_ - 1) / block_size_;
  const int held = static_cast<int>(kv->blocks.size() + hit.blocks.size());
  const int fresh = std::max(0, blocks_needed - held);
  // Hit blocks sitting in the free queue leave it too.
  int evictable_hits = 0;
  for (const KVCacheBlock* b : hit.blocks) evictable_hits += b->ref_cnt == 0;
  if (fresh + evictable_hits > pool_.num_free_blocks()) return false;

  pool_.Touch(hit.blocks);
  kv->blocks.insert(kv->blocks.end(), hit.blocks.begin(), hit.blocks.end());
  kv->num_cached_blocks += static_cast<int>(hit.blocks.size());
  const std::vector<KVCacheBlock*> added = pool_.GetNewBlocks(fresh);
  kv->blocks.insert(kv->blocks.end(), added.begin(), added.end());

  const int full = std::min({num_tokens_to_cache / block_size_, static_cast<int>(kv->blocks.size()),
                             static_cast<int>(block_hashes.size())});
  if (full > kv->num_cached_blocks) {
    const auto from = static_cast<std::size_t>(kv->num_cached_blocks);
    const auto count = static_cast<std::size_t>(full - kv->num_cached_blocks);
    pool_.CacheBlocks(std::span(kv->blocks).subspan(from, count),
                      block_hashes.subspan(from, count));
    kv->num_cached_blocks = full;
  }
  return true;
}

void KVCacheManager::Free(RequestKV* kv) {
  std::vector<KVCacheBlock*> reversed(kv->blocks.rbegin(), kv->blocks.rend());
  pool_.FreeBlocks(reversed);
  kv->blocks.clear();
  kv->num_cached_blocks = 0;
}

bool KVCacheManager::ResetPrefixCache() {
  if (!pool_.ResetPrefixCache()) return false;
  stats_.reset = true;
  return true;
}

PrefixCacheStats KVCacheManager::TakeStats() {
  PrefixCacheStats out = stats_;
  stats_ = PrefixCacheStats{};
  return out;
}

}  // namespace sightline::engine
