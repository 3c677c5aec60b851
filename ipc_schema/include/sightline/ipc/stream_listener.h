// StreamListener: the engine's end of one socket (frame_stream.h): its input
// socket, whose frames it reads from every API server, or its output socket,
// on which it sends each API server its frames. One thread uses it (the
// engine's input or output thread); nothing here blocks except Wait and Flush.
// A callback it calls (Service's) must not call back into the same listener.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "sightline/ipc/frame_stream.h"

namespace sightline::ipc {

class StreamListener {
 public:
  // Binds and listens at `address` (a stale socket there, a killed engine's,
  // is replaced; anything else there is an error). A connection that has not
  // sent its hello within `hello_timeout_ms` is closed (ZeroMQ's handshake
  // interval, 30 s by default, did the same), so that peers that connect and
  // say nothing cannot pile up.
  static Status Listen(const std::string& address, std::unique_ptr<StreamListener>* out,
                       int hello_timeout_ms = 30000);
  ~StreamListener();  // closes every connection; removes the socket file
  StreamListener(const StreamListener&) = delete;
  StreamListener& operator=(const StreamListener&) = delete;

  // Queues one frame for the process whose hello was `identity`, and writes
  // what its socket takes now. False (the frame dropped) when no such
  // process is connected.
  bool Send(std::string_view identity, std::span<const std::uint8_t> frame);
  // Waits until a descriptor of this listener needs Service, `wake_fd` is
  // readable (-1: none), or `timeout_ms` passed. True when `wake_fd` was.
  bool Wait(int wake_fd, int timeout_ms);
  // What the last Wait found: takes new connections and their hellos, reads
  // what peers sent and calls `frame(identity, bytes)` for each frame after
  // a hello (in each connection's order), writes what waits for sockets with
  // room again, and closes connections that ended or broke the protocol (a
  // hello that is empty or over kMaxHelloFrame or late, a length over
  // kMaxFrame).
  // Never blocks.
  using FrameFn = std::function<void(std::string_view identity, std::span<const std::uint8_t>)>;
  void Service(const FrameFn& frame = nullptr);
  // Writes what waits, for up to `timeout_ms` (at shutdown, as ZeroMQ's
  // linger did).
  void Flush(int timeout_ms);

  std::size_t connections() const;  // with a hello
  std::size_t queued_bytes() const;

 private:
  struct Impl;
  explicit StreamListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sightline::ipc
