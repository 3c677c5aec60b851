// Process-shared robust pthread mutexes placed in the segment. Boost's
// interprocess mutexes are not robust (a holder killed by SIGKILL would leave
// them locked forever), hence raw pthreads here.
#pragma once

#include <pthread.h>

#include "sightline/status.h"

namespace sightline::metrics {

Status InitRobustMutex(pthread_mutex_t* mutex);

// Locks a robust mutex for a scope. When the previous holder died while
// holding it, the lock is made consistent again and previous_owner_died() is
// true; the structures it guards are designed so a half-done update is
// harmless (entries are published last), so no repair is needed beyond that.
class RobustLock {
 public:
  explicit RobustLock(pthread_mutex_t* mutex);
  ~RobustLock();
  RobustLock(const RobustLock&) = delete;
  RobustLock& operator=(const RobustLock&) = delete;
  bool previous_owner_died() const { return owner_died_; }

 private:
  pthread_mutex_t* mutex_;
  bool owner_died_ = false;
};

// Probes a slot's lifeline without blocking. Returns true when the owner is
// gone (died holding it, or released it); false while some thread holds it.
// When true, the probing thread has taken the lifeline and made it consistent;
// it must release it with pthread_mutex_unlock once it has recorded the death.
bool ProbeLifelineOwnerGone(pthread_mutex_t* lifeline);

}  // namespace sightline::metrics
