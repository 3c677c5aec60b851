// Runs `promtool check metrics` (Debian package 'prometheus') on a page, the
// reference validator of the Prometheus text format.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sightline::testing {

// promtool's exit code (0 clean, 3 lint findings only, 1 a parse error) with
// its output appended to *output; -1 when promtool is not installed.
inline int Promtool(const std::string& page, std::string* output) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return -1;
  char path[] = "/tmp/sightline-promtool-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return -1;
  for (std::size_t off = 0; off < page.size();) {
    const ssize_t n = write(fd, page.data() + off, page.size() - off);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  close(fd);
  FILE* p = popen(("promtool check metrics < " + std::string(path) + " 2>&1").c_str(), "r");
  char buf[4096];
  std::size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  const int status = p ? pclose(p) : -1;
  unlink(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace sightline::testing
