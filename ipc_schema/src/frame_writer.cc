#include "frame_writer.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdio>

#include "frame_reader.h"
#include "sightline/ipc/frame_stream.h"

namespace sightline::ipc {

namespace {

// Errors that say "not now" rather than "this connection is over": the
// kernel short of memory for a moment is waited out like a full socket.
bool TryAgainLater(int error) {
  return error == EAGAIN || error == EWOULDBLOCK || error == ENOBUFS || error == ENOMEM;
}

// What was written leaves the front once it is most of the vector, so that
// a reader that keeps up only slowly does not grow it for ever.
void Compact(std::vector<std::uint8_t>* queue, std::size_t* head) {
  if (*head < 64 * 1024 || *head < queue->size() / 2) return;
  queue->erase(queue->begin(), queue->begin() + static_cast<std::ptrdiff_t>(*head));
  *head = 0;
}

}  // namespace

bool WriteQueuedFrames(int fd, std::vector<std::uint8_t>* queue, std::size_t* head) {
  while (*head < queue->size()) {
    const ssize_t n =
        ::send(fd, queue->data() + *head, queue->size() - *head, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && TryAgainLater(errno)) {
      Compact(queue, head);
      return true;
    }
    if (n < 0) return false;
    *head += static_cast<std::size_t>(n);
  }
  queue->clear();
  *head = 0;
  return true;
}

bool SendFrame(int fd, std::span<const std::uint8_t> frame, std::vector<std::uint8_t>* queue,
               std::size_t* head) {
  if (frame.size() > kMaxFrame) {
    // Never made by this program (the engine splits its outputs well
    // below); the reader would take the connection for broken.
    std::fprintf(stderr, "ERROR ipc: dropped a frame of %zu bytes (at most %u)\n", frame.size(),
                 kMaxFrame);
    return true;
  }
  // A busy thread may not wait for room for a while: what waited goes first.
  if (*head < queue->size() && !WriteQueuedFrames(fd, queue, head)) return false;
  std::uint8_t length[4];
  StoreFrameLength(static_cast<std::uint32_t>(frame.size()), length);
  std::size_t written = 0;
  if (*head == queue->size()) {  // one system call for the length and the frame
    iovec parts[2] = {{length, sizeof length},
                      {const_cast<std::uint8_t*>(frame.data()), frame.size()}};
    msghdr m{};
    m.msg_iov = parts;
    m.msg_iovlen = 2;
    ssize_t n;
    do n = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && !TryAgainLater(errno)) return false;
    written = n < 0 ? 0 : static_cast<std::size_t>(n);
  }
  if (written < sizeof length)
    queue->insert(queue->end(), length + written, length + sizeof length);
  const std::size_t frame_written = written > sizeof length ? written - sizeof length : 0;
  queue->insert(queue->end(), frame.begin() + static_cast<std::ptrdiff_t>(frame_written),
                frame.end());
  Compact(queue, head);
  return true;
}

}  // namespace sightline::ipc
