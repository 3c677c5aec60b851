#include "kv/block_pool.h"

#include <cassert>

namespace sightline::engine {

FreeBlockQueue::FreeBlockQueue() {
  head_.next_free = &tail_;
  tail_.prev_free = &head_;
}

void FreeBlockQueue::PushBack(KVCacheBlock* b) {
  b->prev_free = tail_.prev_free;
  b->next_free = &tail_;
  tail_.prev_free->next_free = b;
  tail_.prev_free = b;
  ++size_;
}

void FreeBlockQueue::PushFront(KVCacheBlock* b) {
  b->next_free = head_.next_free;
  b->prev_free = &head_;
  head_.next_free->prev_free = b;
  head_.next_free = b;
  ++size_;
}

KVCacheBlock* FreeBlockQueue::PopFront() {
  assert(size_ > 0);
  KVCacheBlock* b = head_.next_free;
  Remove(b);
  return b;
}

void FreeBlockQueue::Remove(KVCacheBlock* b) {
  b->prev_free->next_free = b->next_free;
  b->next_free->prev_free = b->prev_free;
  b->prev_free = b->next_free = nullptr;
  --size_;
}

std::vector<std::int32_t> FreeBlockQueue::Ids() const {
  std::vector<std::int32_t> ids;
  for (const KVCacheBlock* b = head_.next_free; b != &tail_; b = b->next_free) ids.push_back(b->id);
  return ids;
}

BlockPool::BlockPool(int num_blocks, bool enable_caching)
    : blocks_(static_cast<std::size_t>(num_blocks)), null_(&blocks_[0]), caching_(enable_caching) {
  for (int i = 0; i < num_blocks; ++i) blocks_[static_cast<std::size_t>(i)].id = i;
  // Block 0 is the null block: never free, never counted.
  for (int i = 1; i < num_blocks; ++i) free_.PushBack(&blocks_[static_cast<std::size_t>(i)]);
}

double BlockPool::Usage() const {
  const int usable = num_blocks() - 1;
  return usable <= 0 ? 0.0 : 1.0 - static_cast<double>(num_free_blocks()) / usable;
}

void BlockPool::Evict(KVCacheBlock* b) {
  if (!b->hash) return;
  if (observer_) observer_->OnEvicted(*b);
  if (events_ && b->published) {  // one per block, as vLLM's _maybe_evict_cached_block
    KvEvent e;
    e.kind = KvEvent::Kind::kBlockRemoved;
    e.block_hashes.push_back(b->hash->lo);
    events_->push_back(std::move(e));
  }
  auto it = cached_.find(*b->hash);
  if (it != cached_.end() && it->second == b) cached_.erase(it);
  b->hash.reset();
}

std::vector<KVCacheBlock*> BlockPool::GetNewBlocks(int n) {
  assert(n <= num_free_blocks());
  std::vector<KVCacheBlock*> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    KVCacheBlock* b = free_.PopFront();
    Evict(b);
    b->ref_cnt = 1;
    if (observer_) observer_->OnAllocated(*b);
    out.push_back(b);
  }
  return out;
}

KVCacheBlock* BlockPool::GetCachedBlock(const BlockHash& h) const {
  auto it = cached_.find(h);
  return it == cached_.end() ? nullptr : it->second;
}

void BlockPool::Touch(std::span<KVCacheBlock* const> blocks) {
  for (KVCacheBlock* b : blocks) {
    if (b->ref_cnt == 0 && free_.Contains(b)) free_.Remove(b);
    ++b->ref_cnt;
    if (observer_) observer_->OnAccessed(*b);
  }
}

void BlockPool::FreeBlocks(std::span<KVCacheBlock* const> ordered) {
  for (KVCacheBlock* b : ordered) {
    if (--b->ref_cnt > 0) continue;
    if (b->hash)
      free_.PushBack(b);  // cached content: evicted last
    else
      free_.PushFront(b);  // nothing worth keeping: reused first
  }
}

void BlockPool::CacheBlocks(std::span<KVCacheBlock* const> blocks,
                            std::span<const BlockHash> hashes, bool published) {
  if (!caching_) return;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    KVCacheBlock* b = blocks[i];
    if (b->hash) continue;
    b->hash = hashes[i];
    b->published = published;
    // No de-duplication (block tables stay append-only); the first block
    // registered under a hash keeps serving hits.
    cached_.emplace(hashes[i], b);
  }
}

bool BlockPool::ResetPrefixCache() {
  if (num_free_blocks() != num_blocks() - 1) return false;
  cached_.clear();
  for (KVCacheBlock& b : blocks_) b.hash.reset();
  if (observer_) observer_->OnReset();
  if (events_) {
    KvEvent e;
    e.kind = KvEvent::Kind::kAllBlocksCleared;
    events_->push_back(std::move(e));
  }
  return true;
}

}  // namespace sightline::engine
