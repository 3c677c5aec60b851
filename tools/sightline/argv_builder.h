// ArgvBuilder: a child process's command line from option values, for the
// supervisor to hand each role the flags it was given (EngineArgs,
// ApiServerArgs). Doubles are written in their shortest exact form, so they
// survive the round trip.
#pragma once

#include <charconv>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace sightline::cli {

class ArgvBuilder {
 public:
  template <typename T>
  void Add(std::string flag, const T& value) {
    args_.push_back(std::move(flag));
    if constexpr (std::is_floating_point_v<T>) {
      char text[64];  // the shortest text that reads back as the same double
      args_.push_back(std::string(text, std::to_chars(text, text + sizeof text, value).ptr));
    } else {
      std::ostringstream text;
      text << value;
      args_.push_back(text.str());
    }
  }
  void Flag(std::string flag) { args_.push_back(std::move(flag)); }
  void Positional(std::string value) { args_.push_back(std::move(value)); }
  std::vector<std::string> Take() { return std::move(args_); }

 private:
  std::vector<std::string> args_;
};

}  // namespace sightline::cli
