// SharedSegment: RAII ownership of one mapped POSIX shared-memory segment
// (Boost.Interprocess does the shm_open/ftruncate/mmap; errors become Status).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "sightline/status.h"

namespace sightline::metrics {

class SharedSegment {
 public:
  SharedSegment();
  ~SharedSegment();  // unmaps; never unlinks (that is Unlink's job)
  SharedSegment(SharedSegment&&) noexcept;
  SharedSegment& operator=(SharedSegment&&) noexcept;

  // Creates `name` exclusively with mode 0600 and maps `bytes` of zeros.
  static Status Create(const std::string& name, std::size_t bytes, SharedSegment* out);
  // Maps an existing segment read-write.
  static Status Open(const std::string& name, SharedSegment* out);
  static Status Unlink(const std::string& name);

  void* base() const;
  std::size_t size() const;

 private:
  struct Rep;
  std::unique_ptr<Rep> rep_;
};

}  // namespace sightline::metrics
