// A blocking HTTP/1.1 test client on one keep-alive connection.
//
// Boost.Beast does the work (an HTTP parser independent of the server's own
// use of it would be better still, but Beast is a strict, well-kept one), in
// http_client.cc only: this header names no Boost type, so the dozen test
// files that use it do not each parse and instantiate Asio and Beast (about a
// third of such a file's compile time; tests/README.md, "Build time").
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sightline::testing {

class HttpClient {
 public:
  // One response as the client read it. The accessors are named as Beast's,
  // which the tests used before.
  struct Response {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> fields;  // as sent, in order
    std::string content;                                      // de-chunked

    int result_int() const { return status; }
    const std::string& body() const { return content; }
    // The first field of that name (case-insensitive), or "" if none.
    std::string operator[](std::string_view name) const;
    // Whether the body came in chunked transfer coding.
    bool chunked() const;
  };

  // Connects to 127.0.0.1:port; throws std::exception if it cannot, and
  // every later read or write when it fails. Reads block without a deadline
  // (Beast has none for blocking calls): ctest's per-test timeout bounds a
  // server that never answers.
  explicit HttpClient(int port);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request (Host set, Content-Length from `body`) and reads the
  // whole response.
  Response Request(std::string_view method, const std::string& target,
                   const std::map<std::string, std::string>& fields = {}, std::string body = "");
  Response Post(const std::string& target, const std::string& json) {
    return Request("POST", target, {{"Content-Type", "application/json"}}, json);
  }
  // As Request, but the body is handed to on_body piece by piece as it
  // arrives (de-chunked) rather than kept; the result has an empty body.
  Response Stream(std::string_view method, const std::string& target,
                  const std::map<std::string, std::string>& fields, std::string body,
                  const std::function<void(std::string_view)>& on_body);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sightline::testing
