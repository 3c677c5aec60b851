#include "openai/chat_tools.h"

namespace sightline::api {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// `from`'s keys other than `skip`, in order, appended to `to`.
void AppendOthers(const ordered_json& from, std::initializer_list<const char*> skip,
                  ordered_json* to) {
  for (const auto& [k, v] : from.items()) {
    bool skipped = false;
    for (const char* s : skip) skipped = skipped || k == s;
    if (!skipped) (*to)[k] = v;
  }
}

bool ReadTool(const Fields& tool, RequestError* e) {
  std::string type = "function";
  if (!tool.String("type", &type)) return false;
  if (type != "function") return tool.Fail("type", "is " + Quote(type) + ", not \"function\"");
  const json* fn = tool.Find("function");
  if (!fn) return tool.Fail("function", "is required");
  if (!tool.Object("function")) return false;
  const Fields f(*fn, tool.Name("function"), e);
  std::string name, description;
  if (!f.Find("name")) return f.Fail("name", "is required");
  return f.String("name", &name) && f.String("description", &description) && f.Object("parameters");
}

}  // namespace

bool ReadTools(const Fields& body, const ordered_json& ordered, ordered_json* out,
               RequestError* error) {
  *out = nullptr;
  const json* tools = body.Find("tools");
  if (!tools) return true;
  if (!tools->is_array()) return body.Fail("tools", "must be a list");
  // As OpenAI and vLLM: an empty list is a mistake, not "no tools".
  if (tools->empty())
    return body.Fail("tools", "must not be empty; give at least one tool or leave it out");
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const std::string at = body.Name("tools") + "[" + std::to_string(i) + "]";
    if (!(*tools)[i].is_object()) return Refuse(error, at, "'" + at + "' must be a tool object");
    if (!ReadTool(Fields((*tools)[i], at, error), error)) return false;
  }
  // Checked above on the same text, so `ordered` has the same shape.
  *out = ordered_json::array();
  for (const ordered_json& tool : ordered) {
    const ordered_json& fn = tool["function"];
    ordered_json f = {{"name", fn["name"]},
                      {"description", fn.value("description", ordered_json())},
                      {"parameters", fn.value("parameters", ordered_json())}};
    AppendOthers(fn, {"name", "description", "parameters"}, &f);
    ordered_json t = {{"type", "function"}, {"function", std::move(f)}};
    AppendOthers(tool, {"type", "function"}, &t);
    out->push_back(std::move(t));
  }
  return true;
}

bool CheckToolChoice(const Fields& body, RequestError* error) {
  const json* tools = body.Find("tools");
  const json* choice = body.Find("tool_choice");
  if (!choice && !tools) return true;
  if (choice && !choice->is_string() && !choice->is_object())
    return body.Fail("tool_choice", "must be a string or an object");
  if (choice && *choice == "none") return true;  // tools are rendered, calls are not parsed
  if (!tools) return body.Fail("tool_choice", "needs 'tools'");
  if (!choice || *choice == "auto")
    return body.Fail("tool_choice",
                     "is \"auto\" (the default with tools), which needs a tool-call parser; this "
                     "server has none. Send \"tool_choice\": \"none\" to give the model the tools "
                     "and get its answer as text");
  if (choice->is_string()) {
    if (*choice != "required")
      return body.Fail("tool_choice", "is " + Quote(choice->get<std::string>()) +
                                          "; only \"none\", \"auto\", \"required\" or a named "
                                          "tool are valid");
    return body.Fail("tool_choice",
                     "\"required\" needs structured output, which this server does not implement");
  }
  // {"type": "function", "function": {"name": ...}}, naming one of the tools.
  const Fields c(*choice, body.Name("tool_choice"), error);
  const json* fn = c.Find("function");
  if (!fn || !fn->is_object()) return c.Fail("function", "must be an object with a 'name'");
  const Fields f(*fn, c.Name("function"), error);
  std::string name;
  if (!f.Find("name")) return f.Fail("name", "is required");
  if (!f.String("name", &name)) return false;
  bool known = false;
  for (const json& tool : *tools) known = known || tool["function"]["name"] == name;
  if (!known) return f.Fail("name", "is " + Quote(name) + ", which is not one of 'tools'");
  return body.Fail("tool_choice",
                   "naming a tool needs structured output, which this server does not implement");
}

bool ReadToolParts(const Fields& m, const std::string& role, RequestError* error) {
  if (role == "tool") {
    std::string id;
    return m.String("tool_call_id", &id);
  }
  const json* calls = m.Find("tool_calls");
  if (!calls) return true;
  if (role != "assistant") return m.Fail("tool_calls", "is only for assistant messages");
  if (!calls->is_array()) return m.Fail("tool_calls", "must be a list");
  for (std::size_t i = 0; i < calls->size(); ++i) {
    const std::string at = m.Name("tool_calls") + "[" + std::to_string(i) + "]";
    const json& call = (*calls)[i];
    if (!call.is_object()) return Refuse(error, at, "'" + at + "' must be a tool call object");
    const Fields c(call, at, error);
    std::string id, type = "function", name;
    if (!c.String("id", &id) || !c.String("type", &type)) return false;
    if (type != "function") return c.Fail("type", "is " + Quote(type) + ", not \"function\"");
    const json* fn = c.Find("function");
    if (!fn) return c.Fail("function", "is required");
    if (!c.Object("function")) return false;
    const Fields f(*fn, c.Name("function"), error);
    if (!f.Find("name")) return f.Fail("name", "is required");
    if (!f.String("name", &name)) return false;
    // OpenAI sends arguments as JSON text; the template gets the object
    // (chat_render.cc), so text that is not JSON is the client's error here.
    const json* args = f.Find("arguments");
    if (!args || args->is_object()) continue;
    if (!args->is_string()) return f.Fail("arguments", "must be JSON text or an object");
    json parsed;
    RequestError why;
    if (!args->get_ref<const std::string&>().empty() &&
        !ParseBoundedJson(args->get_ref<const std::string&>(), "the arguments", &parsed, &why))
      return f.Fail("arguments", "is not JSON: " + why.message);
  }
  return true;
}

}  // namespace sightline::api
