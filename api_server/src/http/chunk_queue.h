// ChunkQueue: the chunks a streaming connection has queued and not yet
// begun to write, in order. Internal to api_server (Session's). A vector
// and the position of its first chunk: once the vector has grown, neither
// queueing nor taking a chunk allocates (std::deque frees and allocates a
// block every few chunks, a cost per streamed token). Nothing may point
// into a queued chunk: chunks move when the vector grows or compacts.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace sightline::api::http_internal {

class ChunkQueue {
 public:
  bool empty() const { return head_ == chunks_.size(); }
  std::size_t size() const { return chunks_.size() - head_; }

  void push_back(std::string chunk) {
    // When full, reuse the taken front if it is at least half the vector:
    // each chunk then moves O(1) times however long the queue (a client
    // that stopped reading), and the vector grows only past twice the
    // chunks queued.
    if (chunks_.size() == chunks_.capacity() && head_ > 0 && head_ >= chunks_.size() / 2) {
      chunks_.erase(chunks_.begin(), chunks_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    chunks_.push_back(std::move(chunk));
  }
  // Takes the first n (at most size()) chunks out, in order, giving each to
  // take(std::string&&).
  template <typename Take>
  void PopFront(std::size_t n, Take take) {
    for (std::size_t i = 0; i < n; ++i) take(std::move(chunks_[head_++]));
    if (empty()) clear();
  }
  void clear() {
    chunks_.clear();  // keeps the capacity
    head_ = 0;
  }

 private:
  std::vector<std::string> chunks_;
  std::size_t head_ = 0;  // chunks_[0, head_) were taken
};

}  // namespace sightline::api::http_internal
