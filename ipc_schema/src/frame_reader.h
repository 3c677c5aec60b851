// FrameReader: whole frames out of a non-blocking stream socket's bytes
// (frame_stream.h's wire), for both ends. Internal to the ipc library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sightline/ipc/frame_stream.h"

namespace sightline::ipc {

class FrameReader {
 public:
  enum class Result {
    kMore,    // read everything there was; the connection stays
    kClosed,  // the peer closed it, or it failed (whole frames before were delivered)
    kBad,     // a length past the limit: not the protocol
  };
  // Reads what `fd` has and calls `frame(bytes)` with each whole frame, in
  // order (the span lives until it returns). A frame longer than the limit
  // (set_max_frame; kMaxFrame at first) is kBad; `frame` may change the limit
  // for the frames after it (a hello, then the rest). `drain`: read until the socket is
  // empty; otherwise one read() (a listener takes turns between its peers,
  // and poll() says again what is left).
  template <typename Fn>
  Result Read(int fd, Fn&& frame, bool drain = true);

  void set_max_frame(std::uint32_t n) { max_frame_ = n; }
  void Reset() { filled_ = 0; }

 private:
  // One read() into the buffer; false at the end of the connection or an
  // error other than EAGAIN (then *again is false), true otherwise.
  bool Fill(int fd, std::size_t* got, bool* again);
  static constexpr std::size_t kInitialBuffer = 64 * 1024;
  std::vector<std::uint8_t> buffer_;  // [0, filled_) read, not yet delivered
  std::size_t filled_ = 0;
  std::uint32_t max_frame_ = kMaxFrame;
};

inline std::uint32_t LoadFrameLength(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

inline void StoreFrameLength(std::uint32_t n, std::uint8_t* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(n >> (8 * i));
}

template <typename Fn>
FrameReader::Result FrameReader::Read(int fd, Fn&& frame, bool drain) {
  // Back to the usual size once a rare huge frame (prompt logprobs) is out.
  if (filled_ == 0 && buffer_.size() > 4 * kInitialBuffer) {
    buffer_.resize(kInitialBuffer);
    buffer_.shrink_to_fit();
  }
  if (buffer_.empty()) buffer_.resize(kInitialBuffer);
  for (;;) {
    std::size_t got = 0;
    bool again = false;
    const std::size_t room = buffer_.size() - filled_;
    if (!Fill(fd, &got, &again)) return Result::kClosed;
    if (again) return Result::kMore;
    // Every whole frame, in order; a partial one moves to the front.
    std::size_t at = 0;
    while (filled_ - at >= 4) {
      const std::uint32_t length = LoadFrameLength(buffer_.data() + at);
      if (length > max_frame_) return Result::kBad;
      if (filled_ - at - 4 < length) {
        if (4 + std::size_t{length} > buffer_.size()) buffer_.resize(4 + std::size_t{length});
        break;
      }
      frame(std::span<const std::uint8_t>(buffer_.data() + at + 4, length));
      at += 4 + std::size_t{length};
    }
    if (at > 0) {
      std::copy(buffer_.begin() + static_cast<std::ptrdiff_t>(at),
                buffer_.begin() + static_cast<std::ptrdiff_t>(filled_), buffer_.begin());
      filled_ -= at;
    }
    // A read that did not fill the room took everything there was.
    if (got < room || !drain) return Result::kMore;
  }
}

}  // namespace sightline::ipc
