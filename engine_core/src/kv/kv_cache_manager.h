// KVCacheManager: prefix-cache lookup, slot allocation and freeing for
// requests, over a BlockPool (vLLM V1's kv_cache_manager.py semantics). Each
// KV-cache group (kv_layout.h: one for most models, several for a model
// mixing sliding and full layers) has its own block table per request, drawn
// from the one pool: full attention, or a sliding window whose blocks are
// freed once no later query can see them, as vLLM's SlidingWindowManager
// does; a prefix hit is the longest one every group has (vLLM's hybrid
// coordinator).
//
// A request's KV state (RequestKV) is owned by the request itself, so the
// per-step path does no map lookups.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace sightline::engine {

// One group's block table of a request.
struct KvBlocks {
  // In token order; with a sliding window, blocks that left it are the
  // pool's null block (their slots are never read again).
  std::vector<KVCacheBlock*> blocks;
  int num_cached_blocks = 0;  // leading blocks registered in the prefix cache
};

// A request's KV: group 0's table, and the other groups' (none but for a
// model with several groups).
struct RequestKV : KvBlocks {
  std::vector<KvBlocks> other_groups;

  KvBlocks& group(std::size_t g) { return g == 0 ? *this : other_groups[g - 1]; }
  const KvBlocks& group(std::size_t g) const { return g == 0 ? *this : other_groups[g - 1]; }
};

// Prefix-cache counters in tokens. Lookups by preempted requests being
// re-admitted are kept apart: they are not new queries (METRICS.md §4).
struct PrefixCacheStats {
  std::uint64_t requests = 0;  // lookups (not counting preempted requests)
  std::uint64_t queries = 0;
  std::uint64_t hits = 0;
  std::uint64_t preempted_queries = 0;
  std::uint64_t preempted_hits = 0;
  bool reset = false;  // the cache was reset since the last TakeStats()
};

class KVCacheManager {
 public:
  // sliding_window: tokens each query sees (itself and W - 1 before); 0: all.
  KVCacheManager(int num_blocks, int block_size, bool enable_caching, int sliding_window = 0);
  // One group per window (KvLayout::Windows()); group 0 is the one whose
  // blocks KV-cache events describe (a full-attention group where there is one).
  KVCacheManager(int num_blocks, int block_size, bool enable_caching,
                 std::vector<int> group_windows);

  int block_size() const { return block_size_; }
  int num_groups() const { return static_cast<int>(windows_.size()); }
  double Usage() const { return pool_.Usage(); }
  int num_free_blocks() const { return pool_.num_free_blocks(); }
  BlockPool& pool() { return pool_; }

  struct Hit {
    std::vector<KVCacheBlock*> blocks;                     // group 0's leading cached blocks
    std::vector<std::vector<KVCacheBlock*>> other_groups;  // the same run, groups 1..
    int num_tokens = 0;                                    // blocks.size() * block_size
  };
  // The longest run of cached blocks from the start of the request that
  // every group has, capped so that at least the last token is computed
  // (hit <= num_tokens - 1).
  // Not counted: a request that cannot be admitted is looked up again at
  // every step it waits, and only its admission counts (RecordAdmission).
  Hit GetComputedBlocks(std::span<const BlockHash> block_hashes, int num_tokens) const;
  // Counts an admitted request's lookup in the stats, as vLLM does once its
  // slots are allocated (so retries under KV pressure are not queries): the
  // request's tokens as queries and `hit` as hits, apart when `preempted`
  // (a re-admission is not a new query). Nothing is counted without caching.
  void RecordAdmission(int num_tokens, const Hit& hit, bool preempted);

  // Gives `kv` slots for `num_computed_tokens + hit.num_tokens + num_new_tokens`
  // tokens: attaches the hit blocks, then fresh ones. Returns false when the
  // pool is short, having changed nothing but (with a sliding window) freed
  // the blocks that left the window. Full blocks among the first
  // `num_tokens_to_cache` tokens are registered under `block_hashes`.
  // `origin` says what the blocks hold, for the BlockStored events.
  struct BlockOrigin {
    std::span<const std::int32_t> tokens;  // the request's, from its first
    std::string_view cache_salt;           // the client's (ClientCacheSalt)
    std::string_view lora_name;            // its adapter; empty: none
  };
  bool AllocateSlots(RequestKV* kv, std::span<const BlockHash> block_hashes,
                     int num_computed_tokens, const Hit& hit, int num_new_tokens,
                     int num_tokens_to_cache, const BlockOrigin& origin = {});

  // KV-cache events (--kv-events-config; kv_events/kv_events.h): from now on
  // what the prefix cache gains, loses and clears is recorded in order until
  // TakeEvents, as vLLM's block pool records it: a BlockStored for each
  // request's newly registered full blocks (one event per run of them, with
  // the hash of the block before as parent, their tokens, the adapter's name
  // and the client's cache_salt as extra keys), a BlockRemoved for each
  // cached block evicted for reuse (freeing a block keeps it cached: no
  // event), an AllBlocksCleared for each reset. Hashes are the first 64 bits
  // of the blocks' (CachedBlockHashes).
  void EnableEvents();
  std::vector<KvEvent> TakeEvents();
  // The hash (64 bits, as events carry it) of every block that holds one,
  // one entry per physical block: what a subscriber to the events rebuilds.
  std::vector<std::uint64_t> CachedBlockHashes() const;

  // Releases every block of `kv`, group by group, each tail first (so a
  // chain's prefix outlives its tail within a group; as in vLLM, group 0's
  // blocks queue for eviction before the other groups').
  void Free(RequestKV* kv);
  // Releases the blocks of `kv` past its first `num_tokens` slots (tail
  // first): speculative drafts that were rejected give back the blocks that
  // held only them. Such blocks are never registered in the prefix cache.
  void TrimSlots(RequestKV* kv, int num_tokens);
  // Blocks of `kv` holding real KV (not the null block), all groups: what it pins.
  static int HeldBlocks(const RequestKV& kv);

  bool ResetPrefixCache();
  PrefixCacheStats TakeStats();

 private:
  // With a sliding window: the blocks wholly before the window of the next
  // query (position num_computed_tokens) become the null block and are freed.
  void RemoveSkippedBlocks(KvBlocks* kv, int window, int num_computed_tokens);
  // Group g's longest hit of at most `max_blocks` blocks, in blocks; and its
  // blocks for a hit of n blocks (the null block before a window).
  int LongestHit(std::size_t g, std::span<const BlockHash> block_hashes,
                 std::size_t max_blocks) const;
  void HitBlocks(std::size_t g, std::span<const BlockHash> block_hashes, std::size_t n,
                 std::vector<KVCacheBlock*>* out) const;
  // The prefix-cache key of block hash h in group g (group 0: h itself).
  static BlockHash GroupHash(const BlockHash& h, std::size_t g);

  // The BlockStored events of newly registered blocks [first, end).
  void RecordStored(const RequestKV& kv, std::span<const BlockHash> block_hashes, int first,
                    int end, const BlockOrigin& origin);

  BlockPool pool_;
  int block_size_;
  std::vector<int> windows_;  // per group
  PrefixCacheStats stats_;
  std::vector<KvEvent> events_;  // recorded while pool_.records_events()
};

}  // namespace sightline::engine
