#include "engine_command.h"

#include "cli_error.h"

#include <memory>
#include <string>

#include "engine_options.h"
#include "ready_fd.h"
#include "sightline/engine_core/engine_process.h"
#include "sightline/engine_core/safetensors.h"
#include "stop_signals.h"

namespace sightline::cli {

namespace {

int RunEngine(const engine::EngineProcessOptions& o, int ready_fd, bool dry_run) {
  if (dry_run) {
    Status s = engine::CheckEngineProcess(o);
    return s.ok() ? 0 : Fail(s.message());
  }
  engine::EngineProcessHooks hooks;
  hooks.stop = [] { return &InstallStopSignals(); };
  hooks.on_ready = [ready_fd] { NotifyReady(ready_fd); };
  int exit_code = 0;
  if (Status s = engine::RunEngineProcess(o, hooks, &exit_code); !s.ok()) return Fail(s.message());
  return exit_code;
}

}  // namespace

void AddEngineCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<engine::EngineProcessOptions>();
  auto ready_fd = std::make_shared<int>(-1);
  auto dry_run = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("engine", "Run one engine-core process");
  AddEngineFlags(cmd, o.get());
  cmd->add_option("--input", o->input,
                  "Unix socket the engine listens on for requests: ipc://PATH or ipc://@NAME")
      ->required();
  cmd->add_option("--output", o->output,
                  "Unix socket the engine listens on for outputs: ipc://PATH or ipc://@NAME")
      ->required();
  cmd->add_option("--registry", o->registry, "Metric registry instance to write into");
  cmd->add_option("--engine-index", o->engine_index, "Data-parallel rank")->capture_default_str();
  cmd->add_option("--data-parallel-size", o->data_parallel_size,
                  "The instance's engines; above 1 the engine tells the API servers what its "
                  "prefix cache holds (their prefix affinity)")
      ->capture_default_str();
  cmd->add_option("--ready-fd", *ready_fd, "Write one byte to this fd once serving (supervisors)");
  cmd->add_option("--threads", o->threads, "BLAS threads (0: library default)");
  cmd->add_option("--heartbeat-timeout", o->heartbeat_timeout,
                  "Seconds before a silent API server is gone")
      ->capture_default_str();
  cmd->add_flag("--dry-run", *dry_run, "Check the flags (and the model's config) and exit");
  cmd->callback(
      [o, ready_fd, dry_run, exit_code] { *exit_code = RunEngine(*o, *ready_fd, *dry_run); });
}

void AddMakeModelCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string dir, preset = "sightline-tiny", dtype = "f32", family = "llama";
    std::uint64_t seed = 0;
    int shards = 1;
    int vocab_size = 0;  // 0: the preset's
    std::string config_patch;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Write a small random model (Llama family) as a real Hugging Face directory "
      "(config.json, safetensors)");
  cmd->add_option("dir", o->dir, "Directory to write")->required();
  cmd->add_option("--preset", o->preset, "Model shape")->capture_default_str();
  cmd->add_option(
         "--family", o->family,
         "llama, mistral, mixtral (4 experts, 2 per token), phi3 (fused qkv and gate_up), "
         "qwen2 (q/k/v biases), qwen3 (q/k norms), qwen3_moe (4 experts, 2 per token), gemma2 "
         "or gemma3_text: the "
         "architecture written, with that family's tensors")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Weights seed (same as --load-format dummy --seed)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "f32, f16 or bf16")->capture_default_str();
  cmd->add_option("--shards", o->shards, "Safetensors files (more than 1 writes an index)")
      ->capture_default_str();
  cmd->add_option("--vocab-size", o->vocab_size,
                  "Vocabulary size instead of the preset's (to pair the model with a real "
                  "tokenizer)");
  cmd->add_option("--config-patch", o->config_patch,
                  "A JSON merge patch (RFC 7386) applied to config.json before the weights are "
                  "made, e.g. '{\"attention_bias\": true}' (the weights then have the biases)");
  cmd->callback([o, exit_code] {
    engine::ModelConfig config;
    Status s = engine::PresetModelConfig(o->preset, &config);
    if (s.ok() && o->vocab_size != 0) {
      if (o->vocab_size < 258 || o->vocab_size > (1 << 22))  // the presets' bos and eos: 256, 257
        s = Status::InvalidArgument("--vocab-size must be in [258, 4194304]");
      else
        config.vocab_size = o->vocab_size;
    }
    if (s.ok()) s = engine::ApplyFamily(o->family, &config);
    engine::WriteModelOptions w;
    w.shards = o->shards;
    if (o->dtype == "f16")
      w.dtype = engine::DType::kF16;
    else if (o->dtype == "bf16")
      w.dtype = engine::DType::kBF16;
    else if (o->dtype != "f32")
      s = Status::InvalidArgument("--dtype must be f32, f16 or bf16");
    if (s.ok() && (o->shards < 1 || o->shards > 9))
      s = Status::InvalidArgument("--shards must be in [1, 9]");
    if (s.ok()) s = engine::WriteRandomModelDirectory(o->dir, config, o->config_patch, o->seed, w);
    *exit_code = s.ok() ? 0 : Fail(s.message());
  });
}

}  // namespace sightline::cli
