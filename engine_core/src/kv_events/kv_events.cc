#include "kv_events/kv_events.h"

#include <string_view>

// Header-only use of msgpack-cxx: without Boost (its only use of Boost here
// would be Boost.Predef and Boost.Assert).
#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <msgpack.hpp>

namespace sightline::engine {

namespace {

// The medium vLLM names the GPU's KV cache with (MEDIUM_GPU); the only one here.
constexpr std::string_view kMediumGpu = "GPU";

// msgpack's packer writes to any type with write(const char*, size_t).
struct KvStringSink {
  std::string* out;
  void write(const char* data, std::size_t size) { out->append(data, size); }
};
using KvPacker = msgpack::packer<KvStringSink>;

void PackStr(KvPacker& pk, std::string_view s) {
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void PackHashes(KvPacker& pk, const std::vector<std::uint64_t>& hashes) {
  pk.pack_array(static_cast<std::uint32_t>(hashes.size()));
  for (std::uint64_t h : hashes) pk.pack_uint64(h);  // the smallest unsigned form
}

void PackBlockStored(KvPacker& pk, const KvEvent& e) {
  const bool extra = !e.extra_keys.empty();
  const bool sliding = e.sliding_window > 0;
  // type + 7 required fields + group_idx + kv_cache_spec_kind, and the two
  // that msgspec omits at their default (None).
  pk.pack_map(10 + (extra ? 1 : 0) + (sliding ? 1 : 0));
  PackStr(pk, "type");
  PackStr(pk, "BlockStored");
  PackStr(pk, "block_hashes");
  PackHashes(pk, e.block_hashes);
  PackStr(pk, "parent_block_hash");
  if (e.parent_block_hash)
    pk.pack_uint64(*e.parent_block_hash);
  else
    pk.pack_nil();
  PackStr(pk, "token_ids");
  pk.pack_array(static_cast<std::uint32_t>(e.token_ids.size()));
  for (std::int32_t t : e.token_ids) pk.pack_int32(t);
  PackStr(pk, "block_size");
  pk.pack_int(e.block_size);
  PackStr(pk, "lora_id");
  if (e.lora_id)
    pk.pack_int64(*e.lora_id);
  else
    pk.pack_nil();
  PackStr(pk, "medium");
  PackStr(pk, kMediumGpu);
  PackStr(pk, "lora_name");
  if (e.lora_name)
    PackStr(pk, *e.lora_name);
  else
    pk.pack_nil();
  if (extra) {
    PackStr(pk, "extra_keys");
    pk.pack_array(static_cast<std::uint32_t>(e.extra_keys.size()));
    for (const auto& keys : e.extra_keys) {
      if (keys.empty()) {
        pk.pack_nil();
        continue;
      }
      pk.pack_array(static_cast<std::uint32_t>(keys.size()));
      for (const std::string& k : keys) PackStr(pk, k);
    }
  }
  PackStr(pk, "group_idx");
  pk.pack_int(0);
  PackStr(pk, "kv_cache_spec_kind");
  PackStr(pk, sliding ? "sliding_window" : "full_attention");
  if (sliding) {
    PackStr(pk, "kv_cache_spec_sliding_window");
    pk.pack_int(e.sliding_window);
  }
}

void PackBlockRemoved(KvPacker& pk, const KvEvent& e) {
  pk.pack_map(4);
  PackStr(pk, "type");
  PackStr(pk, "BlockRemoved");
  PackStr(pk, "block_hashes");
  PackHashes(pk, e.block_hashes);
  PackStr(pk, "medium");
  PackStr(pk, kMediumGpu);
  PackStr(pk, "group_idx");
  pk.pack_int(0);
}

}  // namespace

std::string EncodeKvEventBatch(const KvEventBatch& batch) {
  std::string out;
  KvStringSink sink{&out};
  KvPacker pk(sink);
  pk.pack_array(3);
  pk.pack_double(batch.ts);
  pk.pack_array(static_cast<std::uint32_t>(batch.events.size()));
  for (const KvEvent& e : batch.events) {
    switch (e.kind) {
      case KvEvent::Kind::kBlockStored:
        PackBlockStored(pk, e);
        break;
      case KvEvent::Kind::kBlockRemoved:
        PackBlockRemoved(pk, e);
        break;
      case KvEvent::Kind::kAllBlocksCleared:
        pk.pack_map(1);
        PackStr(pk, "type");
        PackStr(pk, "AllBlocksCleared");
        break;
    }
  }
  pk.pack_int(batch.data_parallel_rank);
  return out;
}

}  // namespace sightline::engine
