// Reading safetensors files: a memory map of the file (RAII), its header
// parsed into tensor references (dtype, shape, byte range, checked against
// the file), and one tensor converted to float32 after its shape is checked.
// Shared by the model loader (safetensors.cc) and the LoRA adapter loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sightline/engine_core/safetensors.h"
#include "sightline/status.h"

namespace sightline::engine {

// A read-only memory map of a whole file (RAII).
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  Status Open(const std::string& path);
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

struct TensorRef {
  const MappedFile* file;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::size_t begin, end;  // absolute byte offsets in the file
};

// Adds the tensors of `f` (which must outlive them) to `tensors`; every
// malformed header, dtype other than F32/F16/BF16, or byte range that does
// not fit its shape or the file is an error naming the file and tensor.
Status ParseSafetensorsHeader(const MappedFile& f, std::map<std::string, TensorRef>* tensors);

// Tensor `name` as float32, after checking that it has `shape` (`out` null:
// the check alone, no data read).
Status ReadTensor(const std::map<std::string, TensorRef>& tensors, const std::string& name,
                  const std::vector<std::int64_t>& shape, std::vector<float>* out);

// Writes a safetensors file of `tensors` in `dtype` (data 8-byte aligned).
struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  const std::vector<float>* data;
};
Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        DType dtype);

// "[a, b]", for messages.
std::string ShapeString(const std::vector<std::int64_t>& shape);

}  // namespace sightline::engine
