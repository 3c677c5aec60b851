// Post-processors, following `tokenizers` src/processors/{template,bert,
// roberta,sequence}.rs for a single sequence (pairs never reach the server).
#include "hf/post_processors.h"

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace sightline::hf {
namespace {

using nlohmann::json;

// TemplateProcessing's single template: special-token ids and the sequence.
class TemplateProcessor : public PostProcessor {
 public:
  struct Piece {
    bool is_sequence;
    std::vector<std::int32_t> ids;  // a special token's ids
  };
  explicit TemplateProcessor(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}
  void Process(std::vector<std::int32_t>* ids) const override {
    std::vector<std::int32_t> out;
    for (const Piece& p : pieces_) {
      if (p.is_sequence)
        out.insert(out.end(), ids->begin(), ids->end());
      else
        out.insert(out.end(), p.ids.begin(), p.ids.end());
    }
    *ids = std::move(out);
  }

 private:
  std::vector<Piece> pieces_;
};

class NoOpProcessor : public PostProcessor {
 public:
  void Process(std::vector<std::int32_t>*) const override {}
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void Process(std::vector<std::int32_t>* ids) const override {
    for (const auto& p : parts_) p->Process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// One template piece: {"Sequence": {"id": "A"}}, {"SpecialToken": {"id":
// "<s>"}}, or the string form "$A" / "$0" / "<s>" / "<s>:1" (Piece::try_from).
// `*special` names the special token; empty for the sequence.
Status ParsePiece(const json& p, bool* is_sequence, std::string* special) {
  std::string id;
  if (p.is_string()) {
    std::string s = p.get<std::string>();
    if (const std::size_t colon = s.find(':'); colon != std::string::npos) s.resize(colon);
    if (!s.empty() && s[0] == '$') {
      const std::string rest = s.substr(1);
      if (rest == "B" || rest == "b")
        return Status::InvalidArgument(
            "TemplateProcessing: a single template with sequence B is not supported");
      const bool digits =
          !rest.empty() && rest.find_first_not_of("0123456789") == std::string::npos;
      if (!(rest.empty() || rest == "A" || rest == "a" || digits))
        return Status::InvalidArgument("TemplateProcessing: cannot build piece '" + s + "'");
      *is_sequence = true;
      return Status::Ok();
    }
    *is_sequence = false;
    *special = s;
    return Status::Ok();
  }
  if (p.is_object() && p.contains("Sequence")) {
    if (p["Sequence"].value("id", "A") != "A")
      return Status::InvalidArgument(
          "TemplateProcessing: a single template with sequence B is not supported");
    *is_sequence = true;
    return Status::Ok();
  }
  if (p.is_object() && p.contains("SpecialToken")) {
    *is_sequence = false;
    *special = p["SpecialToken"].at("id").get<std::string>();
    return Status::Ok();
  }
  return Status::InvalidArgument("TemplateProcessing: bad piece " + p.dump());
}

Status MakeTemplate(const json& j, std::unique_ptr<PostProcessor>* out) {
  std::map<std::string, std::vector<std::int32_t>> specials;
  if (j.contains("special_tokens") && j["special_tokens"].is_object())
    for (const auto& [name, tok] : j["special_tokens"].items())
      specials[name] = tok.at("ids").get<std::vector<std::int32_t>>();
  if (!j.contains("single"))
    return Status::InvalidArgument("TemplateProcessing: missing single template");
  json single = j["single"];
  if (single.is_string()) {  // "<s> $A": pieces separated by whitespace
    std::istringstream words(single.get<std::string>());
    json list = json::array();
    for (std::string w; words >> w;) list.push_back(w);
    single = list;
  }
  if (!single.is_array())
    return Status::InvalidArgument("TemplateProcessing: single template is not a list");
  std::vector<TemplateProcessor::Piece> pieces;
  for (const json& p : single) {
    bool is_sequence = false;
    std::string special;
    if (Status s = ParsePiece(p, &is_sequence, &special); !s.ok()) return s;
    if (is_sequence) {
      pieces.push_back({true, {}});
      continue;
    }
    const auto it = specials.find(special);
    if (it == specials.end())
      return Status::InvalidArgument("TemplateProcessing: missing special token '" + special + "'");
    pieces.push_back({false, it->second});
  }
  *out = std::make_unique<TemplateProcessor>(std::move(pieces));
  return Status::Ok();
}

// BertProcessing / RobertaProcessing: "cls": ["<s>", 0], "sep": ["</s>", 2].
Status MakeClsSep(const json& j, const std::string& type, std::unique_ptr<PostProcessor>* out) {
  if (!j.contains("cls") || !j.contains("sep") || !j["cls"].is_array() || !j["sep"].is_array() ||
      j["cls"].size() != 2 || j["sep"].size() != 2)
    return Status::InvalidArgument(type + ": cls and sep must be [token, id]");
  std::vector<TemplateProcessor::Piece> pieces = {{false, {j["cls"][1].get<std::int32_t>()}},
                                                  {true, {}},
                                                  {false, {j["sep"][1].get<std::int32_t>()}}};
  *out = std::make_unique<TemplateProcessor>(std::move(pieces));
  return Status::Ok();
}

Status MakeImpl(const json& j, std::unique_ptr<PostProcessor>* out) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return Status::InvalidArgument("post_processor without a type: " + j.dump().substr(0, 80));
  const std::string type = j["type"].get<std::string>();
  if (type == "TemplateProcessing") return MakeTemplate(j, out);
  if (type == "BertProcessing" || type == "RobertaProcessing") return MakeClsSep(j, type, out);
  if (type == "ByteLevel") {  // trims offsets, which are not tracked here
    *out = std::make_unique<NoOpProcessor>();
    return Status::Ok();
  }
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array())
      return Status::InvalidArgument("Sequence post_processor: missing processors");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const json& each : j["processors"]) {
      std::unique_ptr<PostProcessor> p;
      if (Status s = MakeImpl(each, &p); !s.ok()) return s;
      parts.push_back(std::move(p));
    }
    *out = std::make_unique<SequenceProcessor>(std::move(parts));
    return Status::Ok();
  }
  return Status::InvalidArgument("post_processor '" + type + "' is not supported");
}

}  // namespace

Status MakePostProcessor(const json& j, std::unique_ptr<PostProcessor>* out) {
  try {
    return MakeImpl(j, out);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("post_processor: ") + e.what());
  }
}

}  // namespace sightline::hf
