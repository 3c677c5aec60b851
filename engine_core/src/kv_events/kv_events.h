// KV-cache events, vLLM's model of them (vllm/distributed/kv_events.py), and
// their msgpack encoding as vLLM publishes it, which llm-d's KV-aware router
// decodes: one batch per engine step that changed the prefix cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sightline::engine {

struct KvEvent {
  enum class Kind { kBlockStored, kBlockRemoved, kAllBlocksCleared };
  Kind kind = Kind::kBlockStored;
  // Stored: the newly full blocks, in chain order; Removed: the evicted
  // ones. A router only needs them unique and consistent across Stored,
  // parent and Removed (llm-d recomputes its own keys from the tokens).
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::uint64_t> parent_block_hash;  // Stored; nullopt: first block of its chain
  std::vector<std::int32_t> token_ids;             // Stored: the blocks' tokens, concatenated
  int block_size = 0;                              // Stored
  std::optional<std::int64_t> lora_id;             // Stored
  std::optional<std::string> lora_name;            // Stored
  // Stored: per block, what besides its tokens its hash covers (vLLM's
  // extra_keys: the adapter's name on every block, the cache_salt on the
  // first); one entry per block, an empty one encoded as nil (as vLLM sends
  // [None, ...] for blocks with none); no entries at all: the field is left
  // out (msgspec's omit_defaults for None).
  std::vector<std::vector<std::string>> extra_keys;
  // Stored: > 0: the group's attention is a sliding window of this many
  // tokens (kv_cache_spec_kind "sliding_window"); else "full_attention".
  int sliding_window = 0;
};

struct KvEventBatch {
  double ts = 0;  // seconds since the Unix epoch (vLLM: time.time())
  std::vector<KvEvent> events;
  int data_parallel_rank = 0;
};

// The batch's msgpack bytes, in vLLM's current form (v0.26 on, PR #42892):
// the batch is an array [ts (float64), [events], data_parallel_rank]; each
// event is a map whose first key is "type" (the class name: "BlockStored",
// "BlockRemoved", "AllBlocksCleared"), then vLLM's fields in declaration
// order, as msgspec writes a tagged struct with omit_defaults. The older
// array form ["BlockStored", ...] is not written: llm-d decodes both, and the
// map form is what a current vLLM sends.
//   BlockStored: block_hashes, parent_block_hash (nil: none), token_ids,
//     block_size, lora_id, medium ("GPU"), lora_name, extra_keys (one entry
//     per block, nil for none), group_idx (0), kv_cache_spec_kind,
//     kv_cache_spec_sliding_window (only for a sliding window).
//   BlockRemoved: block_hashes, medium ("GPU"), group_idx (0).
//   AllBlocksCleared: the type alone.
// Hashes are msgpack unsigned integers (uint64 from 2^63 on), as vLLM's
// default VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1 writes them.
std::string EncodeKvEventBatch(const KvEventBatch& batch);

}  // namespace sightline::engine
