#include "kv_events/kv_events_config.h"

#include <charconv>
#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "flags/json_flag.h"

namespace sightline::engine {

namespace {

Status KvInvalid(const std::string& what) {
  return Status::InvalidArgument("--kv-events-config: " + what);
}

bool HasTransport(std::string_view ep) {
  return ep.starts_with("tcp://") || ep.starts_with("ipc://") || ep.starts_with("inproc://");
}

// Each reader: absent leaves *out alone; a value of another JSON type is an
// error naming the key. `null_ok`: a JSON null counts as absent (vLLM's
// `X | None` fields); elsewhere it is a type error, as pydantic makes it.
Status ReadBool(const nlohmann::json& j, const char* key, bool* out) {
  const auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_boolean()) return KvInvalid(std::string(key) + " must be true or false");
  *out = it->get<bool>();
  return Status::Ok();
}

Status ReadString(const nlohmann::json& j, const char* key, bool null_ok, bool* present,
                  std::string* out) {
  *present = false;
  const auto it = j.find(key);
  if (it == j.end() || (null_ok && it->is_null())) return Status::Ok();
  if (!it->is_string()) return KvInvalid(std::string(key) + " must be a string");
  *out = it->get<std::string>();
  *present = true;
  return Status::Ok();
}

Status ReadInt(const nlohmann::json& j, const char* key, int min, int* out) {
  const auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_number_integer()) return KvInvalid(std::string(key) + " must be an integer");
  // A JSON integer above INT64_MAX parses as unsigned: out of range too.
  const bool too_big = it->is_number_unsigned() && it->get<std::uint64_t>() > INT_MAX;
  const auto v = too_big ? std::int64_t{INT_MAX} + 1 : it->get<std::int64_t>();
  if (v < min || v > INT_MAX)
    return KvInvalid(std::string(key) + " must be in [" + std::to_string(min) + ", " +
                     std::to_string(INT_MAX) + "]");
  *out = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

Status ParseKvEventsConfig(std::string_view text, KvEventsConfig* out) {
  *out = KvEventsConfig{};
  if (text.empty()) return Status::Ok();
  nlohmann::json j;
  if (Status s =
          ParseJsonFlag(text, "--kv-events-config",
                        {"enable_kv_cache_events", "publisher", "endpoint", "replay_endpoint",
                         "buffer_steps", "hwm", "max_queue_size", "topic"},
                        &j);
      !s.ok())
    return s;
  KvEventsConfig c;
  bool has_publisher = false, present = false;
  if (Status s = ReadBool(j, "enable_kv_cache_events", &c.enable_kv_cache_events); !s.ok())
    return s;
  if (Status s = ReadString(j, "publisher", /*null_ok=*/true, &has_publisher, &c.publisher);
      !s.ok())
    return s;
  if (Status s = ReadString(j, "endpoint", /*null_ok=*/false, &present, &c.endpoint); !s.ok())
    return s;
  if (Status s = ReadString(j, "replay_endpoint", /*null_ok=*/true, &present, &c.replay_endpoint);
      !s.ok())
    return s;
  if (Status s = ReadString(j, "topic", /*null_ok=*/false, &present, &c.topic); !s.ok()) return s;
  if (Status s = ReadInt(j, "buffer_steps", 1, &c.buffer_steps); !s.ok()) return s;
  if (Status s = ReadInt(j, "hwm", 0, &c.hwm); !s.ok()) return s;
  if (Status s = ReadInt(j, "max_queue_size", 1, &c.max_queue_size); !s.ok()) return s;
  if (!has_publisher) c.publisher = c.enable_kv_cache_events ? "zmq" : "null";
  if (c.publisher != "null" && c.publisher != "zmq")
    return KvInvalid("publisher \"" + c.publisher + "\" is not supported: \"zmq\" or \"null\"");
  if (!HasTransport(c.endpoint))
    return KvInvalid("endpoint \"" + c.endpoint + "\" must start with tcp://, ipc:// or inproc://");
  if (!c.replay_endpoint.empty() && !HasTransport(c.replay_endpoint))
    return KvInvalid("replay_endpoint \"" + c.replay_endpoint +
                     "\" must start with tcp://, ipc:// or inproc://");
  *out = c;
  return Status::Ok();
}

std::string OffsetEndpointPort(const std::string& endpoint, int data_parallel_rank, Status* error) {
  *error = Status::Ok();
  if (endpoint.empty() || data_parallel_rank == 0) return endpoint;
  const std::string rank = std::to_string(data_parallel_rank);
  if (data_parallel_rank < 0) {
    *error = KvInvalid("data parallel rank " + rank + " is negative");
    return "";
  }
  if (endpoint.starts_with("inproc://")) return endpoint + "_dp" + rank;
  if (endpoint.starts_with("tcp://")) {
    const std::size_t colon = endpoint.rfind(':');
    const std::string_view port_text = std::string_view(endpoint).substr(colon + 1);
    int port = 0;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    // The colon of "tcp://" itself separates no port.
    if (colon >= std::string_view("tcp://").size() && !port_text.empty() && ec == std::errc() &&
        end == port_text.data() + port_text.size() && port >= 0 &&
        port <= 65535 - data_parallel_rank)
      return endpoint.substr(0, colon + 1) + std::to_string(port + data_parallel_rank);
    *error =
        KvInvalid("endpoint \"" + endpoint + "\" has no port to offset by data parallel rank " +
                  rank + " (or the port passes 65535)");
    return "";
  }
  *error = KvInvalid("endpoint \"" + endpoint + "\" cannot be offset by data parallel rank " +
                     rank + ": only tcp:// and inproc:// endpoints can (vLLM's rule)");
  return "";
}

}  // namespace sightline::engine
