// Which compute devices this process can use.
#pragma once

#include <cstdint>

namespace sightline::kernels {

// True when this build has CUDA kernels and a device is usable right now.
bool CudaAvailable();

// Free and total memory of the current CUDA device; false without one.
bool CudaMemoryInfo(std::uint64_t* free_bytes, std::uint64_t* total_bytes);

}  // namespace sightline::kernels
