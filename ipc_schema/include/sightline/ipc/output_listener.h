// OutputListener: the engine's end of the output path (output_stream.h).
// One thread uses it (the engine's output thread); nothing here blocks except
// Wait and Flush.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "sightline/ipc/output_stream.h"

namespace sightline::ipc {

class OutputListener {
 public:
  // Binds and listens at `address` (a stale socket file there, a crashed
  // engine's, is replaced).
  static Status Listen(const std::string& address, std::unique_ptr<OutputListener>* out);
  ~OutputListener();  // closes every connection; removes the socket file
  OutputListener(const OutputListener&) = delete;
  OutputListener& operator=(const OutputListener&) = delete;

  // Queues one frame for the process whose hello was `identity`, and writes
  // what its socket takes now. False (the frame dropped) when no such
  // process is connected.
  bool Send(std::string_view identity, std::span<const std::uint8_t> frame);
  // Waits until a descriptor of this listener needs Service, `wake_fd` is
  // readable (-1: none), or `timeout_ms` passed. True when `wake_fd` was.
  bool Wait(int wake_fd, int timeout_ms);
  // Takes new connections and their hellos, writes what waits for sockets
  // that have room again, and closes connections whose peer went away, as
  // the last Wait found them. Never blocks.
  void Service();
  // Writes what waits, for up to `timeout_ms` (at shutdown, as ZeroMQ's
  // linger did).
  void Flush(int timeout_ms);

  std::size_t connections() const;  // with a hello
  std::size_t queued_bytes() const;

 private:
  struct Impl;
  explicit OutputListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sightline::ipc
