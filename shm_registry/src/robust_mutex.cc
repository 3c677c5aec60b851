#include "robust_mutex.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace sightline::metrics {

Status InitRobustMutex(pthread_mutex_t* mutex) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  int rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  if (rc == 0) rc = pthread_mutex_init(mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  if (rc != 0) return Status::IoError(std::string("pthread_mutex_init: ") + std::strerror(rc));
  return Status::Ok();
}

RobustLock::RobustLock(pthread_mutex_t* mutex) : mutex_(mutex) {
  int rc = pthread_mutex_lock(mutex_);
  if (rc == EOWNERDEAD) {
    owner_died_ = true;
    pthread_mutex_consistent(mutex_);
  }
}

RobustLock::~RobustLock() {
  pthread_mutex_unlock(mutex_);
}

bool ProbeLifelineOwnerGone(pthread_mutex_t* lifeline) {
  int rc = pthread_mutex_trylock(lifeline);
  if (rc == EBUSY) return false;
  if (rc == EOWNERDEAD) pthread_mutex_consistent(lifeline);
  // 0 (released) or EOWNERDEAD (died holding it): either way the owner is gone.
  // ENOTRECOVERABLE cannot happen: every taker marks the mutex consistent.
  return rc == 0 || rc == EOWNERDEAD;
}

}  // namespace sightline::metrics
