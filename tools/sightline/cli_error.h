// How every `sightline` subcommand reports a bad flag or a failed start:
// one line on stderr, exit status 1.
#pragma once

#include <iostream>
#include <string>

#include "sightline/status.h"

namespace sightline::cli {

inline int Fail(const std::string& message) {
  std::cerr << "sightline: error: " << message << "\n";
  return 1;
}
inline int Fail(const Status& s) {
  return Fail(s.message());
}

}  // namespace sightline::cli
