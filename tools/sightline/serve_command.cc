#include "serve_command.h"

#include "cli_error.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <regex>

#include "api_server_options.h"
#include "engine_options.h"
#include "instance/listening_socket.h"
#include "instance/run_directory.h"
#include "instance/supervisor.h"
#include "registry_flags.h"
#include "sightline/api_server/http_families.h"
#include "sightline/shm_registry/process_metrics.h"
#include "sightline/shm_registry/registry.h"
#include "stop_signals.h"

namespace sightline::cli {

namespace {

struct ServeOptions {
  engine::EngineProcessOptions engine;
  api::ApiServerProcessOptions api;
  std::string registry;  // default: sightline-<port>
  std::uint32_t api_server_count = 1;
  std::uint32_t data_parallel_size = 1;
  int engine_threads = 0;
  double startup_timeout = 300;
  int max_restarts_per_minute = 5;
  int max_engine_restarts_per_minute = 5;
  std::string show_hidden_metrics_for_version;
  metrics::Capacity capacity;
  bool dry_run = false;
};

// Each engine's CPUs and device under data parallelism. CPUs: with
// --engine-threads T and at least T x N CPUs this process may use, engine i
// gets the i-th T of them (its BLAS threads then never compete with another
// engine's); otherwise none is pinned. Device: engine i sees the i-th CUDA
// device (of CUDA_VISIBLE_DEVICES when set), as vLLM gives each rank its own.
Status EngineSetups(std::uint32_t engines, int threads, bool cuda, std::vector<std::string>* notes,
                    std::vector<ChildSetup>* out) {
  std::vector<ChildSetup>& setups = *out;
  setups.assign(engines, ChildSetup{});
  if (engines < 2) return Status::Ok();
  cpu_set_t allowed;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const std::size_t t = threads > 0 ? static_cast<std::size_t>(threads) : 0;
  if (t > 0 && t * engines <= cpus.size())
    for (std::uint32_t i = 0; i < engines; ++i)
      setups[i].cpus.assign(cpus.begin() + i * t, cpus.begin() + (i + 1) * t);
  else
    notes->push_back("engines not pinned to CPUs (--engine-threads " + std::to_string(threads) +
                     " x " + std::to_string(engines) + " engines, " + std::to_string(cpus.size()) +
                     " CPUs)");
  if (cuda) {
    std::vector<std::string> visible;
    const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
    if (v) {
      const std::string list(v);
      for (std::size_t at = 0; !list.empty() && at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        visible.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
      if (visible.size() < engines)
        return Status::InvalidArgument("--data-parallel-size " + std::to_string(engines) +
                                       " needs a CUDA device per engine; "
                                       "CUDA_VISIBLE_DEVICES names " +
                                       std::to_string(visible.size()));
    }
    for (std::uint32_t i = 0; i < engines; ++i)
      setups[i].env.push_back("CUDA_VISIBLE_DEVICES=" + (v ? visible[i] : std::to_string(i)));
  }
  return Status::Ok();
}

// MODEL's tokenizer when --tokenizer is left at auto: a Hugging Face
// directory's tokenizer.json, else its tokenizer.model, else the byte one.
std::string DefaultTokenizer(const std::string& model, bool preset) {
  if (preset) return "byte";
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    const auto path = std::filesystem::path(model) / name;
    if (std::filesystem::is_regular_file(path)) return path.string();
  }
  std::cerr << "WARNING sightline serve: " << model
            << " has no tokenizer.json or tokenizer.model; using the byte tokenizer\n";
  return "byte";
}

int RunServe(ServeOptions o) {
  // Every check first: nothing starts with a bad flag.
  engine::ModelConfig model;
  bool preset = false;
  engine::KvPlan plan;
  if (Status s = ResolveModelConfig(o.engine, &model, &preset); !s.ok()) return Fail(s.message());
  if (Status s = CheckEngineOptions(model, &o.engine, &plan); !s.ok()) return Fail(s.message());
  if (o.api_server_count < 1 || o.api_server_count > 256)
    return Fail("--api-server-count must be in [1, 256]");
  if (o.data_parallel_size < 1 || o.data_parallel_size > api::kMaxDataParallelSize)
    return Fail("--data-parallel-size must be in [1, " + std::to_string(api::kMaxDataParallelSize) +
                "]");
  // The supervisor, every engine and every API server each hold a registry
  // slot (a dead one's is reclaimed when a new process needs it).
  const std::uint32_t processes = o.api_server_count + o.data_parallel_size + 1;
  if (processes > o.capacity.max_processes)
    return Fail("--api-server-count " + std::to_string(o.api_server_count) +
                " and --data-parallel-size " + std::to_string(o.data_parallel_size) + " need " +
                std::to_string(processes) +
                " metric registry process slots; raise --registry-max-processes (now " +
                std::to_string(o.capacity.max_processes) + ")");
  if (o.max_restarts_per_minute < 0) return Fail("--api-server-max-restarts must be >= 0");
  if (o.max_engine_restarts_per_minute < 0) return Fail("--engine-max-restarts must be >= 0");
  if (!(o.startup_timeout > 0)) return Fail("--startup-timeout must be positive");
  if (!o.show_hidden_metrics_for_version.empty() &&
      !std::regex_match(o.show_hidden_metrics_for_version, std::regex(R"(\d+\.\d+)")))
    return Fail("--show-hidden-metrics-for-version must look like X.Y");
  if (o.api.tokenizer == "auto") o.api.tokenizer = DefaultTokenizer(o.engine.model, preset);
  o.api.disable_log_stats = o.engine.disable_log_stats;
  o.api.served_model_name = o.engine.served_model_name;
  o.api.collect_detailed_traces = o.engine.collect_detailed_traces;
  if (Status s = api::CheckApiOptions(o.api); !s.ok()) return Fail(s.message());
  if (o.api.per_request_spec_decode_metrics != "none" && o.engine.speculative_config.empty())
    return Fail("--per-request-spec-decode-metrics needs --speculative-config");
  if (o.dry_run) return 0;

  ListeningSocket listener;
  if (Status s = listener.Bind(o.api.host, o.api.port); !s.ok()) return Fail(s.message());
  // Each rank's own port, bound now as the main one: a busy port fails the start.
  std::vector<std::unique_ptr<ListeningSocket>> rank_listeners;
  for (std::uint32_t r = 0; o.api.rank_port > 0 && r < o.data_parallel_size; ++r) {
    auto& l = rank_listeners.emplace_back(std::make_unique<ListeningSocket>());
    if (Status s = l->Bind(o.api.host, o.api.rank_port + static_cast<int>(r)); !s.ok())
      return Fail("--data-parallel-rank-port: " + s.message());
  }
  if (o.registry.empty()) o.registry = "sightline-" + std::to_string(listener.port());
  // The instance's histogram bounds (--metrics-buckets or vLLM's) are in the
  // registry before the segment is published: the engine and every API
  // server, restarted ones included, adopt them and cannot register others.
  std::unique_ptr<metrics::Registry> registry;
  // Under --disable-log-stats an instance shows the HTTP families alone.
  const std::vector<metrics::HistogramBuilder> histograms =
      o.engine.disable_log_stats
          ? metrics::WithBucketOverrides(api::HttpFamilies::Histograms(), o.engine.buckets)
          : engine::InstanceHistograms(o.engine);
  if (Status s = metrics::Registry::Create(
          o.registry, o.capacity, "supervisor", &registry,
          [&](metrics::Registry* r) { return metrics::RegisterHistograms(r, histograms); });
      !s.ok())
    return Fail(s.message());
  std::unique_ptr<metrics::ProcessMetrics> process_metrics;
  if (!o.engine.disable_log_stats) {
    if (Status s = metrics::ProcessMetrics::Start(registry.get(), true, 1.0, &process_metrics);
        !s.ok())
      return Fail(s.message());
  }
  RunDirectory run_dir;
  if (Status s = run_dir.Create(o.registry); !s.ok()) return Fail(s.message());

  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return Fail("cannot find this executable (/proc/self/exe)");
  const std::string self(exe, static_cast<std::size_t>(n));

  // Engine i of a data-parallel instance: its own sockets, index and
  // threads; everything else as given. One engine keeps the plain names.
  std::vector<std::vector<std::string>> engine_argvs;
  for (std::uint32_t i = 0; i < o.data_parallel_size; ++i) {
    engine::EngineProcessOptions e = o.engine;
    const std::string name = o.data_parallel_size == 1 ? "engine" : "engine" + std::to_string(i);
    e.input = "ipc://" + run_dir.path() + "/" + name + ".in";
    e.output = "ipc://" + run_dir.path() + "/" + name + ".out";
    e.engine_index = i;
    e.data_parallel_size = o.data_parallel_size;
    e.registry = o.registry;
    e.threads = o.engine_threads;
    std::vector<std::string> argv = {self, "engine"};
    for (auto& a : EngineArgs(e)) argv.push_back(std::move(a));
    argv.push_back("--ready-fd");
    argv.push_back(std::to_string(Subprocess::ReadyFd(0)));
    engine_argvs.push_back(std::move(argv));
    o.api.engine_inputs.push_back(e.input);
    o.api.engine_outputs.push_back(e.output);
  }
  o.api.count = o.api_server_count;
  o.api.registry = o.registry;
  o.api.fd = 3;
  for (std::size_t r = 0; r < rank_listeners.size(); ++r)
    o.api.rank_fds.push_back(4 + static_cast<int>(r));
  o.api.exit_after_engine_death = 0;  // the supervisor decides when they stop
  o.api.ready_fd = Subprocess::ReadyFd(1 + rank_listeners.size());
  // argv is readable by every user in /proc; the key goes by environment.
  if (!o.api.api_key.empty()) setenv("SIGHTLINE_API_KEY", o.api.api_key.c_str(), 1);

  SupervisorOptions so;
  so.engine_argvs = std::move(engine_argvs);
  std::vector<std::string> notes;
  if (Status s = EngineSetups(o.data_parallel_size, o.engine_threads,
                              engine::ResolveDevice(o.engine) == "cuda", &notes, &so.engine_setups);
      !s.ok())
    return Fail(s.message());
  for (std::uint32_t i = 0; i < so.engine_setups.size(); ++i) {
    const ChildSetup& s = so.engine_setups[i];
    std::string what;
    for (int c : s.cpus) what += (what.empty() ? "CPUs " : ",") + std::to_string(c);
    for (const std::string& e : s.env) what += (what.empty() ? "" : ", ") + e;
    if (!what.empty()) notes.push_back("engine " + std::to_string(i) + ": " + what);
  }
  for (const std::string& note : notes) std::cerr << "INFO sightline serve: " << note << "\n";
  so.api_server_argv = [api = o.api, self](std::uint32_t index) {
    api::ApiServerProcessOptions mine = api;
    mine.index = index;
    std::vector<std::string> argv = {self, "api-server"};
    for (auto& a : ApiServerArgs(mine)) argv.push_back(std::move(a));
    return argv;
  };
  so.api_server_count = o.api_server_count;
  so.listener = &listener;
  for (auto& l : rank_listeners) so.rank_listeners.push_back(l.get());
  so.registry = registry.get();
  so.startup_timeout_s = o.startup_timeout;
  so.shutdown_timeout_s = o.api.shutdown_timeout;
  so.max_restarts_per_minute = o.max_restarts_per_minute;
  so.max_engine_restarts_per_minute = o.max_engine_restarts_per_minute;
  const bool v6 = o.api.host.find(':') != std::string::npos;
  so.url = "http://" + (v6 ? "[" + o.api.host + "]" : o.api.host) + ":" +
           std::to_string(listener.port());
  so.stop = &InstallStopSignals();
  std::cerr << "INFO sightline serve: " << o.engine.served_model_name << ", metric registry '"
            << o.registry << "', run directory " << run_dir.path();
  if (!rank_listeners.empty()) std::cerr << ", rank r also on port " << o.api.rank_port << " + r";
  std::cerr << "\n";
  return Supervisor(std::move(so)).Run();
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ServeOptions>();
  o->api.host = "0.0.0.0";
  o->api.tokenizer = "auto";
  CLI::App* cmd = app.add_subcommand(
      "serve", "Run an instance: one engine and --api-server-count API servers on one port");
  AddEngineFlags(cmd, &o->engine);
  AddApiServingFlags(cmd, &o->api);
  cmd->add_option("--host", o->api.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->api.port, "Port to listen on (0: any free port)")
      ->capture_default_str();
  cmd->add_option("--api-server-count", o->api_server_count,
                  "API-server processes sharing the port")
      ->capture_default_str();
  cmd->add_option("--data-parallel-size", o->data_parallel_size,
                  "Engines (data-parallel ranks, also -dp), each with its own KV cache; every API "
                  "server routes each request to one of them (vLLM's balancer)")
      ->capture_default_str();
  cmd->add_option("--api-server-threads", o->api.threads,
                  "HTTP I/O threads per API server (besides a control thread)")
      ->capture_default_str();
  cmd->add_option("--engine-threads", o->engine_threads, "BLAS threads (0: library default)")
      ->capture_default_str();
  cmd->add_option("--registry", o->registry,
                  "Metric registry instance name (default: sightline-<port>)");
  cmd->add_option("--startup-timeout", o->startup_timeout,
                  "Seconds to wait for the engine and API servers to serve")
      ->capture_default_str();
  cmd->add_option("--api-server-max-restarts", o->max_restarts_per_minute,
                  "Restarts of one API server within a minute before the instance gives up")
      ->capture_default_str();
  cmd->add_option("--engine-max-restarts", o->max_engine_restarts_per_minute,
                  "Restarts of one engine within a minute before the instance gives up (with "
                  "--data-parallel-size above 1; the only engine's death stops the instance)")
      ->capture_default_str();
  cmd->add_option("--show-hidden-metrics-for-version", o->show_hidden_metrics_for_version,
                  "X.Y: restore metrics hidden since that version (none are hidden yet)");
  AddRegistryCapacityFlags(cmd, &o->capacity);
  cmd->add_flag("--dry-run", o->dry_run,
                "Check every flag (and the model's config) and exit without starting");
  cmd->callback([o, exit_code] { *exit_code = RunServe(*o); });
}

}  // namespace sightline::cli
