#include "model/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/dtype.h"

namespace sightline::engine {

using nlohmann::json;

Status MappedFile::Open(const std::string& path) {
  path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::IoError("cannot stat " + path);
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Status::IoError("cannot map " + path);
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
  return Status::Ok();
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<std::uint8_t*>(data_), size_);
}

Status ParseSafetensorsHeader(const MappedFile& f, std::map<std::string, TensorRef>* tensors) {
  if (f.size() < 8)
    return Status::InvalidArgument(f.path() + ": too short to be a safetensors file");
  std::uint64_t header_len;
  std::memcpy(&header_len, f.data(), 8);  // little-endian by the format (x86-64 native)
  if (header_len > f.size() - 8)
    return Status::InvalidArgument(f.path() + ": header length " + std::to_string(header_len) +
                                   " exceeds the file (truncated?)");
  json header = json::parse(f.data() + 8, f.data() + 8 + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return Status::InvalidArgument(f.path() + ": the header is not a JSON object");
  const std::size_t data_start = 8 + header_len;
  for (auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = f.path() + ": tensor '" + name + "'";
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") ||
        !t.contains("data_offsets"))
      return Status::InvalidArgument(where + " lacks dtype, shape or data_offsets");
    const std::string dtype = t["dtype"].is_string() ? t["dtype"].get<std::string>() : "";
    TensorRef ref{&f, DType::kF32, {}, 0, 0};
    if (dtype == "F32")
      ref.dtype = DType::kF32;
    else if (dtype == "F16")
      ref.dtype = DType::kF16;
    else if (dtype == "BF16")
      ref.dtype = DType::kBF16;
    else
      return Status::InvalidArgument(where + " has dtype " + dtype + "; supported: F32, F16, BF16");
    std::uint64_t elems = 1;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
        return Status::InvalidArgument(where + " has an invalid shape");
      ref.shape.push_back(d.get<std::int64_t>());
      elems *= static_cast<std::uint64_t>(d.get<std::int64_t>());
    }
    const auto& off = t["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return Status::InvalidArgument(where + " has invalid data_offsets");
    ref.begin = data_start + off[0].get<std::size_t>();
    ref.end = data_start + off[1].get<std::size_t>();
    if (ref.end < ref.begin || ref.end - ref.begin != elems * DTypeBytes(ref.dtype))
      return Status::InvalidArgument(where + ": data_offsets do not match its shape and dtype");
    if (ref.end > f.size())
      return Status::InvalidArgument(where + " needs bytes up to " + std::to_string(ref.end) +
                                     " but the file has " + std::to_string(f.size()) +
                                     " (truncated?)");
    (*tensors)[name] = ref;
  }
  return Status::Ok();
}

Status ReadTensor(const std::map<std::string, TensorRef>& tensors, const std::string& name,
                  const std::vector<std::int64_t>& shape, std::vector<float>* out) {
  auto it = tensors.find(name);
  if (it == tensors.end())
    return Status::NotFound("tensor '" + name + "' is missing from the checkpoint");
  const TensorRef& t = it->second;
  if (t.shape != shape)
    return Status::InvalidArgument("tensor '" + name + "' has shape " + ShapeString(t.shape) +
                                   ", the config implies " + ShapeString(shape));
  if (!out) return Status::Ok();  // checked only
  const std::size_t n = (t.end - t.begin) / DTypeBytes(t.dtype);
  out->resize(n);
  const std::uint8_t* p = t.file->data() + t.begin;
  for (std::size_t i = 0; i < n; ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&(*out)[i], p + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      (*out)[i] = t.dtype == DType::kF16 ? HalfToFloat(h) : Bf16ToFloat(h);
    }
  }
  return Status::Ok();
}

Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        DType dtype) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string blob;
  for (const NamedTensor& t : tensors) {
    const std::size_t begin = blob.size();
    for (float v : *t.data) {
      if (dtype == DType::kF32) {
        blob.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const std::uint16_t h = dtype == DType::kF16 ? FloatToHalf(v) : FloatToBf16(v);
        blob.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    header[t.name] = {
        {"dtype", DTypeName(dtype)}, {"shape", t.shape}, {"data_offsets", {begin, blob.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  const std::uint64_t len = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << text << blob;
  if (!out) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

std::string ShapeString(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace sightline::engine
