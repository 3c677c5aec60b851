#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace sightline::engine {

KVCacheManager::KVCacheManager(int num_blocks, int block_size, bool enable_caching,
                               int sliding_window)
    : KVCacheManager(num_blocks, block_size, enable_caching, std::vector<int>{sliding_window}) {}

KVCacheManager::KVCacheManager(int num_blocks, int block_size, bool enable_caching,
                               std::vector<int> group_windows)
    : pool_(num_blocks, enable_caching),
      block_size_(block_size),
      windows_(std::move(group_windows)) {
  assert(!windows_.empty());
}

BlockHash KVCacheManager::GroupHash(const BlockHash& h, std::size_t g) {
  if (g == 0) return h;
  // Another key per group for the same tokens (the hashes are XXH3-128
  // outputs: a fixed XOR per group keeps them as unlikely to collide).
  const auto k = static_cast<std::uint64_t>(g);
  return {h.lo ^ (k * 0x9E3779B97F4A7C15ull), h.hi ^ (k * 0xC2B2AE3D27D4EB4Full)};
}

void KVCacheManager::RemoveSkippedBlocks(KvBlocks* kv, int window, int num_computed_tokens) {
  if (window <= 0) return;
  // The next query sees (num_computed_tokens - W, ...]: tokens before
  // num_computed_tokens - W + 1 are never read again, nor are the blocks
  // holding only them. Walk back from the last such block to the first one
  // freed earlier (vLLM's remove_skipped_blocks).
  const int skipped_tokens = num_computed_tokens - window + 1;
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
  auto held = [](const KvBlocks& g) {
    return static_cast<int>(
        std::count_if(g.blocks.begin(), g.blocks.end(), [](const KVCacheBlock* b) {
          return b->id != 0;  // block 0 is the null block
        }));
  };
  int n = held(kv);
  for (const KvBlocks& g : kv.other_groups) n += held(g);
  return n;
}

int KVCacheManager::LongestHit(std::size_t g, std::span<const BlockHash> block_hashes,
                               std::size_t max_blocks) const {
  const int window = windows_[g];
  if (window <= 0) {
    std::size_t n = 0;
    while (n < max_blocks && pool_.GetCachedBlock(GroupHash(block_hashes[n], g))) ++n;
    return static_cast<int>(n);
  }
  // A window needs only the blocks the next query sees: the longest prefix
  // whose last ceil((W - 1) / block_size) blocks are cached (or that is
  // cached from its start) is a hit, what lies before them the null block
  // (vLLM's SlidingWindowManager.find_longest_cache_hit).
  const std::size_t needed = static_cast<std::size_t>((window - 1 + block_size_ - 1) / block_size_);
  std::size_t run = 0;
  for (std::size_t i = max_blocks; i-- > 0;) {
    if (!pool_.GetCachedBlock(GroupHash(block_hashes[i], g))) {
      run = 0;
      continue;
    }
    if (++run < needed && i > 0) continue;
    return static_cast<int>(i + run);  // blocks [i, i + run) are cached
  }
  return 0;
}

void KVCacheManager::HitBlocks(std::size_t g, std::span<const BlockHash> block_hashes,
                               std::size_t n, std::vector<KVCacheBlock*>* out) const {
  out->clear();
  const int window = windows_[g];
  std::size_t first = 0;  // the blocks before the window's: the null block
  if (window > 0) {
    const std::size_t needed =
        static_cast<std::size_t>((window - 1 + block_size_ - 1) / block_size_);
    first = n > needed ? n - needed : 0;
  }
  out->assign(first, pool_.null_block());
  for (std::size_t j = first; j < n; ++j)
    out->push_back(pool_.GetCachedBlock(GroupHash(block_hashes[j], g)));
}

KVCacheManager::Hit KVCacheManager::GetComputedBlocks(std::span<const BlockHash> block_hashes,
                                                      int num_tokens) const {
  Hit hit;
  if (!pool_.caching() || num_tokens <= 0) return hit;
  std::size_t n =
      std::min(static_cast<std::size_t>((num_tokens - 1) / block_size_), block_hashes.size());
  // Each group's longest hit within the others', until all agree (a
  // sliding group's hit at a shorter length needs other blocks cached).
  for (bool changed = true; changed && n > 0;) {
    changed = false;
    for (std::size_t g = 0; g < windows_.size(); ++g) {
      const auto m = static_cast<std::size_t>(LongestHit(g, block_hashes, n));
      if (m < n) n = m, changed = windows_.size() > 1;
    }
  }
  HitBlocks(0, block_hashes, n, &hit.blocks);
  hit.other_groups.resize(windows_.size() - 1);
  for (std::size_t g = 1; g < windows_.size(); ++g)
    HitBlocks(g, block_hashes, n, &hit.other_groups[g - 1]);
  hit.num_tokens = static_cast<int>(n) * block_size_;
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
  const std::size_t groups = windows_.size();
  kv->other_groups.resize(groups - 1);
  auto hit_of = [&](std::size_t g) -> const std::vector<KVCacheBlock*>& {
    static const std::vector<KVCacheBlock*> kNone;
    if (g == 0) return hit.blocks;
    return g - 1 < hit.other_groups.size() ? hit.other_groups[g - 1] : kNone;
  };
  for (std::size_t g = 0; g < groups; ++g)
    RemoveSkippedBlocks(&kv->group(g), windows_[g], num_computed_tokens);
  const int total = num_computed_tokens + hit.num_tokens + num_new_tokens;
  const int blocks_needed = (total + block_size_ - 1) / block_size_;
  // Every group's fresh blocks and hits come from the one pool; hit blocks
  // sitting in the free queue leave it too.
  std::vector<int> fresh(groups);
  std::vector<std::vector<KVCacheBlock*>> live_hits(groups);  // the null block is no one's
  int wanted = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    const int held = static_cast<int>(kv->group(g).blocks.size() + hit_of(g).size());
    fresh[g] = std::max(0, blocks_needed - held);
    wanted += fresh[g];
    for (KVCacheBlock* b : hit_of(g))
      if (b != pool_.null_block()) {
        live_hits[g].push_back(b);
        wanted += b->ref_cnt == 0;
      }
  }
  if (wanted > pool_.num_free_blocks()) return false;

  // Every group's hits leave the free queue before any group takes fresh
  // blocks from it: a fresh block must never be another group's hit (vLLM
  // saves the computed blocks of all groups, then allocates).
  for (std::size_t g = 0; g < groups; ++g) {
    KvBlocks& mine = kv->group(g);
    const std::vector<KVCacheBlock*>& hits = hit_of(g);
    pool_.Touch(live_hits[g]);
    mine.blocks.insert(mine.blocks.end(), hits.begin(), hits.end());
    mine.num_cached_blocks += static_cast<int>(hits.size());
  }
  for (std::size_t g = 0; g < groups; ++g) {
    KvBlocks& mine = kv->group(g);
    const std::vector<KVCacheBlock*> added = pool_.GetNewBlocks(fresh[g]);
    mine.blocks.insert(mine.blocks.end(), added.begin(), added.end());

    const int full =
        std::min({num_tokens_to_cache / block_size_, static_cast<int>(mine.blocks.size()),
                  static_cast<int>(block_hashes.size())});
    if (full <= mine.num_cached_blocks) continue;
    // A block a sliding window freed before it could be registered (its
    // hash came later) is gone: only the live ones are cached. Events
    // describe group 0's blocks.
    if (g == 0 && pool_.records_events() && pool_.caching())
      RecordStored(*kv, block_hashes, mine.num_cached_blocks, full, origin);
    std::vector<KVCacheBlock*> blocks;
    std::vector<BlockHash> hashes;
    for (int i = mine.num_cached_blocks; i < full; ++i) {
      KVCacheBlock* b = mine.blocks[static_cast<std::size_t>(i)];
      if (b == pool_.null_block()) continue;
      blocks.push_back(b);
      hashes.push_back(GroupHash(block_hashes[static_cast<std::size_t>(i)], g));
    }
    pool_.CacheBlocks(blocks, hashes, /*published=*/g == 0);
    mine.num_cached_blocks = full;
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
      run->sliding_window = windows_[0];
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
    if (const auto& h = pool_.block(id).hash; h && pool_.block(id).published) out.push_back(h->lo);
  return out;
}

void KVCacheManager::Free(RequestKV* kv) {
  for (std::size_t g = 0; g <= kv->other_groups.size(); ++g) {
    KvBlocks& mine = kv->group(g);
    std::vector<KVCacheBlock*> reversed;
    for (auto it = mine.blocks.rbegin(); it != mine.blocks.rend(); ++it)
      if (*it != pool_.null_block()) reversed.push_back(*it);
    pool_.FreeBlocks(reversed);
    mine.blocks.clear();
    mine.num_cached_blocks = 0;
  }
}

void KVCacheManager::TrimSlots(RequestKV* kv, int num_tokens) {
  const auto keep = static_cast<std::size_t>((num_tokens + block_size_ - 1) / block_size_);
  for (std::size_t g = 0; g <= kv->other_groups.size(); ++g) {
    KvBlocks& mine = kv->group(g);
    if (mine.blocks.size() <= keep) continue;
    assert(static_cast<std::size_t>(mine.num_cached_blocks) <= keep);
    std::vector<KVCacheBlock*> reversed;
    for (std::size_t i = mine.blocks.size(); i-- > keep;)
      if (mine.blocks[i] != pool_.null_block()) reversed.push_back(mine.blocks[i]);
    pool_.FreeBlocks(reversed);
    mine.blocks.resize(keep);
  }
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
