// `sightline metrics demo`: the registry at work without a server. Starts an
// instance, forks worker processes that record request metrics, SIGKILLs one,
// and shows that the aggregate keeps its counts while its live gauges vanish.
#include "metrics_demo.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "metrics_command.h"
#include "sightline/api_server/http_families.h"
#include "sightline/api_server/request_families.h"
#include "sightline/engine_core/engine_families.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::cli {

namespace {

using metrics::Labels;

constexpr char kModel[] = "sightline-demo";
constexpr std::uint32_t kMaxModelLen = 1024;

// The families of a full instance: the engine's, the requests' and the HTTP
// ones (their series appear as the workers write them).
Status RegisterFamilies(metrics::Registry* reg) {
  api::RequestFamilies request;
  engine::EngineFamilies engine;
  api::HttpFamilies http;
  Status s = api::RequestFamilies::Register(reg, kMaxModelLen, &request);
  if (s.ok()) s = engine::EngineFamilies::Register(reg, false, &engine);
  if (s.ok()) s = api::HttpFamilies::Register(reg, &http);
  return s;
}

// Records `requests` finished requests the way an API server would. The
// returned attachment keeps the process's slot (and live gauges) alive.
std::unique_ptr<metrics::Registry> RecordRequests(const std::string& instance, int index,
                                                  int requests) {
  std::unique_ptr<metrics::Registry> reg;
  if (!metrics::Registry::Attach(instance, "api-server-" + std::to_string(index), &reg).ok())
    _exit(1);
  // The families as the API server and the engine define them.
  api::RequestFamilies request;
  engine::EngineFamilies engine;
  if (!api::RequestFamilies::Register(reg.get(), kMaxModelLen, &request).ok() ||
      !engine::EngineFamilies::Register(reg.get(), false, &engine).ok())
    _exit(1);
  const Labels base = {{"engine", "0"}, {"model_name", kModel}};
  const metrics::CounterFamily& prompt = request.prompt_tokens;
  const metrics::CounterFamily& success = request.request_success;
  const metrics::HistogramFamily& ttft = request.time_to_first_token_seconds;
  const metrics::GaugeFamily& running = engine.num_requests_running;
  Labels stop = base;
  stop.emplace_back("finished_reason", "stop");
  for (int r = 0; r < requests; ++r) {
    prompt.With(base).Inc(100);
    success.With(stop).Inc();
    ttft.With(base).Observe(0.02 * (r % 10 + 1));
  }
  running.With(base).Set(index + 1);
  return reg;
}

std::string Excerpt(metrics::Registry* reg) {
  std::istringstream page(reg->Render(metrics::ExpositionFormat::kPrometheusText));
  std::string line, out;
  while (std::getline(page, line)) {
    if (line.starts_with("vllm:prompt_tokens_total") ||
        line.starts_with("vllm:request_success_total{engine=\"0\",finished_reason=\"stop\"") ||
        line.starts_with("vllm:time_to_first_token_seconds_count") ||
        line.starts_with("vllm:num_requests_running") ||
        line.starts_with("sightline:registry_slots_in_use") ||
        (line.starts_with("sightline:registry_overflow_total") && !line.ends_with(" 0.0")))
      out += "  " + line + "\n";
  }
  return out;
}

}  // namespace

int RunMetricsDemo(int workers, const metrics::Capacity& capacity) {
  const std::string instance = "demo-" + std::to_string(getpid());
  std::unique_ptr<metrics::Registry> reg;
  if (Status s = metrics::Registry::Create(instance, capacity, "supervisor", &reg);
      !s.ok() || !(s = RegisterFamilies(reg.get())).ok()) {
    std::cerr << "sightline: error: " << s.message() << "\n";
    return 1;
  }
  std::cout << "Instance '" << instance << "': " << workers
            << " worker processes each record 10 requests into /dev/shm"
            << metrics::Registry::SegmentName(instance) << ".\n";
  std::vector<pid_t> pids;
  int ready[2];
  if (pipe(ready) != 0) return 1;
  for (int i = 0; i < workers; ++i) {
    std::cout.flush();  // or the child would print our buffered text again
    const pid_t pid = fork();
    if (pid == 0) {
      auto attachment = RecordRequests(instance, i, 10);
      char c = 1;
      (void)!write(ready[1], &c, 1);
      pause();  // stay alive until killed
      _exit(0);
    }
    pids.push_back(pid);
    char c;  // one at a time, so the last worker holds the most recent gauge value
    (void)!read(ready[0], &c, 1);
  }
  std::cout << "\nAll workers alive (any process can render this):\n" << Excerpt(reg.get()) << "\n";
  PrintInspection(instance, reg->Inspect(), std::cout);
  const pid_t victim = pids.back();
  pids.pop_back();
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
  std::cout << "\nThe last worker (pid " << victim
            << ") was SIGKILLed: its counts stay; the livemostrecent gauge falls back to the\n"
               "newest value among live processes:\n"
            << Excerpt(reg.get()) << "\n";
  PrintInspection(instance, reg->Inspect(), std::cout);
  for (std::size_t i = 0; i < pids.size(); ++i) {
    kill(pids[i], SIGTERM);
    waitpid(pids[i], nullptr, 0);
  }
  std::cout << "\nAll workers gone; totals unchanged:\n"
            << Excerpt(reg.get())
            << "\nA running instance is read the same way: sightline metrics dump|inspect "
               "--registry NAME\n";
  return 0;
}

}  // namespace sightline::cli
