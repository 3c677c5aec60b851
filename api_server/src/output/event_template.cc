#include "output/event_template.h"

namespace sightline::api {

bool EventTemplate::Make(const std::string& rendered, int n) {
  pieces_.clear();
  std::vector<std::string> pieces;
  std::size_t from = 0;
  for (int i = 0; i < n; ++i) {
    const std::string quoted = '"' + Placeholder(i) + '"';
    const std::size_t at = rendered.find(quoted, from);
    if (at == std::string::npos || rendered.find(quoted, at + 1) != std::string::npos) return false;
    pieces.push_back(rendered.substr(from, at - from));
    from = at + quoted.size();
  }
  pieces.push_back(rendered.substr(from));
  pieces_ = std::move(pieces);
  return true;
}

std::string EventTemplate::Fill(const std::vector<std::string>& values) const {
  std::size_t size = 0;
  for (const auto& p : pieces_) size += p.size();
  for (const auto& v : values) size += v.size();
  std::string out;
  out.reserve(size);
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    out += pieces_[i];
    if (i < values.size()) out += values[i];
  }
  return out;
}

}  // namespace sightline::api
