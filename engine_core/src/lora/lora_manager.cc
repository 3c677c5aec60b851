#include "lora/lora_manager.h"

#include <algorithm>

namespace sightline::engine {

LoraManager::LoraManager(const ModelConfig& model, int max_rank, int max_cpu_loras,
                         SetSlot set_slot)
    : model_(model),
      max_rank_(max_rank),
      max_cpu_loras_(max_cpu_loras),
      set_slot_(std::move(set_slot)) {}

LoraManager::Entry* LoraManager::Find(const std::string& name) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return !e.removed && e.name == name; });
  return it == entries_.end() ? nullptr : &*it;
}

Status LoraManager::MakeResident(Entry* e, std::shared_ptr<const LoraAdapter> adapter) {
  if (!adapter) {
    auto read = std::make_shared<LoraAdapter>();
    if (Status s = LoadLoraAdapter(e->path, model_, max_rank_, read.get()); !s.ok()) return s;
    adapter = std::move(read);
  }
  int slot = 1;  // the lowest free one
  while (std::any_of(entries_.begin(), entries_.end(),
                     [&](const Entry& other) { return other.slot == slot; }))
    ++slot;
  if (Status s = set_slot_(slot, std::move(adapter)); !s.ok()) return s;
  e->slot = slot;
  return Status::Ok();
}

void LoraManager::Evict(Entry* e) {
  // Emptying a slot cannot fail (SetLoraAdapter refuses only slot < 1 and
  // mismatched adapters).
  (void)set_slot_(e->slot, nullptr);
  e->slot = 0;
}

Status LoraManager::Add(const std::string& name, const std::string& path,
                        std::shared_ptr<const LoraAdapter> adapter) {
  if (name.empty()) return Status::InvalidArgument("a LoRA adapter needs a name");
  if (Find(name))
    return Status::AlreadyExists("The lora adapter '" + name + "' has already been loaded.");
  Entry e;
  e.name = name;
  e.path = path;
  if (Status s = MakeResident(&e, std::move(adapter)); !s.ok()) return s;
  e.key = name + "#" + std::to_string(++serial_);
  e.last_used = ++clock_;
  entries_.push_back(std::move(e));
  return Status::Ok();
}

Status LoraManager::Remove(const std::string& name) {
  Entry* e = Find(name);
  if (!e) return Status::NotFound("The lora adapter '" + name + "' cannot be found.");
  e->removed = true;
  return Status::Ok();
}

Status LoraManager::Acquire(const std::string& name, int* slot, std::string* key) {
  Entry* e = Find(name);
  if (!e) return Status::NotFound("the LoRA adapter '" + name + "' is not loaded");
  if (e->slot == 0)
    if (Status s = MakeResident(e, nullptr); !s.ok())
      return Status::IoError("the LoRA adapter '" + name + "' could not be read again from " +
                             e->path + ": " + s.message());
  e->last_used = ++clock_;
  *slot = e->slot;
  *key = e->key;
  return Status::Ok();
}

int LoraManager::resident() const {
  return static_cast<int>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.slot > 0; }));
}

bool LoraManager::NeedsTrim() const {
  if (max_cpu_loras_ > 0 && resident() > max_cpu_loras_) return true;
  return std::any_of(entries_.begin(), entries_.end(), [](const Entry& e) { return e.removed; });
}

void LoraManager::Trim(const std::function<bool(int slot)>& held) {
  std::erase_if(entries_, [&](Entry& e) {
    if (!e.removed || (e.slot > 0 && held(e.slot))) return false;
    if (e.slot > 0) Evict(&e);
    return true;
  });
  while (max_cpu_loras_ > 0 && resident() > max_cpu_loras_) {
    Entry* lru = nullptr;
    for (Entry& e : entries_)
      if (e.slot > 0 && !held(e.slot) && (!lru || e.last_used < lru->last_used)) lru = &e;
    if (!lru) return;  // every resident adapter has requests
    Evict(lru);
  }
}

std::vector<std::pair<std::string, std::string>> LoraManager::adapters() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Entry& e : entries_)
    if (!e.removed) out.emplace_back(e.name, e.path);
  return out;
}

}  // namespace sightline::engine
