// LoraManager (issue 41): adapters by name, residency past --max-cpu-loras
// decided least-recently-used and never for an adapter requests hold, an
// evicted adapter read again from its path, and an unload that waits for its
// requests. The runner's slots are a recording fake: which adapter sits where.
#include "lora/lora_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

namespace sightline::engine {
namespace {

namespace fs = std::filesystem;

class LoraManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(PresetModelConfig("sightline-tiny", &model_).ok());
    dir_ = fs::temp_directory_path() / ("sightline-lora-manager-" + std::to_string(getpid()));
    for (int i = 0; i < 4; ++i)
      ASSERT_TRUE(WriteLoraAdapter(Path(i), model_,
                                   RandomLoraAdapter(model_, 4, 8, false, {LoraModule::kQ}, i + 1))
                      .ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(int i) const { return (dir_ / ("a" + std::to_string(i))).string(); }
  std::string Name(int i) const { return "a" + std::to_string(i); }

  // A manager over a fake runner: slots_[slot] is the adapter there (its
  // first q_a value tells which one), reads_ counts the weights put in.
  LoraManager Make(int max_cpu_loras) {
    return LoraManager(model_, 16, max_cpu_loras,
                       [this](int slot, std::shared_ptr<const LoraAdapter> a) {
                         if (a) {
                           slots_[slot] = a;
                           ++reads_;
                         } else {
                           slots_.erase(slot);
                         }
                         return Status::Ok();
                       });
  }
  // The slot `name` was given, by acquiring it.
  int Slot(LoraManager& m, const std::string& name) {
    int slot = 0;
    std::string key;
    EXPECT_TRUE(m.Acquire(name, &slot, &key).ok()) << name;
    return slot;
  }

  ModelConfig model_;
  fs::path dir_;
  std::map<int, std::shared_ptr<const LoraAdapter>> slots_;
  int reads_ = 0;
};

TEST_F(LoraManagerTest, NamesAreServedUntilRemovedAndKeysNameTheRegistration) {
  LoraManager m = Make(0);
  ASSERT_TRUE(m.Add(Name(0), Path(0), nullptr).ok());  // read from the path
  EXPECT_EQ(m.Add(Name(0), Path(1), nullptr).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(m.Add("", Path(1), nullptr).code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(m.Add("missing", (dir_ / "missing").string(), nullptr).ok());
  EXPECT_EQ(m.adapters(), (std::vector<std::pair<std::string, std::string>>{{Name(0), Path(0)}}));
  int slot = 0;
  std::string first, second;
  ASSERT_TRUE(m.Acquire(Name(0), &slot, &first).ok());
  EXPECT_EQ(slot, 1);
  EXPECT_EQ(m.Acquire("other", &slot, &first).code(), Status::Code::kNotFound);
  ASSERT_TRUE(m.Remove(Name(0)).ok());
  EXPECT_EQ(m.Remove(Name(0)).code(), Status::Code::kNotFound);
  EXPECT_TRUE(m.adapters().empty());
  EXPECT_EQ(m.Acquire(Name(0), &slot, &first).code(), Status::Code::kNotFound);
  // Registered again under the same name: another key, so its requests
  // never find the first registration's KV blocks.
  ASSERT_TRUE(m.Add(Name(0), Path(0), nullptr).ok());
  ASSERT_TRUE(m.Acquire(Name(0), &slot, &second).ok());
  EXPECT_NE(first, second);
}

TEST_F(LoraManagerTest, PastMaxCpuLorasTheLeastRecentlyUsedIdleAdapterIsEvictedAndReadAgain) {
  LoraManager m = Make(2);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(m.Add(Name(i), Path(i), nullptr).ok());
  // Three resident until trimmed; nothing held: the oldest (a0) goes.
  EXPECT_TRUE(m.NeedsTrim());
  m.Trim([](int) { return false; });
  EXPECT_EQ(m.resident(), 2);
  EXPECT_FALSE(m.NeedsTrim());
  EXPECT_EQ(slots_.count(1), 0u) << "a0 was in slot 1";
  EXPECT_EQ(m.adapters().size(), 3u) << "evicted is still served";
  // a1 used now, so a2 is the least recently used; a0 comes back (read
  // again from its path, into the free slot) and a2 is evicted.
  const int a1 = Slot(m, Name(1));
  const int reads = reads_;
  const int a0 = Slot(m, Name(0));
  EXPECT_EQ(reads_, reads + 1);
  EXPECT_EQ(a0, 1);
  m.Trim([](int) { return false; });
  EXPECT_EQ(m.resident(), 2);
  EXPECT_EQ(slots_.size(), 2u);
  EXPECT_EQ(slots_.count(a0) + slots_.count(a1), 2u) << "a2 went, the two just used stay";
  // The weights read again are the adapter's own.
  LoraAdapter expected;
  ASSERT_TRUE(LoadLoraAdapter(Path(0), model_, 16, &expected).ok());
  constexpr auto kQ = static_cast<std::size_t>(LoraModule::kQ);
  EXPECT_EQ(slots_.at(a0)->layers[0][kQ].a, expected.layers[0][kQ].a);
}

TEST_F(LoraManagerTest, AnAdapterRequestsHoldIsNeverEvictedNorFreed) {
  LoraManager m = Make(1);
  ASSERT_TRUE(m.Add(Name(0), Path(0), nullptr).ok());
  const int held = Slot(m, Name(0));
  ASSERT_TRUE(m.Add(Name(1), Path(1), nullptr).ok());
  const int other = Slot(m, Name(1));
  // Both held: over the bound, nothing can go.
  m.Trim([&](int s) { return s == held || s == other; });
  EXPECT_EQ(m.resident(), 2);
  // a1's requests finished: a1 goes although a0 is older.
  m.Trim([&](int s) { return s == held; });
  EXPECT_EQ(m.resident(), 1);
  EXPECT_EQ(slots_.count(held), 1u);
  // Removed while held: the name is gone, the slot stays until released.
  ASSERT_TRUE(m.Remove(Name(0)).ok());
  EXPECT_TRUE(m.NeedsTrim());
  m.Trim([&](int s) { return s == held; });
  EXPECT_EQ(slots_.count(held), 1u);
  // A new adapter never takes a slot still in use.
  ASSERT_TRUE(m.Add(Name(2), Path(2), nullptr).ok());
  EXPECT_NE(Slot(m, Name(2)), held);
  m.Trim([](int) { return false; });
  EXPECT_EQ(slots_.count(held), 0u);
  EXPECT_EQ(m.adapters(), (std::vector<std::pair<std::string, std::string>>{{Name(1), Path(1)},
                                                                            {Name(2), Path(2)}}));
}

TEST_F(LoraManagerTest, AnAdapterThatCannotBeReadAgainIsRefusedByName) {
  LoraManager m = Make(1);
  ASSERT_TRUE(m.Add(Name(0), Path(0), nullptr).ok());
  ASSERT_TRUE(m.Add(Name(1), Path(1), nullptr).ok());
  m.Trim([](int) { return false; });  // a0 evicted
  fs::remove_all(Path(0));
  int slot = 0;
  std::string key;
  const Status s = m.Acquire(Name(0), &slot, &key);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'a0' could not be read again from " + Path(0)), std::string::npos)
      << s.message();
  EXPECT_EQ(m.adapters().size(), 2u);
}

}  // namespace
}  // namespace sightline::engine
