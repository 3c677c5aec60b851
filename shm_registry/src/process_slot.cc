// The writing process's slot: claiming it on first write (and again after
// fork), the lifeline that proves the process alive, clean release, and the
// overflow accounting.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <iostream>

#include "registry_impl.h"
#include "robust_mutex.h"

namespace sightline::metrics {

namespace {

// Every Registry::Impl of this process, so the fork handlers can reach them.
// Global by necessity: pthread_atfork handlers take no argument.
std::mutex g_registries_mu;
std::vector<Registry::Impl*>* g_registries = nullptr;

void PrepareFork() {
  g_registries_mu.lock();
  if (!g_registries) return;
  for (Registry::Impl* r : *g_registries) {
    r->claim_mu.lock();
    r->mu.lock();
  }
}

void ParentAfterFork() {
  if (g_registries)
    for (Registry::Impl* r : *g_registries) {
      r->mu.unlock();
      r->claim_mu.unlock();
    }
  g_registries_mu.unlock();
}

void ChildAfterFork() {
  if (g_registries)
    for (Registry::Impl* r : *g_registries) {
      r->ForgetSlotAfterFork();
      r->mu.unlock();
      r->claim_mu.unlock();
    }
  g_registries_mu.unlock();
}

void Track(Registry::Impl* r) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(PrepareFork, ParentAfterFork, ChildAfterFork); });
  std::lock_guard<std::mutex> g(g_registries_mu);
  if (!g_registries) g_registries = new std::vector<Registry::Impl*>();
  g_registries->push_back(r);
}

void Untrack(Registry::Impl* r) {
  std::lock_guard<std::mutex> g(g_registries_mu);
  if (g_registries) std::erase(*g_registries, r);
}

// The lifeline holder: a thread that lives as long as the slot is ours and
// holds the slot's robust mutex. If the process dies, the kernel marks the
// mutex owner-dead; a dedicated thread is used because a robust mutex also
// reports owner-dead when merely its locking *thread* exits.
struct HolderArgs {
  pthread_mutex_t* lifeline;
  int stop_fd;  // read end; EOF means "let go"
  std::promise<int> locked;
};

// Owns `p` (a HolderArgs) and frees it on exit, so the claimer never destroys
// a promise that this thread may still be inside.
void* HolderMain(void* p) {
  std::unique_ptr<HolderArgs> args(static_cast<HolderArgs*>(p));
  int rc = pthread_mutex_lock(args->lifeline);
  if (rc == EOWNERDEAD) {  // a reaper died holding it; the slot is ours now
    pthread_mutex_consistent(args->lifeline);
    rc = 0;
  }
  args->locked.set_value(rc);
  if (rc == 0) {
    char c;
    while (read(args->stop_fd, &c, 1) < 0 && errno == EINTR) {
    }
    pthread_mutex_unlock(args->lifeline);
  }
  close(args->stop_fd);
  return nullptr;
}

}  // namespace

Registry::Impl::~Impl() {
  Untrack(this);
}

void Registry::Impl::TrackForFork() {
  Track(this);
}

bool Registry::Impl::StartHolder(layout::SlotEntry* s) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  auto* args = new HolderArgs{&s->lifeline, fds[0], {}};
  std::future<int> locked = args->locked.get_future();
  if (pthread_create(&holder, nullptr, HolderMain, args) != 0) {
    delete args;
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  if (locked.get() != 0) {
    pthread_join(holder, nullptr);
    close(fds[1]);
    return false;
  }
  holder_running = true;
  holder_stop_fd = fds[1];
  return true;
}

std::uint64_t* Registry::Impl::ClaimSlow() {
  std::lock_guard<std::mutex> g(claim_mu);
  if (std::uint64_t* s = slab_.load(std::memory_order_acquire)) return s;

  int index = -1;
  for (int attempt = 0; attempt < 2 && index < 0; ++attempt) {
    if (attempt == 1) Reap();  // free the slots of dead processes, then retry
    RobustLock lock(&hdr->structure_lock);
    for (std::uint32_t i = 0; i < hdr->max_slots; ++i) {
      layout::SlotEntry* s = slot(i);
      if (s->state.load(std::memory_order_acquire) != layout::kFree) continue;
      s->state.store(layout::kClaiming, std::memory_order_relaxed);
      s->pid = getpid();
      const std::size_t n = std::min(role.size(), sizeof s->role - 1);
      std::memset(s->role, 0, sizeof s->role);
      std::memcpy(s->role, role.data(), n);
      s->marked_dead.store(0, std::memory_order_relaxed);
      s->generation.store(hdr->next_generation.fetch_add(1) + 1, std::memory_order_release);
      index = static_cast<int>(i);
      break;
    }
  }
  if (index >= 0) {
    layout::SlotEntry* s = slot(static_cast<std::uint32_t>(index));
    if (StartHolder(s)) {
      slot_index = index;
      s->state.store(layout::kLive, std::memory_order_release);
      std::uint64_t* cells = slab(static_cast<std::uint32_t>(index));
      slab_.store(cells, std::memory_order_release);
      return cells;
    }
    s->state.store(layout::kFree, std::memory_order_release);  // could not hold it
  }
  // No slot: record into private memory so the caller never blocks or fails.
  Overflow(OverflowReason::kSlots, role);
  fallback.assign(hdr->max_cells, 0);
  slab_.store(fallback.data(), std::memory_order_release);
  return fallback.data();
}

void Registry::Impl::ReleaseSlot() {
  {
    std::lock_guard<std::mutex> g(claim_mu);
    slab_.store(nullptr, std::memory_order_release);
    if (slot_index < 0) return;
    layout::SlotEntry* s = slot(static_cast<std::uint32_t>(slot_index));
    std::uint32_t live = layout::kLive;
    s->state.compare_exchange_strong(live, layout::kDead, std::memory_order_acq_rel);
    if (holder_running) {
      close(holder_stop_fd);  // the holder sees EOF and releases the lifeline
      pthread_join(holder, nullptr);
      holder_running = false;
    }
    slot_index = -1;
  }
  Reap();  // fold our values into the archive now, so they never drop
}

void Registry::Impl::ForgetSlotAfterFork() {
  // Runs in the child: the slot, its lifeline and its holder thread belong to
  // the parent. The child claims a fresh slot on its next write.
  slab_.store(nullptr, std::memory_order_relaxed);
  if (holder_running) close(holder_stop_fd);
  holder_running = false;
  slot_index = -1;
  fallback.clear();
}

void Registry::Impl::CountDropped(OverflowReason reason) {
  hdr->overflow[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void Registry::Impl::Overflow(OverflowReason reason, std::string_view what) {
  CountDropped(reason);
  const int r = static_cast<int>(reason);
  if (logged_overflow[r].exchange(true)) return;  // log once per reason and process
  std::cerr << "sightline: metrics registry '" << instance << "' is full ("
            << OverflowReasonName(reason) << ", at '" << what
            << "'); updates are dropped and counted in sightline:registry_overflow_total{reason=\""
            << OverflowReasonName(reason) << "\"}\n";
}

}  // namespace sightline::metrics
