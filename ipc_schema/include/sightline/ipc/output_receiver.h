// OutputReceiver: an API server's end of the output path (output_stream.h).
// One thread uses it (the engine client's I/O thread), around its own poll():
// Connect while fd() is -1, Read when fd() is readable.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sightline/ipc/output_stream.h"

namespace sightline::ipc {

class OutputReceiver {
 public:
  // `address` was checked with ParseUnixAddress (an unparsable one never
  // connects); `identity` is this process's (FormatClientIdentity).
  OutputReceiver(std::string address, std::string identity);
  ~OutputReceiver();
  OutputReceiver(const OutputReceiver&) = delete;
  OutputReceiver& operator=(const OutputReceiver&) = delete;

  // Not connected: tries once to connect (no wait; nobody listening is not
  // an error) and sends the hello. True when it connected now.
  bool Connect();
  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }  // -1 while not connected

  // Reads what the socket has and calls `frame` with each whole frame, in
  // order (the span lives until `frame` returns). Returns false once the
  // connection ended: the engine closed it or went away, or sent a length
  // over kMaxOutputFrame. Every whole frame that came before is delivered
  // first; then the receiver is not connected.
  bool Read(const std::function<void(std::span<const std::uint8_t>)>& frame);

 private:
  void Close();
  std::string address_, identity_;
  int fd_ = -1;
  std::vector<std::uint8_t> buffer_;  // [0, filled_) read, not yet delivered
  std::size_t filled_ = 0;
};

}  // namespace sightline::ipc
