// Subprocess: one child of the `serve` supervisor, by its contract in
// subprocess.h: the exit status it reports, the readiness pipe, descriptors
// inherited at fixed numbers, and no child outliving its Subprocess.
#include "instance/subprocess.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "instance/instance_fixture.h"

namespace sightline::cli {
namespace {

using sightline::testing::Gone;
using sightline::testing::ScratchDir;
using sightline::testing::Sh;
using sightline::testing::WaitUntil;

// The child's exit status, once it has exited (-1: not within the ceiling).
int ExitOf(Subprocess* p) {
  int status = -1;
  WaitUntil([&] {
    if (auto s = p->PollExit()) status = *s;
    return status != -1;
  });
  return status;
}

TEST(Subprocess, ReportsReadinessAndTheExitStatus) {
  Subprocess p;
  ASSERT_TRUE(Subprocess::Start("child", Sh("printf x >&3; exit 5"), {}, &p).ok());
  EXPECT_EQ(p.name(), "child");
  EXPECT_TRUE(p.running());
  EXPECT_TRUE(WaitUntil([&] { return p.PollReady(); }));
  const int status = ExitOf(&p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 5);
  EXPECT_EQ(DescribeExit(status), "exit status 5");
  EXPECT_FALSE(p.running());
  EXPECT_FALSE(p.PollExit().has_value());  // reaped once
}

TEST(Subprocess, NeverReadyWithoutTheByte) {
  Subprocess p;
  ASSERT_TRUE(Subprocess::Start("child", Sh("exit 0"), {}, &p).ok());
  ASSERT_TRUE(WIFEXITED(ExitOf(&p)));
  EXPECT_FALSE(p.PollReady());
}

TEST(Subprocess, DescribesADeathBySignal) {
  Subprocess p;
  ASSERT_TRUE(Subprocess::Start("child", Sh("kill -9 $$"), {}, &p).ok());
  const int status = ExitOf(&p);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(DescribeExit(status).rfind("signal 9", 0), 0u) << DescribeExit(status);
}

TEST(Subprocess, InheritedDescriptorsComeFirstThenTheReadinessPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  Subprocess p;
  // Two inherited descriptors: 3 and 4; the readiness pipe is then 5.
  EXPECT_EQ(Subprocess::ReadyFd(2), 5);
  ASSERT_TRUE(
      Subprocess::Start("child", Sh("printf hi >&3; printf x >&5"), {fds[1], fds[1]}, &p).ok());
  close(fds[1]);
  char buf[8] = {};
  EXPECT_EQ(read(fds[0], buf, 2), 2);
  EXPECT_EQ(std::string(buf, 2), "hi");
  EXPECT_TRUE(WaitUntil([&] { return p.PollReady(); }));
  close(fds[0]);
}

// A supervisor of 64 engines hands each API server 65 sockets: every one
// arrives at its number, each its own (the k-th writes its number), and the
// readiness pipe comes after them; the child's environment and CPUs are
// those asked for.
TEST(Subprocess, ManyInheritedDescriptorsEnvironmentAndCpus) {
  constexpr int kFds = 66;
  std::vector<int> reads, writes;
  for (int i = 0; i < kFds; ++i) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    reads.push_back(fds[0]);
    writes.push_back(fds[1]);
  }
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  ChildSetup setup;
  setup.env = {"SIGHTLINE_TEST_VAR=yes", "HOME=/nowhere"};
  setup.cpus = {cpu};
  const std::string script =
      "i=3; while [ $i -lt " + std::to_string(3 + kFds) +
      " ]; do printf \"$i\" >&$i || exit 1; i=$((i+1)); done; "
      "[ \"$SIGHTLINE_TEST_VAR\" = yes ] && [ \"$HOME\" = /nowhere ] || exit 2; "
      "grep -q \"^Cpus_allowed_list:[[:space:]]*" +
      std::to_string(cpu) + "$\" /proc/self/status || exit 3; printf x >&" +
      std::to_string(Subprocess::ReadyFd(kFds));
  Subprocess p;
  // bash: dash redirects only descriptors 0-9.
  ASSERT_TRUE(Subprocess::Start("child", {"/bin/bash", "-c", script}, writes, &p, setup).ok());
  for (int fd : writes) close(fd);
  EXPECT_TRUE(WaitUntil([&] { return p.PollReady(); }));
  const int status = ExitOf(&p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int i = 0; i < kFds; ++i) {
    char buf[8] = {};
    EXPECT_EQ(read(reads[i], buf, sizeof buf), static_cast<ssize_t>(std::to_string(3 + i).size()));
    EXPECT_EQ(std::string(buf), std::to_string(3 + i));
    close(reads[i]);
  }
}

TEST(Subprocess, OtherDescriptorsAreNotInherited) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);  // not close-on-exec, and not passed
  Subprocess p;
  ASSERT_TRUE(Subprocess::Start("child", Sh("printf x >&3; exec sleep 600"), {}, &p).ok());
  ASSERT_TRUE(WaitUntil([&] { return p.PollReady(); }));
  // What the child holds: stdin, stdout, stderr and the readiness pipe.
  std::set<std::string> held;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(p.pid()) + "/fd"))
    held.insert(e.path().filename().string());
  EXPECT_EQ(held, (std::set<std::string>{"0", "1", "2", "3"}));
  close(fds[0]);
  close(fds[1]);
}

TEST(Subprocess, DestroyingOneKillsAndReapsItsChild) {
  pid_t pid = 0;
  {
    Subprocess p;
    ASSERT_TRUE(Subprocess::Start("child", Sh("printf x >&3; exec sleep 600"), {}, &p).ok());
    pid = p.pid();
    ASSERT_TRUE(WaitUntil([&] { return p.PollReady(); }));
    Subprocess moved = std::move(p);  // moving hands the child over, once
    EXPECT_FALSE(p.running());
    EXPECT_EQ(moved.pid(), pid);
  }
  EXPECT_TRUE(Gone(pid));
}

TEST(Subprocess, AMissingExecutableExits127) {
  Subprocess p;
  ASSERT_TRUE(Subprocess::Start("child", {"/nonexistent/sightline-child"}, {}, &p).ok());
  const int status = ExitOf(&p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 127);
}

}  // namespace
}  // namespace sightline::cli
