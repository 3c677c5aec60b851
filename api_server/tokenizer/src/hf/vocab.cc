#include "hf/vocab.h"

#include <cstdint>
#include <nlohmann/json.hpp>

namespace sightline::hf {

Status Vocab::Load(const nlohmann::json& vocab, std::string_view model) {
  if (!vocab.is_object())
    return Status::InvalidArgument(std::string(model) + " model: missing vocab");
  ids_.reserve(vocab.size());
  tokens_.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() > INT32_MAX)
      return Status::InvalidArgument(std::string(model) + " vocab: id of '" + token +
                                     "' is not a valid id");
    const auto i = id.get<std::int32_t>();
    ids_[token] = i;
    tokens_[i] = token;
  }
  return Status::Ok();
}

}  // namespace sightline::hf
