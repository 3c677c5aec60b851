#include "openai/chat_messages.h"

#include "openai/chat_tools.h"

namespace sightline::api {

using nlohmann::json;

bool ReadMessages(const json& list, const std::string& name, bool responses,
                  std::vector<ChatMessage>* out, RequestError* error) {
  if (!list.is_array() || list.empty())
    return Refuse(error, name, "'" + name + "' must be a non-empty array");
  std::vector<ChatMessage> messages;
  messages.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& m = list[i];
    const std::string where = name + "[" + std::to_string(i) + "]";
    if (!m.is_object()) return Refuse(error, where, "'" + where + "' must be a message object");
    const Fields f(m, where, error);
    if (responses) {  // {"type": "message", "role": ..., "content": ...}
      std::string type = "message";
      if (!f.String("type", &type)) return false;
      if (type != "message")
        return f.Fail("type", "is " + Quote(type) + "; only messages are supported");
    }
    const json* role = f.Find("role");
    if (!role || !role->is_string())
      return Refuse(error, where + ".role", where + " needs a string 'role'");
    ChatMessage msg{role->get<std::string>(), ""};
    // A tool's answer is a chat message; /v1/responses has its own item for it.
    const bool tool = !responses && msg.role == "tool";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "developer" && !tool)
      return f.Fail("role", "is " + Quote(msg.role) + ", not system, user, assistant, developer" +
                                (responses ? "" : " or tool"));
    if (msg.role == "developer") msg.role = "system";
    if (!responses && !ReadToolParts(f, msg.role, error)) return false;
    std::string speaker;  // OpenAI's participant name: checked, not rendered
    if (!f.String("name", &speaker)) return false;
    const json* c = f.Find("content");
    if (c && c->is_string()) {
      msg.content = c->get<std::string>();
    } else if (c && c->is_array()) {  // [{"type": "text", "text": "..."}]
      for (std::size_t k = 0; k < c->size(); ++k) {
        const json& part = (*c)[k];
        const std::string at = where + ".content[" + std::to_string(k) + "]";
        if (!part.is_object()) return Refuse(error, at, "'" + at + "' must be a text part object");
        const Fields pf(part, at, error);
        std::string type, text;
        if (!pf.String("type", &type)) return false;
        const bool text_part = responses
                                   ? type == "input_text" || type == "output_text" || type == "text"
                                   : type == "text";
        if (!text_part)
          return pf.Fail("type", "is " + Quote(type) + ": only text parts are supported");
        if (!pf.Find("text")) return pf.Fail("text", "is required");
        if (!pf.String("text", &text)) return false;
        msg.content += text;
      }
    } else if (c || msg.role != "assistant") {  // only an assistant turn may have none
      return f.Fail("content", "must be a string or a list of text parts");
    }
    messages.push_back(std::move(msg));
  }
  *out = std::move(messages);
  return true;
}

}  // namespace sightline::api
