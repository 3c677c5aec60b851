// StreamConnection: an API server's end of one engine socket (frame_stream.h):
// its requests out on the engine's input socket, or the engine's outputs in
// on the output socket. One thread uses it (the engine client's input or
// output thread), around its own poll(): Connect while fd() is -1; Read
// when fd() is readable; WriteQueued when it is writable and wants_write().
// Read's callback must not call back into the same connection.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sightline/ipc/frame_stream.h"

namespace sightline::ipc {

class FrameReader;

class StreamConnection {
 public:
  // `address` was checked with ParseUnixAddress (an unparsable one never
  // connects); `identity` is this process's (FormatClientIdentity).
  StreamConnection(std::string address, std::string identity);
  ~StreamConnection();
  StreamConnection(const StreamConnection&) = delete;
  StreamConnection& operator=(const StreamConnection&) = delete;

  // Not connected: tries once to connect (no wait; nobody listening is not
  // an error) and sends the hello. True when it connected now.
  bool Connect();
  bool connected() const { return fd_ >= 0; }
  // The process listening at the far end, as of the last Connect: two
  // connections reach the same engine process when their peer pids match.
  // 0 if the kernel did not say, or the listener is in a PID namespace this
  // process cannot see (then every engine looks the same: no check).
  pid_t peer_pid() const { return peer_pid_; }
  int fd() const { return fd_; }  // -1 while not connected

  // Reads what the socket has and calls `frame` with each whole frame, in
  // order (the span lives until `frame` returns). Returns false once the
  // connection ended: the engine closed it or went away, or sent a length
  // over kMaxFrame. Every whole frame that came before is delivered first;
  // then the connection is closed (connected() is false). `drain` false:
  // one read() of a buffer's worth, the rest left for the next call (the
  // caller's poll() says it is there), so a reader that falls behind still
  // returns between buffers.
  bool Read(const std::function<void(std::span<const std::uint8_t>)>& frame, bool drain = true);

  // Sends one frame: writes what the socket takes now and queues the rest
  // (in order, never dropped while connected). False when not connected or
  // the connection just failed (then closed: what was queued is gone with
  // the engine it was for).
  bool Send(std::span<const std::uint8_t> frame);
  // Writes what is queued until the socket is full; false if it failed.
  bool WriteQueued();
  bool wants_write() const { return queued_bytes() > 0; }
  std::size_t queued_bytes() const { return out_.size() - out_head_; }

  void Close();

 private:
  std::string address_, identity_;
  int fd_ = -1;
  pid_t peer_pid_ = 0;
  std::unique_ptr<FrameReader> reader_;
  std::vector<std::uint8_t> out_;  // [out_head_, end) queued, not yet written
  std::size_t out_head_ = 0;
};

}  // namespace sightline::ipc
