#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>

namespace sightline::engine {

KVCacheManager::KVCacheManager(int num_blocks, int block_size, bool enable_caching,
                               int sliding_window)
    : pool_(num_blocks, enable_caching), block_size_(block_size), sliding_window_(sliding_window) {}

void KVCacheManager::RemoveSkippedBlocks(RequestKV* kv, int num_computed_tokens) {
  if (sliding_window_ <= 0) return;
  // The next query sees (num_computed_tokens - W, ...]: tokens before
  // num_computed_tokens - W + 1 are never read again, nor are the blocks
  // holding only them. Walk back from the last such block to the first one
  // freed earlier (vLLM's remove_skipped_blocks).
  const int skipped_tokens = num_computed_tokens - sliding_window_ + 1;
  const int skipped_blocks =
      std::min(std::max(0, skipped_tokens / block_size_), static_cast<int>(kv->blocks.size()));
  std::vector<KVCacheBlock*> removed;
  for (int i = skipped_blocks - 1; i >= 0; --i) {
    KVCacheBlock*& b = kv->blocks[static_cast<std::size_t>(i)];
    if (b == pool_.null_block()) break;
    removed.push_back(b);
    b = pool_.null_block();
  }
  pool_.FreeBlocks(removed);
}

int KVCacheManager::HeldBlocks(const RequestKV& kv) {
  return static_cast<int>(
      std::count_if(kv.blocks.begin(), kv.blocks.end(), [](const KVCacheBlock* b) {
        return b->id != 0;  // block 0 is the null block
      }));
}

KVCacheManager::Hit KVCacheManager::GetComputedBlocks(std::span<const BlockHash> block_hashes,
                                                      int num_tokens) const {
  Hit hit;
  if (!pool_.caching() || num_tokens <= 0) return hit;
  const std::size_t max_blocks =
      std::min(static_cast<std::size_t>((num_tokens - 1) / block_size_), block_hashes.size());
  if (sliding_window_ <= 0) {
    for (std::size_t i = 0; i < max_blocks; ++i) {
      KVCacheBlock* b = pool_.GetCachedBlock(block_hashes[i]);
      if (!b) break;
      hit.blocks.push_back(b);
    }
  } else {
    // A window needs only the blocks the next query sees: the longest prefix
    // whose last ceil((W - 1) / block_size) blocks are cached (or that is
    // cached from its start) is a hit, what lies before them the null block
    // (vLLM's SlidingWindowManager.find_longest_cache_hit).
    const std::size_t needed =
        static_cast<std::size_t>((sliding_window_ - 1 + block_size_ - 1) / block_size_);
    std::size_t run = 0;
    for (std::size_t i = max_blocks; i-- > 0;) {
      if (!pool_.GetCachedBlock(block_hashes[i])) {
        run = 0;
        continue;
      }
      if (++run < needed && i > 0) continue;
      const std::size_t end = i + run;  // blocks [i, end) are cached
      hit.blocks.assign(i, pool_.null_block());
      for (std::size_t j = i; j < end; ++j)
        hit.blocks.push_back(pool_.GetCachedBlock(block_hashes[j]));
      break;
    }
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
                                   int num_tokens_to_cache, const BlockOrigin& origin) {
  RemoveSkippedBlocks(kv, num_computed_tokens);
  const int total = num_computed_tokens + hit.num_tokens + num_new_tokens;
  const int blocks_needed = (total + block_size_ - 1) / block_size_;
  const int held = static_cast<int>(kv->blocks.size() + hit.blocks.size());
  const int fresh = std::max(0, blocks_needed - held);
  // Hit blocks sitting in the free queue leave it too.
  std::vector<KVCacheBlock*> live_hits;  // the null block is no one's
  for (KVCacheBlock* b : hit.blocks)
    if (b != pool_.null_block()) live_hits.push_back(b);
  int evictable_hits = 0;
  for (const KVCacheBlock* b : live_hits) evictable_hits += b->ref_cnt == 0;
  if (fresh + evictable_hits > pool_.num_free_blocks()) return false;

  pool_.Touch(live_hits);
  kv->blocks.insert(kv->blocks.end(), hit.blocks.begin(), hit.blocks.end());
  kv->num_cached_blocks += static_cast<int>(hit.blocks.size());
  const std::vector<KVCacheBlock*> added = pool_.GetNewBlocks(fresh);
  kv->blocks.insert(kv->blocks.end(), added.begin(), added.end());

  const int full = std::min({num_tokens_to_cache / block_size_, static_cast<int>(kv->blocks.size()),
                             static_cast<int>(block_hashes.size())});
  if (full > kv->num_cached_blocks) {
    // A block a sliding window freed before it could be registered (its
    // hash came later) is gone: only the live ones are cached.
    if (pool_.records_events() && pool_.caching())
      RecordStored(*kv, block_hashes, kv->num_cached_blocks, full, origin);
    std::vector<KVCacheBlock*> blocks;
    std::vector<BlockHash> hashes;
    for (int i = kv->num_cached_blocks; i < full; ++i) {
      KVCacheBlock* b = kv->blocks[static_cast<std::size_t>(i)];
      if (b == pool_.null_block()) continue;
      blocks.push_back(b);
      hashes.push_back(block_hashes[static_cast<std::size_t>(i)]);
    }
    pool_.CacheBlocks(blocks, hashes);
    kv->num_cached_blocks = full;
  }
  return true;
}

void KVCacheManager::RecordStored(const RequestKV& kv, std::span<const BlockHash> block_hashes,
                                  int first, int end, const BlockOrigin& origin) {
  const auto bs = static_cast<std::size_t>(block_size_);
  KvEvent* run = nullptr;  // the event of the run of blocks being registered
  for (int i = first; i < end; ++i) {
    const KVCacheBlock* b = kv.blocks[static_cast<std::size_t>(i)];
    // Not registered now (CacheBlocks' rules): a block a window freed, or
    // one already cached. Either ends a run; the next starts a new event.
    if (b == pool_.null_block() || b->hash) {
      run = nullptr;
      continue;
    }
    if (!run) {
      run = &events_.emplace_back();
      run->kind = KvEvent::Kind::kBlockStored;
      if (i > 0) run->parent_block_hash = block_hashes[static_cast<std::size_t>(i - 1)].lo;
      run->block_size = block_size_;
      run->sliding_window = sliding_window_;
      if (!origin.lora_name.empty()) run->lora_name = std::string(origin.lora_name);
    }
    run->block_hashes.push_back(block_hashes[static_cast<std::size_t>(i)].lo);
    const auto at = static_cast<std::size_t>(i) * bs;
    if (at + bs <= origin.tokens.size())
      run->token_ids.insert(run->token_ids.end(),
                            origin.tokens.begin() + static_cast<std::ptrdiff_t>(at),
                            origin.tokens.begin() + static_cast<std::ptrdiff_t>(at + bs));
    // vLLM's extra keys: the adapter on every block, the salt on the first.
    std::vector<std::string> extra;
    if (!origin.lora_name.empty()) extra.emplace_back(origin.lora_name);
    if (i == 0 && !origin.cache_salt.empty()) extra.emplace_back(origin.cache_salt);
    run->extra_keys.push_back(std::move(extra));
  }
}

void KVCacheManager::EnableEvents() {
  pool_.set_events(&events_);
}

std::vector<KvEvent> KVCacheManager::TakeEvents() {
  std::vector<KvEvent> out;
  out.swap(events_);
  return out;
}

std::vector<std::uint64_t> KVCacheManager::CachedBlockHashes() const {
  std::vector<std::uint64_t> out;
  for (int id = 1; id < pool_.num_blocks(); ++id)
    if (const auto& h = pool_.block(id).hash) out.push_back(h->lo);
  return out;
}

void KVCacheManager::Free(RequestKV* kv) {
  std::vector<KVCacheBlock*> reversed;
  for (auto it = kv->blocks.rbegin(); it != kv->blocks.rend(); ++it)
    if (*it != pool_.null_block()) reversed.push_back(*it);
  pool_.FreeBlocks(reversed);
  kv->blocks.clear();
  kv->num_cached_blocks = 0;
}

void KVCacheManager::TrimSlots(RequestKV* kv, int num_tokens) {
  const auto keep = static_cast<std::size_t>((num_tokens + block_size_ - 1) / block_size_);
  if (kv->blocks.size() <= keep) return;
  assert(static_cast<std::size_t>(kv->num_cached_blocks) <= keep);
  std::vector<KVCacheBlock*> reversed;
  for (std::size_t i = kv->blocks.size(); i-- > keep;)
    if (kv->blocks[i] != pool_.null_block()) reversed.push_back(kv->blocks[i]);
  pool_.FreeBlocks(reversed);
  kv->blocks.resize(keep);
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
