// Optional white space (spaces and tabs) around a value, as the W3C
// headers and the OTEL_* lists allow it. Internal to the tracing library.
#pragma once

#include <string_view>

namespace sightline::tracing {

inline std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace sightline::tracing
