#include "segment.h"

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

namespace sightline::metrics {

namespace bip = boost::interprocess;

struct SharedSegment::Rep {
  bip::shared_memory_object shm;
  bip::mapped_region region;
};

SharedSegment::SharedSegment() = default;
SharedSegment::~SharedSegment() = default;
SharedSegment::SharedSegment(SharedSegment&&) noexcept = default;
SharedSegment& SharedSegment::operator=(SharedSegment&&) noexcept = default;

namespace {

Status FromException(const std::string& name, const bip::interprocess_exception& e) {
  const std::string where = "shared-memory segment /dev/shm" + name + ": ";
  switch (e.get_error_code()) {
    case bip::not_found_error:
      return Status::NotFound(where + "no such segment");
    case bip::already_exists_error:
      return Status::AlreadyExists(where + "already exists");
    case bip::security_error:
      return Status::PermissionDenied(where + "permission denied");
    default:
      return Status::IoError(where + e.what());
  }
}

}  // namespace

Status SharedSegment::Create(const std::string& name, std::size_t bytes, SharedSegment* out) {
  try {
    bip::permissions perm(0600);
    auto rep = std::make_unique<Rep>();
    rep->shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write, perm);
    // ftruncate: the pages stay sparse (zero) until touched.
    rep->shm.truncate(static_cast<bip::offset_t>(bytes));
    rep->region = bip::mapped_region(rep->shm, bip::read_write);
    out->rep_ = std::move(rep);
    return Status::Ok();
  } catch (const bip::interprocess_exception& e) {
    return FromException(name, e);
  }
}

Status SharedSegment::Open(const std::string& name, SharedSegment* out) {
  try {
    auto rep = std::make_unique<Rep>();
    rep->shm = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_write);
    bip::offset_t size = 0;
    if (!rep->shm.get_size(size) || size == 0) {
      return Status::Incompatible("shared-memory segment /dev/shm" + name +
                                  " is empty (its creator has not initialized it)");
    }
    rep->region = bip::mapped_region(rep->shm, bip::read_write);
    out->rep_ = std::move(rep);
    return Status::Ok();
  } catch (const bip::interprocess_exception& e) {
    return FromException(name, e);
  }
}

Status SharedSegment::Unlink(const std::string& name) {
  if (!bip::shared_memory_object::remove(name.c_str())) {
    return Status::NotFound("shared-memory segment /dev/shm" + name + ": could not remove");
  }
  return Status::Ok();
}

void* SharedSegment::base() const {
  return rep_ ? rep_->region.get_address() : nullptr;
}
std::size_t SharedSegment::size() const {
  return rep_ ? rep_->region.get_size() : 0;
}

}  // namespace sightline::metrics
