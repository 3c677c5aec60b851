#include "openai/chat_render.h"

#include <ctime>

#include "openai/json_body.h"
#include "sightline/jinja/value.h"

namespace sightline::api {

namespace {

using jinja::Value;
using json = nlohmann::ordered_json;

std::tm Now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

// vLLM's message post-processing: text parts joined by "\n" for a template
// that takes content as a string; no content is "" (for a template that
// loops over content: []); tool-call arguments given as JSON text
// become objects, as tool-use templates expect them (none at all: {}).
Status Prepare(const json& messages, bool iterates_content, json* out) {
  *out = messages;
  for (std::size_t i = 0; i < out->size(); ++i) {
    json& m = (*out)[i];
    if (!m.is_object()) continue;
    if (auto c = m.find("content"); c == m.end() || c->is_null())
      m["content"] = iterates_content ? json::array() : json("");
    if (auto c = m.find("content"); c != m.end() && c->is_array() && !iterates_content) {
      std::string text;
      bool first = true;
      for (const json& part : *c)
        if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
            part["text"].is_string()) {
          if (!first) text += "\n";
          first = false;
          text += part["text"].get<std::string>();
        }
      *c = text;
    }
    const auto role = m.find("role");
    if (role == m.end() || *role != "assistant") continue;
    if (auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array())
      for (std::size_t k = 0; k < calls->size(); ++k) {
        json& call = (*calls)[k];
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
          continue;
        // As vLLM: absent, null or "" arguments are {}.
        json& args = call["function"]["arguments"];
        if (args.is_null() || args == "") args = json::object();
        if (!args.is_string()) continue;
        // Depth-checked by the bounded parser first; parsed again ordered.
        nlohmann::json checked;
        RequestError e;
        if (!ParseBoundedJson(args.get<std::string>(), "tool call arguments", &checked, &e))
          return Status::InvalidArgument("messages[" + std::to_string(i) + "].tool_calls[" +
                                         std::to_string(k) +
                                         "].function.arguments is not JSON: " + e.message);
        args = json::parse(args.get<std::string>());
      }
  }
  return Status::Ok();
}

// str.strip(), lstrip() as Python has them.
std::string PyStrip(const std::string& s, const char* which) {
  jinja::Args none;
  return jinja::Method(Value::String(s), which).Call(none).str();
}

// transformers: cut the render right after the final message's text, so
// that the model continues it.
Status CutAfterFinal(const json& messages, std::string* out) {
  const json& last = messages.back();
  const json* content = last.is_object() && last.contains("content") ? &last["content"] : nullptr;
  std::string final;
  if (content && content->is_string()) {
    final = content->get<std::string>();
  } else if (content && content->is_array()) {
    bool found = false;
    for (auto it = content->rbegin(); it != content->rend(); ++it)
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        final = (*it)["text"].get<std::string>();
        found = true;
        break;
      }
    if (!found)
      return Status::InvalidArgument(
          "continue_final_message is set but there is no text to continue in the final message");
  } else {
    return Status::InvalidArgument(
        "continue_final_message is set but the final message has no text content");
  }
  const std::string stripped = PyStrip(final, "strip");
  const std::size_t at = out->rfind(stripped);
  if (at == std::string::npos)
    return Status::InvalidArgument(
        "continue_final_message is set but the final message does not appear in the chat after "
        "applying the chat template");
  const std::size_t lstripped = PyStrip(final, "lstrip").size();
  if (out->compare(at, lstripped, final) == 0)
    out->resize(at + lstripped);
  else
    out->resize(at + stripped.size());
  return Status::Ok();
}

}  // namespace

json MessagesJson(const std::vector<ChatMessage>& messages) {
  json out = json::array();
  for (const auto& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

Status RenderChatWith(const ChatTemplate& t, const jinja::Template& which, const ChatInput& in,
                      std::string* prompt, jinja::RenderError::Kind* kind) {
  if (in.add_generation_prompt && in.continue_final_message)
    return Status::InvalidArgument(
        "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  if (!in.messages.is_array() || in.messages.empty())
    return Status::InvalidArgument("'messages' must be a non-empty array");
  json messages;
  if (Status s = Prepare(in.messages, t.IteratesContent(), &messages); !s.ok()) return s;

  Value vars = Value::Dict();
  auto& v = vars.dict();
  if (in.kwargs.is_object())
    for (const auto& [k, e] : in.kwargs.items()) {
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt" ||
          k == "raise_exception" || k == "strftime_now")
        return Status::InvalidArgument("chat_template_kwargs may not set '" + k + "'");
      v.Set(k, Value::FromJson(e));
    }
  const auto& o = t.options();
  if (!o.bos_token.empty() && !v.Find("bos_token")) v.Set("bos_token", Value::String(o.bos_token));
  if (!o.eos_token.empty() && !v.Find("eos_token")) v.Set("eos_token", Value::String(o.eos_token));
  v.Set("messages", Value::FromJson(messages));
  v.Set("tools", Value::FromJson(in.tools));
  v.Set("documents", Value::FromJson(in.documents));
  v.Set("add_generation_prompt", Value::Bool(in.add_generation_prompt));
  v.Set("raise_exception", Value::Callable("raise_exception", [](jinja::Args& a) -> Value {
          throw jinja::RenderError{jinja::RenderError::Kind::kTemplate,
                                   jinja::Arg(a, 0, "message").str()};
        }));
  const auto clock = o.clock ? o.clock : Now;
  v.Set("strftime_now", Value::Callable("strftime_now", [clock](jinja::Args& a) {
          const Value format = jinja::Arg(a, 0, "format");
          if (!format.is_string()) jinja::Fail("strftime_now() takes a format string");
          const std::tm tm = clock();
          char buf[512];
          const std::size_t n = std::strftime(buf, sizeof buf, format.str().c_str(), &tm);
          return Value::String(std::string(buf, n));
        }));
  std::string text;
  if (Status s = which.Render(vars, &text, kind); !s.ok()) return s;
  if (in.continue_final_message)
    if (Status s = CutAfterFinal(messages, &text); !s.ok()) return s;
  *prompt = std::move(text);
  return Status::Ok();
}

Status RenderChat(const ChatTemplate& t, const ChatInput& in, std::string* prompt) {
  jinja::RenderError::Kind kind;
  return RenderChatWith(t, t.Pick(!in.tools.is_null()), in, prompt, &kind);
}

}  // namespace sightline::api
