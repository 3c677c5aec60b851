// Load and scrape helpers for the end-to-end tests: completions from several
// client threads, and a scraper that checks every /metrics page it gets.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/http_client.h"
#include "support/scrape.h"

namespace sightline::testing {

// One completion request's fate as its client saw it.
struct Outcome {
  bool ok = false;           // 200 and, when streaming, "data: [DONE]" last
  bool error_event = false;  // a stream that ended with an error event
  int status = 0;
  std::string failure;  // what went wrong otherwise (e.g. connection reset)
};

inline Outcome Complete(int port, int prompt_chars, int max_tokens, bool stream) {
  nlohmann::json body = {{"prompt", std::string(static_cast<std::size_t>(prompt_chars), 'a')},
                         {"max_tokens", max_tokens},
                         {"ignore_eos", true},
                         {"temperature", 0},
                         {"stream", stream}};
  Outcome o;
  try {
    auto r = HttpClient(port).Post("/v1/completions", body.dump());
    o.status = r.result_int();
    const std::string& b = r.body();
    if (stream) {
      o.error_event = b.find("data: {\"error\"") != std::string::npos;
      o.ok = o.status == 200 && b.size() >= 14 && b.ends_with("data: [DONE]\n\n");
    } else {
      o.ok = o.status == 200;
    }
    if (!o.ok) o.failure = "status " + std::to_string(o.status) + ": " + b.substr(0, 200);
  } catch (const std::exception& e) {
    o.failure = e.what();
  }
  return o;
}

// Scrapes /metrics over a new connection each time until stopped. Every page
// must parse, and no counter, histogram or summary sample may ever go down.
class Scraper {
 public:
  explicit Scraper(int port) : port_(port), thread_([this] { Run(); }) {}
  ~Scraper() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int scrapes() const { return scrapes_; }
  std::vector<std::string> problems() {
    std::lock_guard<std::mutex> g(mu_);
    return problems_;
  }

  // Checks one page against the previous maxima; returns its samples.
  std::map<std::string, double> Check(const std::string& page) {
    static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$)");
    std::map<std::string, std::string> types;  // family -> type
    std::map<std::string, double> samples;
    std::istringstream in(page);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("# TYPE ", 0) == 0) {
        std::istringstream t(line.substr(7));
        std::string name, type;
        t >> name >> type;
        types[name] = type;
        continue;
      }
      if (line.empty() || line[0] == '#') continue;
      std::smatch m;
      char* end = nullptr;
      if (!std::regex_match(line, m, sample)) {
        Problem("unparsable line: " + line);
        continue;
      }
      const std::string v = m[3];
      const double x = std::strtod(v.c_str(), &end);
      if (end != v.c_str() + v.size()) Problem("bad value: " + line);
      samples[m[1].str() + m[2].str()] = x;
      if (Monotonic(m[1], types)) {
        const std::string key = m[1].str() + m[2].str();
        std::lock_guard<std::mutex> g(mu_);
        auto it = max_.find(key);
        // Exact, fractional sums included: the registry sums those in an
        // order-independent way (shm_registry/src/exact_sum.h).
        if (it != max_.end() && x < it->second) {
          char msg[128];
          std::snprintf(msg, sizeof msg, " went down from %.17g to %.17g", it->second, x);
          problems_.push_back(key + msg);
        }
        max_[key] = std::max(x, it == max_.end() ? x : it->second);
      }
    }
    return samples;
  }

 private:
  static bool Monotonic(const std::string& name, const std::map<std::string, std::string>& types) {
    auto type_of = [&](const std::string& family) {
      auto it = types.find(family);
      return it == types.end() ? std::string() : it->second;
    };
    std::string t = type_of(name);
    for (const char* suffix : {"_total", "_count", "_sum", "_bucket"}) {
      if (!t.empty()) break;
      if (name.ends_with(suffix)) t = type_of(name.substr(0, name.size() - std::strlen(suffix)));
    }
    return t == "counter" || t == "histogram" || t == "summary";
  }
  void Problem(const std::string& p) {
    std::lock_guard<std::mutex> g(mu_);
    problems_.push_back(p);
  }
  void Run() {
    while (!stop_) {
      try {
        auto r = HttpClient(port_).Request("GET", "/metrics");
        if (r.result_int() == 200) {
          Check(r.body());
          ++scrapes_;
        } else {
          Problem("/metrics answered " + std::to_string(r.result_int()));
        }
      } catch (const std::exception&) {
        // A connection landing on an API server that is being killed: not a
        // page, so nothing to check.
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> scrapes_{0};
  std::mutex mu_;
  std::map<std::string, double> max_;
  std::vector<std::string> problems_;
  std::thread thread_;
};

inline std::map<std::string, double> Scrape(int port) {
  auto r = HttpClient(port).Request("GET", "/metrics");
  return ParseSamples(r.body());
}

// The key of an engine-labelled sample of the built-in model:
// `name{engine="0",<extra>model_name=...}`.
inline std::string Key(const std::string& name, const std::string& extra = "") {
  return name + "{engine=\"0\"," + extra + "model_name=\"sightline-tiny\"}";
}

// Polls the scraped page until pred(page) holds (at most timeout).
template <typename Pred>
bool WaitForPage(int port, Pred pred,
                 std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (pred(Scrape(port))) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace sightline::testing
