// Reading JSON request bodies: one bounded parser for every endpoint, typed
// reads of fields that name the field when it is wrong (OpenAI `messages`:
// chat_messages.h).
// Internal to the API server.
//
// A body is hostile input. nlohmann's dump() and copies recurse, and its
// value(key, default) and get<T>() throw on another type; so a body is
// parsed once, with its nesting bounded before the parser sees it, and every
// field is read through the checks below, which never throw.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "openai/request_error.h"

namespace sightline::api {

// Deeper than any OpenAI body (a chat body is 5 levels), shallow enough that
// the recursive parts of nlohmann (dump, copies, comparisons) stay cheap.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` as JSON nested at most kMaxJsonDepth deep (the depth is
// found by a linear scan first, so deeper input never reaches the parser).
// `what` names the text in errors ("the body").
bool ParseBoundedJson(std::string_view text, const char* what, nlohmann::json* out,
                      RequestError* error);
// The same, and the body must be a JSON object.
bool ParseJsonObject(std::string_view body, nlohmann::json* out, RequestError* error);

// `s` for an error message: quoted, and cut to 64 bytes (a client may send
// megabytes; ErrorResponse repairs a cut UTF-8 sequence).
std::string Quote(const std::string& s);

// An integer JSON value in [lo, hi]. An integral float (2.0) counts, as it
// does for vLLM (pydantic); 1.5, 1e300 and other types do not.
bool AsInteger(const nlohmann::json& v, std::int64_t lo, std::int64_t hi, std::int64_t* out);

// Typed reads of the fields of one JSON object. Every read treats an absent
// or null field as "not given" (leaves *out, returns true); a field of
// another type or out of range fills the error, naming the field, and
// returns false.
class Fields {
 public:
  // `object` (an object) and `error` must outlive this; `path` is the
  // object's own name in errors, "" for the body itself.
  Fields(const nlohmann::json& object, std::string path, RequestError* error);

  // The field, or nullptr if absent or null.
  const nlohmann::json* Find(const char* key) const;
  // The field's full name: "stream_options.include_usage".
  std::string Name(const char* key) const;
  // Fills the error: "'<name>' <why>", param <name>. Returns false.
  bool Fail(const char* key, const std::string& why, int status = 400) const;

  bool Bool(const char* key, bool* out) const;
  bool String(const char* key, std::string* out) const;
  bool Integer(const char* key, std::int64_t lo, std::int64_t hi, std::int64_t* out) const;
  bool Number(const char* key, double lo, double hi, double* out) const;
  // Must be an object (or absent): for nested options and `metadata`.
  bool Object(const char* key) const;

  // Narrowing forms; [lo, hi] must fit T.
  template <typename T>
  bool Integer(const char* key, std::int64_t lo, std::int64_t hi, T* out) const {
    std::int64_t v = 0;
    if (!Find(key)) return true;
    if (!Integer(key, lo, hi, &v)) return false;
    *out = static_cast<T>(v);
    return true;
  }
  template <typename T>
  bool Number(const char* key, double lo, double hi, T* out) const {
    double v = 0;
    if (!Find(key)) return true;
    if (!Number(key, lo, hi, &v)) return false;
    *out = static_cast<T>(v);
    return true;
  }

 private:
  const nlohmann::json& object_;
  std::string path_;
  RequestError* error_;
};

}  // namespace sightline::api
