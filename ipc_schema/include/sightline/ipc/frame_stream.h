// The engine <-> API-server transport: length-prefixed frames over Unix
// stream sockets (DESIGN.md §2).
//
// The engine listens on two sockets (StreamListener): requests come in on
// one, outputs go out on the other. Each API server connects to both
// (StreamConnection) and sends one hello frame on each, its identity
// (ipc/client_identity.h); every frame the engine reads is from the process
// its connection's hello named, and the engine sends a frame to the
// connection whose hello named the process that owns it. A frame for an
// identity not connected is dropped, and a second connection with an
// identity replaces the first (what ZeroMQ's ROUTER with ROUTER_HANDOVER
// did). Frames never drop once queued: what a slow reader's socket does not
// take waits in the sender, unbounded (an API server silent past its
// heartbeat timeout gets its abort outputs, then only LoRA changes).
//
// Why by hand, not ZeroMQ (which this replaced): ZeroMQ reads and writes a
// socket on its own I/O thread and hands each message across through a
// mailbox, which cost an API server about 14 system calls and a thread
// wake-up per engine step and about 15 per request sent, most of all its
// system calls (issue 46). Here the thread that wants the bytes reads or
// writes the socket itself: a poll() and a read() per engine step, a
// sendmsg() per request.
//
// Wire: a frame is its length (4 bytes, little-endian, at most kMaxFrame)
// and that many bytes. Addresses are ZeroMQ's ipc:// spelling:
// "ipc://<path>", or "ipc://@<name>" for Linux's abstract namespace.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <string_view>

#include "sightline/status.h"

namespace sightline::ipc {

inline constexpr std::uint32_t kMaxFrame = 1u << 30;
inline constexpr std::uint32_t kMaxHelloFrame = 64;

// "ipc://<path>" or "ipc://@<name>" -> a socket address; a clear error for
// anything else (tcp://, ZeroMQ's ipc://*, a path too long for sun_path).
Status ParseUnixAddress(std::string_view address, sockaddr_un* out, socklen_t* length);
// The same check for a command-line flag: "FLAG: 'ADDRESS': why".
Status CheckUnixAddress(std::string_view flag, std::string_view address);

}  // namespace sightline::ipc
