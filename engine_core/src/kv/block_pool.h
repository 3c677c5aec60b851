// BlockPool: the fixed pool of KV-cache blocks, its free queue, and the map
// from block hash to cached block (vLLM V1's block_pool.py semantics).
//
// Invariants
//  * Block 0 is the null block: never handed out, never free, not counted.
//  * The free queue holds exactly the blocks with ref_cnt == 0, fresh and
//    cached alike (cached ones are eviction candidates). Its head is reused
//    first: freed fresh blocks go to the head, freed cached blocks to the
//    tail, so cached content lives as long as possible (approximate LRU).
//  * A block is in the hash map iff it has a hash; taking a cached block off
//    the head for reuse evicts it (hash and map entry removed).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv_events/kv_events.h"

namespace sightline::engine {

struct KVCacheBlock {
  std::int32_t id = 0;
  std::int32_t ref_cnt = 0;
  std::optional<BlockHash> hash;  // set once the block is full and cached
  // Whether KV-cache events describe it (KVCacheManager's group 0 only).
  bool published = true;
  KVCacheBlock* prev_free = nullptr;
  KVCacheBlock* next_free = nullptr;
};

// Intrusive doubly-linked list with sentinels: O(1) push, pop and remove.
class FreeBlockQueue {
 public:
  FreeBlockQueue();
  FreeBlockQueue(const FreeBlockQueue&) = delete;
  FreeBlockQueue& operator=(const FreeBlockQueue&) = delete;

  void PushBack(KVCacheBlock* b);
  void PushFront(KVCacheBlock* b);
  KVCacheBlock* PopFront();  // the queue must not be empty
  void Remove(KVCacheBlock* b);
  bool Contains(const KVCacheBlock* b) const { return b->prev_free != nullptr; }
  int size() const { return size_; }
  std::vector<std::int32_t> Ids() const;  // head to tail, for tests and debugging

 private:
  KVCacheBlock head_, tail_;
  int size_ = 0;
};

class BlockPool {
 public:
  // Lets the residency collector see allocations, hits and evictions.
  struct Observer {
    virtual ~Observer() = default;
    virtual void OnAllocated(const KVCacheBlock& b) = 0;
    virtual void OnAccessed(const KVCacheBlock& b) = 0;
    virtual void OnEvicted(const KVCacheBlock& b) = 0;
    virtual void OnReset() = 0;
  };

  BlockPool(int num_blocks, bool enable_caching);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int num_free_blocks() const { return free_.size(); }
  // 1 - free / (blocks - 1): blocks pinned by requests; cached-but-free ones count as free.
  double Usage() const;
  bool caching() const { return caching_; }
  void set_observer(Observer* o) { observer_ = o; }
  // KV-cache events: each eviction of a cached block appends a BlockRemoved,
  // each reset an AllBlocksCleared (KVCacheManager adds the BlockStored).
  void set_events(std::vector<KvEvent>* events) { events_ = events; }
  bool records_events() const { return events_ != nullptr; }

  // Takes `n` blocks from the head of the free queue (evicting cached ones),
  // each with ref_cnt 1. Requires n <= num_free_blocks().
  std::vector<KVCacheBlock*> GetNewBlocks(int n);
  // The cached block with this hash, or null.
  KVCacheBlock* GetCachedBlock(const BlockHash& h) const;
  // Prefix hits: ref_cnt += 1, leaving the free queue if it was there.
  void Touch(std::span<KVCacheBlock* const> blocks);
  // ref_cnt -= 1; blocks reaching 0 rejoin the queue (fresh at the head,
  // cached at the tail) in the order given.
  void FreeBlocks(std::span<KVCacheBlock* const> ordered);
  // Registers full blocks under their hashes (already-cached ones are
  // skipped); `published`: whether their eviction is a BlockRemoved event.
  void CacheBlocks(std::span<KVCacheBlock* const> blocks, std::span<const BlockHash> hashes,
                   bool published = true);
  // Drops every cached hash; only possible when no request holds a block.
  bool ResetPrefixCache();

  // Block 0: what a block table holds where a sliding window freed a block.
  KVCacheBlock* null_block() const { return null_; }

  const FreeBlockQueue& free_queue() const { return free_; }
  const KVCacheBlock& block(int id) const { return blocks_[static_cast<std::size_t>(id)]; }

 private:
  void Evict(KVCacheBlock* b);

  std::vector<KVCacheBlock> blocks_;
  KVCacheBlock* null_;  // &blocks_[0]
  FreeBlockQueue free_;
  std::unordered_map<BlockHash, KVCacheBlock*, BlockHashHasher> cached_;
  bool caching_;
  Observer* observer_ = nullptr;
  std::vector<KvEvent>* events_ = nullptr;
};

}  // namespace sightline::engine
