// Status: the explicit error type used across Sightline (LevelDB style).
// A Status is either OK or carries a code and a one-line message meant for an
// operator ("registry 'x': segment has layout version 3, this build reads 4").
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace sightline {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,    // the caller asked for something malformed
    kNotFound,           // e.g. no such shared-memory segment
    kAlreadyExists,      // e.g. a live instance already owns the segment
    kPermissionDenied,   // e.g. a segment created by another user
    kResourceExhausted,  // a fixed capacity was hit
    kIncompatible,       // e.g. a segment of another layout version
    kIoError,            // a system call failed
  };

  Status() = default;
  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {Code::kResourceExhausted, std::move(m)};
  }
  static Status Incompatible(std::string m) { return {Code::kIncompatible, std::move(m)}; }
  static Status IoError(std::string m) { return {Code::kIoError, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const { return ok() ? "OK" : message_; }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace sightline
