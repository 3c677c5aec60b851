#include "sightline/ipc/block_hash.h"

// The state lives on the stack (no allocation per block hash).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace sightline::ipc {

namespace {
// Distinguishes "no parent" from any real parent hash.
constexpr std::uint64_t kRootSeed = 0x5349474854424c4bULL;  // "SIGHTBLK"
}  // namespace

BlockHash HashBlockTokens(const BlockHash* parent, std::span<const std::int32_t> tokens,
                          std::string_view extra_keys) {
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, parent ? 0 : kRootSeed);
  if (parent) XXH3_128bits_update(&state, parent, sizeof *parent);
  // Lengths are hashed too, so (tokens, extra) boundaries cannot shift.
  const std::uint64_t lengths[2] = {tokens.size(), extra_keys.size()};
  XXH3_128bits_update(&state, lengths, sizeof lengths);
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  XXH3_128bits_update(&state, extra_keys.data(), extra_keys.size());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

void ExtendBlockHashes(std::span<const std::int32_t> tokens, int block_size,
                       std::string_view cache_salt, std::vector<BlockHash>* hashes) {
  const std::size_t full = tokens.size() / static_cast<std::size_t>(block_size);
  for (std::size_t i = hashes->size(); i < full; ++i) {
    const BlockHash* parent = i == 0 ? nullptr : &(*hashes)[i - 1];
    const BlockHash h = HashBlockTokens(parent, tokens.subspan(i * block_size, block_size),
                                        i == 0 ? cache_salt : std::string_view());
    hashes->push_back(h);
  }
}

}  // namespace sightline::ipc
