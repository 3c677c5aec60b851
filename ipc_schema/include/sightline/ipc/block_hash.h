// Prefix-caching block hashes (vLLM V1 semantics, DESIGN.md §4): the
// engine's keys for its prefix cache, and the API servers' for data-parallel
// prefix affinity (they hash a prompt as the engine will, and look the hashes
// up in what each engine says it caches: CacheUpdate).
//
// hash_i = H(hash_{i-1} or a fixed root, token ids of block i, extra keys of block i)
// for every *full* block; the extra keys of block 0 carry the request's
// cache_salt, so requests with different salts never share blocks. H is
// XXH3-128 (libxxhash): a collision would silently hand one request another's
// KV, so 64 bits are not enough; 128 bits make it negligible at any scale.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace sightline::ipc {

struct BlockHash {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
  std::size_t operator()(const BlockHash& h) const { return static_cast<std::size_t>(h.lo); }
};

// The hash of one full block. `parent` is null for block 0.
BlockHash HashBlockTokens(const BlockHash* parent, std::span<const std::int32_t> tokens,
                          std::string_view extra_keys);

// Appends the hashes of the full blocks of `tokens` not yet in *hashes (so
// it extends a request's list as its output completes more blocks).
void ExtendBlockHashes(std::span<const std::int32_t> tokens, int block_size,
                       std::string_view cache_salt, std::vector<BlockHash>* hashes);

}  // namespace sightline::ipc
