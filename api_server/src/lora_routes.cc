#include "lora_routes.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

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

bool Served(const EngineClient& engine, const std::string& name) {
  const auto loras = engine.lora_adapters();
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

void Call(EngineClient* engine, ipc::UtilityKind kind, UtilityArgs args,
          std::shared_ptr<Responder> out) {
  const std::string name = args.lora_name;
  const bool load = kind == ipc::UtilityKind::LoadLoraAdapter;
  engine->Utility(kind, std::move(args), [out, name, load](const UtilityOutcome& o) {
    if (o.ok)
      return out->Send(Success("Success: LoRA adapter '" + name + "' " +
                               (load ? "added" : "removed") + " successfully."));
    if (o.engine_gone) return out->Send(ErrorResponse(503, o.message, "ServiceUnavailableError"));
    out->Send(o.not_found ? ErrorResponse(404, o.message, "NotFoundError")
                          : ErrorResponse(400, o.message, "BadRequestError"));
  });
}

}  // namespace

bool RuntimeLoraUpdatingFromEnvironment() {
  const char* v = std::getenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING");
  if (!v) return false;
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s == "1" || s == "true";
}

void AddLoraRoutes(HttpServer* server, EngineClient* engine, std::string served_model_name) {
  server->RouteAsync(
      "POST", "/v1/load_lora_adapter",
      [engine, served_model_name](const HttpRequest& r, std::shared_ptr<Responder> out) {
        UtilityArgs args;
        HttpResponse error;
        if (!ReadBody(r, /*load=*/true, &args, &error)) return out->Send(std::move(error));
        if (args.lora_name == served_model_name)
          return out->Send(InvalidUserInput("'" + args.lora_name +
                                            "' is the base model's name, not an adapter's."));
        // The engine decides (two API servers may race); this answers the
        // common case with vLLM's words without a round trip.
        if (Served(*engine, args.lora_name))
          return out->Send(InvalidUserInput("The lora adapter '" + args.lora_name +
                                            "' has already been loaded."));
        Call(engine, ipc::UtilityKind::LoadLoraAdapter, std::move(args), std::move(out));
      });
  server->RouteAsync("POST", "/v1/unload_lora_adapter",
                     [engine](const HttpRequest& r, std::shared_ptr<Responder> out) {
                       UtilityArgs args;
                       HttpResponse error;
                       if (!ReadBody(r, /*load=*/false, &args, &error))
                         return out->Send(std::move(error));
                       Call(engine, ipc::UtilityKind::UnloadLoraAdapter, std::move(args),
                            std::move(out));
                     });
}

}  // namespace sightline::api
