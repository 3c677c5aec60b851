// ListeningSocket: the one TCP socket every API server of a `serve`
// instance accepts on. The supervisor binds it once, before any child
// starts, so a port conflict fails start-up and a restarted API server
// rejoins the same queue. Owns the fd (closed on destruction).
#pragma once

#include <string>

#include "sightline/status.h"

namespace sightline::cli {

class ListeningSocket {
 public:
  ListeningSocket() = default;
  ~ListeningSocket() { Close(); }
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;

  // host: an IPv4 or IPv6 literal or a name; port 0 picks a free one.
  Status Bind(const std::string& host, int port);
  int fd() const { return fd_; }
  int port() const { return port_; }
  void Close();

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace sightline::cli
