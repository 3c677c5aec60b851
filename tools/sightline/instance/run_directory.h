// The private directory of a `sightline serve` instance for the engine's
// Unix sockets (0700), removed with everything in it when the
// instance stops. It is named after the registry instance: only one live
// instance can hold that name (Registry::Create refuses a live one), so a
// directory already there was left by a supervisor that was SIGKILLed, and is
// replaced (or removed by `sightline metrics remove`).
#pragma once

#include <string>

#include "sightline/status.h"

namespace sightline::cli {

// $XDG_RUNTIME_DIR (else /tmp) + "/sightline-" + instance.
std::string RunDirectoryPath(const std::string& instance);

class RunDirectory {
 public:
  RunDirectory() = default;
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;
  ~RunDirectory();

  // Replaces a leftover directory of the same name, then creates it.
  Status Create(const std::string& instance);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace sightline::cli
