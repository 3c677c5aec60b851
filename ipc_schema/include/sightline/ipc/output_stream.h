// The engine -> API-server output path: length-prefixed frames over a Unix
// stream socket (DESIGN.md §2).
//
// Requests go to the engine over ZeroMQ; outputs come back over this. Why by
// hand: ZeroMQ reads a socket on its own I/O thread and hands each message to
// the receiving thread through a mailbox, and that hand-over cost the API
// server about 14 system calls (poll, getpid, read, futex) and a thread
// wake-up per engine step, two thirds of all its system calls (issue 46).
// Here the API server's engine thread reads the socket itself: a poll() and
// a read() per step, several steps per read when it falls behind.
//
// The engine listens (OutputListener); each API server connects
// (OutputReceiver) and sends one hello frame, its identity
// (ipc/client_identity.h). The engine sends a frame to the connection whose
// hello named the process that owns it; a frame for an identity not
// connected is dropped, and a second connection with an identity replaces
// the first (ZeroMQ's ROUTER with ROUTER_HANDOVER did both). Frames never
// drop once queued: what a slow reader's socket does not take waits in the
// engine, unbounded (the engine stops sending to an API server silent past
// its heartbeat timeout).
//
// Wire: a frame is its length (4 bytes, little-endian, at most
// kMaxOutputFrame) and that many bytes. Addresses are ZeroMQ's ipc://
// spelling: "ipc://<path>", or "ipc://@<name>" for Linux's abstract namespace.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "sightline/status.h"

namespace sightline::ipc {

inline constexpr std::uint32_t kMaxOutputFrame = 1u << 30;
inline constexpr std::uint32_t kMaxHelloFrame = 64;

// "ipc://<path>" or "ipc://@<name>" -> a socket address; a clear error for
// anything else (tcp://, a path too long for sun_path).
Status ParseUnixAddress(std::string_view address, sockaddr_un* out, socklen_t* length);

}  // namespace sightline::ipc
