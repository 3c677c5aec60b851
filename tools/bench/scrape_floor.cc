// The least a /metrics answer can cost on this machine: a server with no
// work to do (issue 46). It answers every request on a kept-alive
// connection with the same prepared bytes (a gzip'd page and its headers),
// one blocking thread per connection, so that scrape_latency.py --floor can
// time it under the same load as the API server: what is left is the
// kernel's and the scheduler's part of a scrape, which no server avoids.
//
//   build/tools/bench/scrape_floor PORT BODY_FILE   (BODY_FILE: gzip'd page)
//
// PORT 0: a free port, chosen by the kernel. Prints "listening on PORT" once
// it listens. Loopback only; runs until killed. Hand-written rather than an HTTP
// library: a library's own work is what this leaves out.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

namespace {

void Serve(int fd, const std::string& answer) {
  std::string in;
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
    // Every request is a GET without a body: each "\r\n\r\n" ends one.
    for (std::size_t end; (end = in.find("\r\n\r\n")) != std::string::npos;) {
      in.erase(0, end + 4);
      for (std::size_t off = 0; off < answer.size();) {
        const ssize_t w = send(fd, answer.data() + off, answer.size() - off, MSG_NOSIGNAL);
        if (w <= 0) {
          close(fd);
          return;
        }
        off += static_cast<std::size_t>(w);
      }
    }
  }
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: scrape_floor PORT BODY_FILE\n");
    return 2;
  }
  std::ifstream f(argv[2], std::ios::binary);
  const std::string body((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f.good() && !f.eof()) {
    std::fprintf(stderr, "scrape_floor: cannot read %s\n", argv[2]);
    return 1;
  }
  const std::string answer =
      "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; "
      "charset=utf-8\r\nContent-Encoding: gzip\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  const int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) {
    std::perror("scrape_floor: socket");
    return 1;
  }
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[1])));
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(ls, 64) != 0) {
    std::perror("scrape_floor: bind/listen");
    return 1;
  }
  socklen_t length = sizeof a;
  getsockname(ls, reinterpret_cast<sockaddr*>(&a), &length);
  std::printf("listening on %u\n", ntohs(a.sin_port));
  std::fflush(stdout);
  for (;;) {
    const int fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread(Serve, fd, std::cref(answer)).detach();
  }
}
