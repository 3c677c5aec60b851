#include "output/stop_matcher.h"

#include "sightline/utf8.h"

namespace sightline::api {

namespace {

std::uint64_t EdgeKey(std::uint32_t parent, std::uint8_t byte) {
  return ((std::uint64_t{parent} << 8) | byte) + 1;
}

std::uint64_t Slot(std::uint64_t key, std::uint64_t mask) {
  return (key * 0x9E3779B97F4A7C15ULL >> 20) & mask;
}

}  // namespace

std::uint32_t StopStrings::Child(std::uint32_t node, std::uint8_t byte) const {
  if (node == 0) return root_[byte];
  const std::uint64_t key = EdgeKey(node, byte);
  for (std::uint64_t i = Slot(key, mask_);; i = (i + 1) & mask_) {
    if (keys_[i] == key) return children_[i];
    if (keys_[i] == 0) return 0;
  }
}

void StopStrings::AddEdge(std::uint32_t parent, std::uint8_t byte, std::uint32_t child) {
  if (parent == 0) {
    root_[byte] = child;
  } else {
    if (2 * (nodes_.size() + 1) > keys_.size()) Rehash(2 * keys_.size());  // at most half full
    const std::uint64_t key = EdgeKey(parent, byte);
    std::uint64_t i = Slot(key, mask_);
    while (keys_[i] != 0) i = (i + 1) & mask_;
    keys_[i] = key;
    children_[i] = child;
  }
  Node& c = nodes_[child];
  c.byte = byte;
  c.next_sibling = nodes_[parent].first_child;
  nodes_[parent].first_child = child;
}

void StopStrings::Rehash(std::size_t capacity) {
  std::vector<std::uint64_t> keys(capacity, 0);
  std::vector<std::uint32_t> children(capacity, 0);
  const std::uint64_t mask = capacity - 1;
  for (std::size_t j = 0; j < keys_.size(); ++j) {
    if (keys_[j] == 0) continue;
    std::uint64_t i = Slot(keys_[j], mask);
    while (keys[i] != 0) i = (i + 1) & mask;
    keys[i] = keys_[j];
    children[i] = children_[j];
  }
  keys_ = std::move(keys);
  children_ = std::move(children);
  mask_ = mask;
}

std::uint32_t StopStrings::Next(std::uint32_t state, std::uint8_t byte) const {
  // Each failure step shortens the state, and each byte deepens it by at
  // most one: over a text, at most one failure step per byte.
  for (;;) {
    if (const std::uint32_t c = Child(state, byte)) return c;
    if (state == 0) return 0;
    state = nodes_[state].fail;
  }
}

std::shared_ptr<const StopStrings> StopStrings::Compile(const std::vector<std::string>& stops) {
  std::shared_ptr<StopStrings> a(new StopStrings);
  a->stops_ = stops;
  a->nodes_.emplace_back();
  a->Rehash(16);

  for (std::size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    std::uint32_t node = 0;
    for (const char ch : stops[i]) {
      const auto b = static_cast<std::uint8_t>(ch);
      std::uint32_t next = a->Child(node, b);
      if (next == 0) {
        next = static_cast<std::uint32_t>(a->nodes_.size());
        a->nodes_.emplace_back();
        a->nodes_[next].depth = a->nodes_[node].depth + 1;
        a->AddEdge(node, b, next);
      }
      node = next;
    }
    if (a->nodes_[node].stop < 0) a->nodes_[node].stop = static_cast<std::int32_t>(i);
  }

  // Failure and output links, breadth first: a node's links depend only on
  // shallower nodes.
  std::vector<std::uint32_t> queue;
  queue.reserve(a->nodes_.size());
  for (std::uint32_t c = a->nodes_[0].first_child; c != 0; c = a->nodes_[c].next_sibling) {
    a->nodes_[c].out = a->nodes_[c].stop >= 0 ? c : 0;
    queue.push_back(c);
  }
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const std::uint32_t u = queue[q];
    for (std::uint32_t c = a->nodes_[u].first_child; c != 0; c = a->nodes_[c].next_sibling) {
      Node& n = a->nodes_[c];
      n.fail = a->Next(a->nodes_[u].fail, n.byte);
      n.out = n.stop >= 0 ? c : a->nodes_[n.fail].out;
      queue.push_back(c);
    }
  }
  return a;
}

StopMatcher::StopMatcher(std::shared_ptr<const StopStrings> stops) : stops_(std::move(stops)) {}

StopMatcher::StopMatcher(const std::vector<std::string>& stops)
    : StopMatcher(StopStrings::Compile(stops)) {}

StopMatcher::Result StopMatcher::Feed(std::string_view delta) {
  Result r;
  if (stops_->empty()) {
    r.text = delta;
    return r;
  }
  const std::vector<StopStrings::Node>& nodes = stops_->nodes_;
  const std::size_t from = buffer_.size();
  buffer_.append(delta);
  // A match ending at byte i starts at i + 1 - its length. The earliest start
  // wins, so once one is found the scan goes on only while the current state
  // still reaches back to it: a later match can start no earlier than that.
  std::size_t best_start = std::string::npos;
  std::int32_t best_stop = -1;
  for (std::size_t i = from; i < buffer_.size(); ++i) {
    state_ = stops_->Next(state_, static_cast<std::uint8_t>(buffer_[i]));
    const StopStrings::Node& s = nodes[state_];
    if (best_stop >= 0 && i + 1 - s.depth > best_start) break;
    if (s.out == 0) continue;
    // The longest stop ending here starts earliest; a shorter one ending
    // here starts later, so it can only lose.
    const StopStrings::Node& m = nodes[s.out];
    const std::size_t start = i + 1 - m.depth;
    if (start < best_start || (start == best_start && m.stop < best_stop)) {
      best_start = start;
      best_stop = m.stop;
    }
  }
  if (best_stop >= 0) {
    r.text = buffer_.substr(head_, best_start - head_);
    r.stopped = true;
    r.stop = stops_->stops_[static_cast<std::size_t>(best_stop)];
    buffer_.clear();
    head_ = 0;
    state_ = 0;
    return r;
  }
  // Release all but what could still be the start of a stop string, never
  // cutting a UTF-8 character in two (at most three continuation bytes).
  std::size_t cut = buffer_.size() - nodes[state_].depth;
  for (int k = 0; k < 3 && cut > head_ && cut < buffer_.size() &&
                  IsUtf8Continuation(static_cast<unsigned char>(buffer_[cut]));
       ++k)
    --cut;
  r.text.assign(buffer_, head_, cut - head_);
  head_ = cut;
  if (head_ == buffer_.size()) {
    buffer_.clear();
    head_ = 0;
  } else if (head_ >= 4096 && head_ >= buffer_.size() / 2) {
    buffer_.erase(0, head_);  // amortized: the bytes moved are fewer than those released
    head_ = 0;
  }
  return r;
}

std::string StopMatcher::Flush() {
  std::string rest = buffer_.substr(head_);
  buffer_.clear();
  head_ = 0;
  state_ = 0;
  return rest;
}

}  // namespace sightline::api
