// LoraManager: the LoRA adapters an engine serves, by name (EngineCore's
// part; vLLM's LRU adapter cache).
//
// An adapter is registered under a name with its path and a key that salts
// its requests' block hashes: the name and the registration's serial number,
// so an adapter registered again under the same name never finds its
// predecessor's KV. While resident, its weights sit in one of the runner's
// slots (>= 1). Past `max_cpu_loras` resident adapters, the least recently
// used one that no request holds gives its slot up; its weights are read from
// its path again when a request next names it. An adapter that requests hold
// (waiting or running: their slot is fixed when they are added) stays
// resident, so the bound is exceeded while more adapters than that have
// requests in the engine, never otherwise.
//
// Removing an adapter takes its name away at once (new requests are refused);
// the requests already admitted with it finish with it, and its slot is freed
// after the last of them (Trim).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lora/lora_adapter.h"
#include "sightline/status.h"

namespace sightline::engine {

class LoraManager {
 public:
  // Puts `adapter` into the runner's `slot`, or empties it (null).
  using SetSlot = std::function<Status(int slot, std::shared_ptr<const LoraAdapter> adapter)>;

  // Adapters read from a path are checked against `model` with `max_rank`
  // (LoadLoraAdapter). max_cpu_loras <= 0: no bound.
  LoraManager(const ModelConfig& model, int max_rank, int max_cpu_loras, SetSlot set_slot);

  // Serves `adapter` (null: read it from `path`) as `name`, resident in the
  // lowest free slot. Refused: an empty name, a name served already
  // (kAlreadyExists), an adapter that cannot be read or does not fit the
  // model (LoadLoraAdapter's errors), a runner without LoRA.
  Status Add(const std::string& name, const std::string& path,
             std::shared_ptr<const LoraAdapter> adapter);
  // Stops serving `name` (kNotFound when it is not served); see above.
  Status Remove(const std::string& name);
  // For a request that names `name`: its slot (the weights read again if
  // they were evicted) and its block-hash key; the adapter becomes the most
  // recently used. kNotFound when `name` is not served.
  Status Acquire(const std::string& name, int* slot, std::string* key);

  // Whether Trim has anything to do: a removed adapter still resident, or
  // more resident adapters than max_cpu_loras.
  bool NeedsTrim() const;
  // Frees the slots of removed adapters and evicts the least recently used
  // ones beyond max_cpu_loras, sparing the slots `held(slot)` says requests
  // hold.
  void Trim(const std::function<bool(int slot)>& held);

  // The adapters served (not removed): name and path, in the order added.
  std::vector<std::pair<std::string, std::string>> adapters() const;
  bool empty() const { return entries_.empty(); }
  // Adapters whose weights are in a slot (removed ones still draining included).
  int resident() const;

 private:
  struct Entry {
    std::string name, path, key;
    int slot = 0;  // 0: not resident
    std::uint64_t last_used = 0;
    bool removed = false;
  };
  Entry* Find(const std::string& name);
  // Reads the weights of `e` when needed and puts them in the lowest free slot.
  Status MakeResident(Entry* e, std::shared_ptr<const LoraAdapter> adapter);
  void Evict(Entry* e);

  ModelConfig model_;
  int max_rank_, max_cpu_loras_;
  SetSlot set_slot_;
  std::vector<Entry> entries_;
  std::uint64_t serial_ = 0, clock_ = 0;
};

}  // namespace sightline::engine
