#include "frame_reader.h"

#include <errno.h>
#include <unistd.h>

namespace sightline::ipc {

bool FrameReader::Fill(int fd, std::size_t* got, bool* again) {
  for (;;) {
    const ssize_t n = ::read(fd, buffer_.data() + filled_, buffer_.size() - filled_);
    if (n > 0) {
      filled_ += static_cast<std::size_t>(n);
      *got = static_cast<std::size_t>(n);
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      *again = true;
      return true;
    }
    return false;  // the end, or an error
  }
}

}  // namespace sightline::ipc
