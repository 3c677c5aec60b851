#include "sightline/tracing/detailed_traces.h"

#include <string>

namespace sightline::tracing {

Status ParseDetailedTraces(std::string_view value, DetailedTraces* out) {
  DetailedTraces d;
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view one = value.substr(0, comma);
    if (one == "model" || one == "all") d.model = true;
    if (one == "worker" || one == "all") d.worker = true;
    if (one != "model" && one != "worker" && one != "all")
      return Status::InvalidArgument("--collect-detailed-traces: '" + std::string(one) +
                                     "' is not model, worker or all");
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
    if (value.empty())
      return Status::InvalidArgument("--collect-detailed-traces: an empty value after ','");
  }
  *out = d;
  return Status::Ok();
}

}  // namespace sightline::tracing
