// --ready-fd: how a child tells its supervisor it is serving (the
// sd_notify idea over an inherited pipe): one byte, then the fd is closed.
// A supervisor reading EOF without the byte knows the child died first.
#pragma once

#include <unistd.h>

namespace sightline::cli {

inline void NotifyReady(int fd) {
  if (fd < 0) return;
  const char ready = 'R';
  (void)!write(fd, &ready, 1);
  close(fd);
}

}  // namespace sightline::cli
