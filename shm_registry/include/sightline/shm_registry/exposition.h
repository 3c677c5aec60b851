// Exposition helpers: content negotiation and the number/escaping rules of the
// Prometheus text format 0.0.4 and OpenMetrics 1.0, written to match Python's
// prometheus_client byte for byte (METRICS.md §1).
#pragma once

#include <string>
#include <string_view>

#include "sightline/shm_registry/registry.h"

namespace sightline::metrics {

// OpenMetrics when the Accept header asks for application/openmetrics-text
// (as prometheus_client's choose_encoder), else the text format 0.0.4.
ExpositionFormat ChooseFormat(std::string_view accept_header);
std::string_view ContentType(ExpositionFormat format);

// prometheus_client's floatToGoString: Python repr() (shortest round trip,
// "1.0" for integral values), "+Inf"/"-Inf"/"NaN", and Go-style exponent form
// once a positive value's integer part has more than 6 digits ("1e+06").
void AppendDouble(std::string* out, double value);
std::string FormatDouble(double value);

// Escaping: label values escape \ " and newline; HELP escapes \ and newline
// (and " as well in OpenMetrics).
void AppendEscapedLabelValue(std::string* out, std::string_view value);
void AppendEscapedHelp(std::string* out, std::string_view help, ExpositionFormat format);

}  // namespace sightline::metrics
