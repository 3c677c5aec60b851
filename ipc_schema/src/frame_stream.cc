#include "sightline/ipc/frame_stream.h"

#include <cstddef>
#include <cstring>
#include <string>

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
  if (path == "*")  // ZeroMQ's "a name of its choosing": here a file named "*"
    return Status::InvalidArgument("'" + std::string(address) + "': name the socket's path");
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

Status CheckUnixAddress(std::string_view flag, std::string_view address) {
  sockaddr_un unused;
  socklen_t length;
  Status s = ParseUnixAddress(address, &unused, &length);
  return s.ok() ? s : Status::InvalidArgument(std::string(flag) + ": " + s.message());
}

}  // namespace sightline::ipc
