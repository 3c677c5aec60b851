#include "sightline/ipc/frame_stream.h"

#include <errno.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include "frame_reader.h"

namespace sightline::ipc {

Status ParseUnixAddress(std::string_view address, sockaddr_un* out, socklen_t* length) {
  constexpr std::string_view kScheme = "ipc://";
  if (!address.starts_with(kScheme))
    return Status::InvalidArgument("'" + std::string(address) +
                                   "': only ipc://<path> is taken (a Unix socket)");
  const std::string_view path = address.substr(kScheme.size());
  std::memset(out, 0, sizeof *out);
  out->sun_family = AF_UNIX;
  // sun_path holds a path and its terminating zero; an abstract name (its
  // first byte zero) uses the whole field.
  if (path.empty() || path == "@" || path.size() >= sizeof out->sun_path ||
      path.find('\0') != path.npos)
    return Status::InvalidArgument("'" + std::string(address) + "': the path must be 1 to " +
                                   std::to_string(sizeof out->sun_path - 1) + " bytes");
  std::memcpy(out->sun_path, path.data(), path.size());
  if (path[0] == '@') out->sun_path[0] = '\0';  // ZeroMQ's spelling of the abstract namespace
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                   (path[0] == '@' ? 0 : 1));
  return Status::Ok();
}

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
