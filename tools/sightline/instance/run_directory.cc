#include "instance/run_directory.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace sightline::cli {

std::string RunDirectoryPath(const std::string& instance) {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  return (runtime && *runtime ? std::string(runtime) : std::string("/tmp")) + "/sightline-" +
         instance;
}

Status RunDirectory::Create(const std::string& instance) {
  const std::string path = RunDirectoryPath(instance);
  std::error_code ec;
  std::filesystem::remove_all(path, ec);  // a symlink is removed, not followed
  if (ec) return Status::IoError("cannot remove the stale run directory " + path);
  if (mkdir(path.c_str(), 0700) != 0)
    return Status::IoError("cannot create the run directory " + path + ": " + std::strerror(errno));
  path_ = path;
  return Status::Ok();
}

RunDirectory::~RunDirectory() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

}  // namespace sightline::cli
