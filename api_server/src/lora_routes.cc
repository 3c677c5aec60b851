#include "lora_routes.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "openai/json_body.h"

namespace sightline::api {

namespace {

// vLLM's answers: a plain-text success, and errors of type InvalidUserInput
// for a body that names nothing or an adapter loaded already.
HttpResponse Success(const std::string& text) {
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  r.body = text;
  return r;
}

HttpResponse InvalidUserInput(const std::string& message) {
  return ErrorResponse(400, message, "InvalidUserInput");
}

bool Served(const EngineRouter& engines, const std::string& name) {
  const auto loras = engines.lora_adapters();
  return loras &&
         std::any_of(loras->begin(), loras->end(), [&](const auto& l) { return l.first == name; });
}

// The body's lora_name and (for a load) lora_path, as non-empty strings.
bool ReadBody(const HttpRequest& request, bool load, UtilityArgs* args, HttpResponse* error) {
  nlohmann::json j;
  RequestError e;
  if (!ParseJsonObject(request.body, &j, &e)) {
    *error = ErrorAnswer(e);
    return false;
  }
  const Fields f(j, "", &e);
  if (!f.String("lora_name", &args->lora_name) ||
      (load && !f.String("lora_path", &args->lora_path))) {
    *error = ErrorAnswer(e);
    return false;
  }
  if (load && (args->lora_name.empty() || args->lora_path.empty())) {
    *error = InvalidUserInput("Both 'lora_name' and 'lora_path' must be provided.");
    return false;
  }
  if (!load && args->lora_name.empty()) {
    *error = InvalidUserInput("'lora_name' must be provided.");
    return false;
  }
  return true;
}

// The engines' outcomes of one call, answered once the last arrives (they
// come on each engine client's output thread).
struct FanOut {
  std::mutex mu;
  std::vector<std::optional<UtilityOutcome>> outcomes;
  std::size_t waiting = 0;
};

void Call(EngineRouter* engines, ipc::UtilityKind kind, UtilityArgs args,
          std::shared_ptr<Responder> out) {
  const std::string name = args.lora_name;
  const bool load = kind == ipc::UtilityKind::LoadLoraAdapter;
  auto fan = std::make_shared<FanOut>();
  fan->outcomes.resize(engines->size());
  fan->waiting = engines->size();
  for (std::size_t rank = 0; rank < engines->size(); ++rank) {
    engines->engine(rank)->Utility(
        kind, args, [fan, rank, out, name, load](const UtilityOutcome& outcome) {
          {
            std::lock_guard<std::mutex> g(fan->mu);
            fan->outcomes[rank] = outcome;
            if (--fan->waiting > 0) return;
          }
          // An unload that some engine did not know (one restarted since the
          // load) succeeds where the others did.
          const bool some_ok = std::any_of(fan->outcomes.begin(), fan->outcomes.end(),
                                           [](const auto& o) { return o->ok; });
          for (const auto& o : fan->outcomes) {
            if (o->ok || (!load && o->not_found && some_ok)) continue;
            if (o->engine_gone)
              return out->Send(ErrorResponse(503, o->message, "ServiceUnavailableError"));
            return out->Send(o->not_found ? ErrorResponse(404, o->message, "NotFoundError")
                                          : ErrorResponse(400, o->message, "BadRequestError"));
          }
          out->Send(Success("Success: LoRA adapter '" + name + "' " + (load ? "added" : "removed") +
                            " successfully."));
        });
  }
}

}  // namespace

bool RuntimeLoraUpdatingFromEnvironment() {
  const char* v = std::getenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING");
  if (!v) return false;
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s == "1" || s == "true";
}

void AddLoraRoutes(HttpServer* server, EngineRouter* engines, std::string served_model_name) {
  server->RouteAsync(
      "POST", "/v1/load_lora_adapter",
      [engines, served_model_name](const HttpRequest& r, std::shared_ptr<Responder> out) {
        UtilityArgs args;
        HttpResponse error;
        if (!ReadBody(r, /*load=*/true, &args, &error)) return out->Send(std::move(error));
        if (args.lora_name == served_model_name)
          return out->Send(InvalidUserInput("'" + args.lora_name +
                                            "' is the base model's name, not an adapter's."));
        // The engine decides (two API servers may race); this answers the
        // common case with vLLM's words without a round trip.
        if (Served(*engines, args.lora_name))
          return out->Send(InvalidUserInput("The lora adapter '" + args.lora_name +
                                            "' has already been loaded."));
        Call(engines, ipc::UtilityKind::LoadLoraAdapter, std::move(args), std::move(out));
      });
  server->RouteAsync("POST", "/v1/unload_lora_adapter",
                     [engines](const HttpRequest& r, std::shared_ptr<Responder> out) {
                       UtilityArgs args;
                       HttpResponse error;
                       if (!ReadBody(r, /*load=*/false, &args, &error))
                         return out->Send(std::move(error));
                       Call(engines, ipc::UtilityKind::UnloadLoraAdapter, std::move(args),
                            std::move(out));
                     });
}

}  // namespace sightline::api
