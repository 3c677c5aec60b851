// Frames out onto a non-blocking stream socket (frame_stream.h's wire), for
// both ends: written at once when nothing waits, else queued behind what
// does. The queue is a vector and the index of its first unwritten byte.
// Internal to the ipc library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sightline::ipc {

// Writes [*head, end) of `queue` until the socket is full; false if the
// socket failed. Empties the queue once all is written.
bool WriteQueuedFrames(int fd, std::vector<std::uint8_t>* queue, std::size_t* head);
// Sends `frame` (its length first) after what is queued: one sendmsg when
// nothing waits; what the socket does not take is queued. False if the
// socket failed.
bool SendFrame(int fd, std::span<const std::uint8_t> frame, std::vector<std::uint8_t>* queue,
               std::size_t* head);

}  // namespace sightline::ipc
