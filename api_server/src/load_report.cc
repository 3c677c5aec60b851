#include "load_report.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

namespace sightline::api {

namespace {

class LoadReportResponder : public Responder {
 public:
  LoadReportResponder(std::shared_ptr<Responder> out, std::function<std::string()> value)
      : out_(std::move(out)), value_(std::move(value)) {}
  void Send(HttpResponse response) override {
    response.headers["endpoint-load-metrics"] = value_();
    out_->Send(std::move(response));
  }
  void StartStream(int status, std::string content_type,
                   std::map<std::string, std::string> headers) override {
    out_->StartStream(status, std::move(content_type), std::move(headers));
  }
  void Write(std::string chunk) override { out_->Write(std::move(chunk)); }
  void End(std::string last_chunk) override { out_->End(std::move(last_chunk)); }
  void OnDisconnect(std::function<void()> callback) override {
    out_->OnDisconnect(std::move(callback));
  }

 private:
  std::shared_ptr<Responder> out_;
  std::function<std::string()> value_;
};

}  // namespace

LoadReportFormat RequestedLoadReport(const HttpRequest& request) {
  auto it = request.headers.find("endpoint-load-metrics-format");
  if (it == request.headers.end()) return LoadReportFormat::kNone;
  std::string v = it->second;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "text") return LoadReportFormat::kText;
  if (v == "json") return LoadReportFormat::kJson;
  return LoadReportFormat::kNone;
}

std::string PythonFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string LoadReportHeader(LoadReportFormat format, double kv, double waiting) {
  if (format == LoadReportFormat::kText)
    return "TEXT named_metrics.kv_cache_usage_perc=" + PythonFloat(kv) +
           ", named_metrics.num_requests_waiting=" + PythonFloat(waiting);
  return "JSON {\"named_metrics\": {\"kv_cache_usage_perc\": " + PythonFloat(kv) +
         ", \"num_requests_waiting\": " + PythonFloat(waiting) + "}}";
}

void ReadLoadReport(metrics::Registry* registry, double* kv, double* waiting) {
  *kv = 0;
  *waiting = 0;
  std::istringstream page(registry->Render(metrics::ExpositionFormat::kPrometheusText));
  for (std::string line; std::getline(page, line);) {
    const bool is_kv = line.rfind("vllm:kv_cache_usage_perc{", 0) == 0;
    const bool is_waiting = line.rfind("vllm:num_requests_waiting{", 0) == 0;
    if (!is_kv && !is_waiting) continue;
    const std::size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    double value = 0;
    const char* first = line.data() + space + 1;
    if (std::from_chars(first, line.data() + line.size(), value).ec != std::errc()) continue;
    if (is_kv)
      *kv = std::max(*kv, value);
    else
      *waiting += value;
  }
}

std::shared_ptr<Responder> WithLoadReport(std::shared_ptr<Responder> out,
                                          std::function<std::string()> value) {
  return std::make_shared<LoadReportResponder>(std::move(out), std::move(value));
}

}  // namespace sightline::api
