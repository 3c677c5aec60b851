#include "openai/json_body.h"

#include <cmath>

namespace sightline::api {

using nlohmann::json;

namespace {

// Whether the brackets of `text` nest deeper than `limit`, counted outside
// strings. Exact for valid JSON; for invalid JSON the answer does not matter,
// since the parser refuses it (iteratively: only dump() and copies recurse).
bool NestsDeeperThan(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

bool ParseBoundedJson(std::string_view text, const char* what, json* out, RequestError* error) {
  if (NestsDeeperThan(text, kMaxJsonDepth))
    return Refuse(
        error, "",
        std::string(what) + " is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  *out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return Refuse(error, "", std::string(what) + " is not valid JSON");
  return true;
}

bool ParseJsonObject(std::string_view body, json* out, RequestError* error) {
  if (!ParseBoundedJson(body, "the body", out, error)) return false;
  if (!out->is_object()) return Refuse(error, "", "the body is not a JSON object");
  return true;
}

std::string Quote(const std::string& s) {
  constexpr std::size_t kMax = 64;
  return "'" + s.substr(0, kMax) + (s.size() > kMax ? "...'" : "'");
}

bool AsInteger(const json& v, std::int64_t lo, std::int64_t hi, std::int64_t* out) {
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {  // may exceed int64
    const auto u = v.get<std::uint64_t>();
    if (hi < 0 || u > static_cast<std::uint64_t>(hi)) return false;
    x = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // Outside int64 the cast would be undefined; 2^63 is exact in a double.
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || std::floor(d) != d)
      return false;
    x = static_cast<std::int64_t>(d);
  } else {
    return false;
  }
  if (x < lo || x > hi) return false;
  *out = x;
  return true;
}

Fields::Fields(const json& object, std::string path, RequestError* error)
    : object_(object), path_(std::move(path)), error_(error) {}

const json* Fields::Find(const char* key) const {
  if (!object_.is_object()) return nullptr;
  const auto it = object_.find(key);
  return it == object_.end() || it->is_null() ? nullptr : &*it;
}

std::string Fields::Name(const char* key) const {
  return path_.empty() ? std::string(key) : path_ + "." + key;
}

bool Fields::Fail(const char* key, const std::string& why, int status) const {
  error_->status = status;
  error_->param = Name(key);
  error_->message = "'" + error_->param + "' " + why;
  return false;
}

bool Fields::Bool(const char* key, bool* out) const {
  const json* v = Find(key);
  if (!v) return true;
  if (!v->is_boolean()) return Fail(key, "must be a boolean");
  *out = v->get<bool>();
  return true;
}

bool Fields::String(const char* key, std::string* out) const {
  const json* v = Find(key);
  if (!v) return true;
  if (!v->is_string()) return Fail(key, "must be a string");
  *out = v->get<std::string>();
  return true;
}

bool Fields::Integer(const char* key, std::int64_t lo, std::int64_t hi, std::int64_t* out) const {
  const json* v = Find(key);
  if (!v) return true;
  if (!AsInteger(*v, lo, hi, out))
    return Fail(key,
                "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return true;
}

bool Fields::Number(const char* key, double lo, double hi, double* out) const {
  const json* v = Find(key);
  if (!v) return true;
  if (!v->is_number()) return Fail(key, "must be a number");
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi))
    return Fail(key, "must be in [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  *out = d;
  return true;
}

bool Fields::Object(const char* key) const {
  const json* v = Find(key);
  if (v && !v->is_object()) return Fail(key, "must be an object");
  return true;
}

}  // namespace sightline::api
