#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "sightline/shm_registry/exposition.h"

namespace sightline::metrics {

ExpositionFormat ChooseFormat(std::string_view accept) {
  // prometheus_client picks OpenMetrics whenever any accepted type is
  // application/openmetrics-text; q-values do not demote it there either.
  std::size_t pos = 0;
  while (pos <= accept.size()) {
    std::size_t comma = accept.find(',', pos);
    if (comma == std::string_view::npos) comma = accept.size();
    std::string_view item = accept.substr(pos, comma - pos);
    std::size_t semi = item.find(';');
    std::string_view type = item.substr(0, semi);
    while (!type.empty() && std::isspace(static_cast<unsigned char>(type.front())))
      type.remove_prefix(1);
    while (!type.empty() && std::isspace(static_cast<unsigned char>(type.back())))
      type.remove_suffix(1);
    if (type == "application/openmetrics-text") return ExpositionFormat::kOpenMetrics;
    pos = comma + 1;
  }
  return ExpositionFormat::kPrometheusText;
}

std::string_view ContentType(ExpositionFormat format) {
  return format == ExpositionFormat::kOpenMetrics
             ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
             : "text/plain; version=0.0.4; charset=utf-8";
}

namespace {

// Python repr(float): shortest round-trip digits, fixed notation when the
// decimal exponent is in [-4, 16), scientific otherwise, ".0" on integers.
// std::to_chars gives the shortest digits; only the layout is Python's.
std::string PythonRepr(double value) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  std::string out;
  if (sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits.push_back(c);
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int n = static_cast<int>(digits.size());
  const int decpt = exponent + 1;  // digits before the decimal point
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<std::size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decpt));
      out += '.';
      out += digits.substr(static_cast<std::size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += exponent < 0 ? "e-" : "e+";
  const int mag = std::abs(exponent);
  if (mag < 10) out += '0';
  out += std::to_string(mag);
  return out;
}

}  // namespace

void AppendDouble(std::string* out, double value) {
  if (std::isnan(value)) {
    *out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    *out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  // Fast path for the common case of small integral values (token counts,
  // bucket counts): same output as the general path, without to_chars.
  if (value >= 0 && value < 1e6 && value == std::floor(value) && !std::signbit(value)) {
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, static_cast<std::uint64_t>(value));
    out->append(buf, res.ptr);
    *out += ".0";
    return;
  }
  std::string s = PythonRepr(value);
  const std::size_t dot = s.find('.');
  // floatToGoString: Go switches to exponent form sooner than Python.
  if (value > 0 && dot != std::string::npos && dot > 6) {
    std::string mantissa = s.substr(0, 1) + "." + s.substr(1, dot - 1) + s.substr(dot + 1);
    while (!mantissa.empty() && (mantissa.back() == '0' || mantissa.back() == '.'))
      mantissa.pop_back();
    // Go's strconv.FormatFloat(v, 'g', -1, 64): the exponent has at least two
    // digits ("1e+06", "1e+10"). client_python wrote "1e+010" before its fix
    // (#1190); as an `le` label that is another value, so Go's form it is.
    *out += mantissa;
    *out += dot - 1 < 10 ? "e+0" : "e+";
    *out += std::to_string(dot - 1);
    return;
  }
  *out += s;
}

std::string FormatDouble(double value) {
  std::string s;
  AppendDouble(&s, value);
  return s;
}

void AppendEscapedLabelValue(std::string* out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        *out += "\\\\";
        break;
      case '"':
        *out += "\\\"";
        break;
      case '\n':
        *out += "\\n";
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendEscapedHelp(std::string* out, std::string_view help, ExpositionFormat format) {
  for (char c : help) {
    switch (c) {
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '"':
        if (format == ExpositionFormat::kOpenMetrics) {
          *out += "\\\"";
          break;
        }
        [[fallthrough]];
      default:
        out->push_back(c);
    }
  }
}

}  // namespace sightline::metrics
