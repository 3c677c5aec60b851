// libFuzzer target: every input goes through Decode, and whatever passes is
// read in full. Built with clang when available (tests/CMakeLists.txt).
#include <cstddef>
#include <cstdint>

#include "ipc_schema/read_all.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (const auto* e = sightline::ipc::Decode({data, size})) sightline::ipc::ReadAll(e);
  return 0;
}
