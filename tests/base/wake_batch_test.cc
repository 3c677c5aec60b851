// WakeBatch (sightline/wake_batch.h): a queue asking inside a batch is woken
// once, at the end of the outermost batch, on that thread only; it is kept
// alive until then; a wake that throws costs nothing else.
#include "sightline/wake_batch.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

namespace wake_batch_test {

using sightline::Wakeable;
using sightline::WakeBatch;

struct Counter : Wakeable {
  int wakes = 0;
  bool throws = false;
  bool* gone = nullptr;
  ~Counter() override {
    if (gone) *gone = true;
  }
  void Wake() override {
    ++wakes;
    if (throws) throw std::runtime_error("wake");
  }
};

TEST(WakeBatch, OutsideABatchTheCallerWakes) {
  auto q = std::make_shared<Counter>();
  EXPECT_FALSE(WakeBatch::Defer(*q));
  EXPECT_EQ(q->wakes, 0);
}

TEST(WakeBatch, OnceAtTheEndOfTheOutermostBatch) {
  auto a = std::make_shared<Counter>(), b = std::make_shared<Counter>();
  {
    WakeBatch outer;
    for (int i = 0; i < 100; ++i) EXPECT_TRUE(WakeBatch::Defer(*a));
    {
      WakeBatch inner;
      EXPECT_TRUE(WakeBatch::Defer(*b));
      EXPECT_TRUE(WakeBatch::Defer(*a));
    }
    EXPECT_EQ(a->wakes, 0);
    EXPECT_EQ(b->wakes, 0);
  }
  EXPECT_EQ(a->wakes, 1);
  EXPECT_EQ(b->wakes, 1);
  {
    WakeBatch again;  // a second batch starts afresh
    EXPECT_TRUE(WakeBatch::Defer(*a));
  }
  EXPECT_EQ(a->wakes, 2);
  EXPECT_EQ(b->wakes, 1);
}

TEST(WakeBatch, KeepsTheQueueAliveUntilItWakes) {
  bool gone = false;
  auto q = std::make_shared<Counter>();
  q->gone = &gone;
  {
    WakeBatch batch;
    EXPECT_TRUE(WakeBatch::Defer(*q));
    q.reset();  // its owner lets go mid-batch
    EXPECT_FALSE(gone);
  }
  EXPECT_TRUE(gone);
}

TEST(WakeBatch, AThrowingWakeCostsNothingElse) {
  auto bad = std::make_shared<Counter>(), good = std::make_shared<Counter>();
  bad->throws = true;
  {
    WakeBatch batch;
    WakeBatch::Defer(*bad);
    WakeBatch::Defer(*good);
  }
  EXPECT_EQ(bad->wakes, 1);
  EXPECT_EQ(good->wakes, 1);
  {
    WakeBatch batch;  // the thread's state is whole after the throw
    EXPECT_TRUE(WakeBatch::Defer(*good));
  }
  EXPECT_EQ(good->wakes, 2);
}

TEST(WakeBatch, OnlyTheBatchsThread) {
  auto q = std::make_shared<Counter>();
  WakeBatch batch;
  bool deferred = true;
  std::thread([&] { deferred = WakeBatch::Defer(*q); }).join();
  EXPECT_FALSE(deferred);
}

}  // namespace wake_batch_test
