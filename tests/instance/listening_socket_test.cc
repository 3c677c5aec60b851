// ListeningSocket: bound once by the supervisor for every API server.
#include "instance/listening_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace sightline::cli {
namespace {

bool Connects(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

TEST(ListeningSocket, PortZeroPicksAFreePortThatAccepts) {
  ListeningSocket s;
  ASSERT_TRUE(s.Bind("127.0.0.1", 0).ok());
  EXPECT_GE(s.fd(), 0);
  EXPECT_GT(s.port(), 0);
  EXPECT_TRUE(Connects(s.port()));  // listening: the kernel queues the connection
  s.Close();
  EXPECT_EQ(s.fd(), -1);
  EXPECT_FALSE(Connects(s.port()));
}

TEST(ListeningSocket, APortInUseFailsStartUpWithAMessage) {
  ListeningSocket first, second;
  ASSERT_TRUE(first.Bind("127.0.0.1", 0).ok());
  const Status s = second.Bind("127.0.0.1", first.port());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot listen on 127.0.0.1:" + std::to_string(first.port())),
            std::string::npos)
      << s.message();
  EXPECT_EQ(second.fd(), -1);
}

TEST(ListeningSocket, RefusesAPortOutOfRange) {
  ListeningSocket s;
  EXPECT_EQ(s.Bind("127.0.0.1", 70000).message(), "--port must be in [0, 65535]");
  EXPECT_EQ(s.Bind("127.0.0.1", -1).message(), "--port must be in [0, 65535]");
  EXPECT_EQ(s.fd(), -1);
}

}  // namespace
}  // namespace sightline::cli
