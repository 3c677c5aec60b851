// ArgvBuilder: a child process's command line from option values, for the
// supervisor to hand each role the flags it was given (EngineArgs,
// ApiServerArgs). Doubles keep 17 digits, so they survive the round trip.
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace sightline::cli {

class ArgvBuilder {
 public:
  template <typename T>
  void Add(std::string flag, const T& value) {
    std::ostringstream text;
    text.precision(17);
    text << value;
    args_.push_back(std::move(flag));
    args_.push_back(text.str());
  }
  void Flag(std::string flag) { args_.push_back(std::move(flag)); }
  void Positional(std::string value) { args_.push_back(std::move(value)); }
  std::vector<std::string> Take() { return std::move(args_); }

 private:
  std::vector<std::string> args_;
};

}  // namespace sightline::cli
