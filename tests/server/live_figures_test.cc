#include "server/live_figures.h"

#include <gtest/gtest.h>

#include <chrono>

namespace mulo::server {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using Clock = LiveFigures::Clock;

TEST(LiveFiguresTest, MethodsAreSummedOverTheWindowAndTheRateOverTheLastMinute) {
  const Clock::time_point start{};
  LiveFigures live(minutes(5), start);
  // ar: 256 tokens in 256 forwards, no drafts; mulo: two images, 30 accepted in 10 steps and
  // 50 in 10 (mean 4.0 over both), 256 tokens in 64 and 256 in 64 forwards.
  live.Record({"ar", 256, 256, 0, 0}, start + minutes(2));
  live.Record({"mulo", 256, 64, 30, 10}, start + minutes(5) + seconds(30));
  live.Record({"mulo", 256, 64, 50, 10}, start + minutes(6));
  const LiveFigures::Snapshot at = live.Read(start + minutes(6) + seconds(10));
  EXPECT_DOUBLE_EQ(at.window_seconds, 300.0);
  // Two images in the last minute.
  EXPECT_DOUBLE_EQ(at.images_per_second, 2.0 / 60.0);
  ASSERT_EQ(at.methods.size(), 2u);
  EXPECT_EQ(at.methods[0].method, "ar");
  EXPECT_EQ(at.methods[0].images, 1);
  EXPECT_DOUBLE_EQ(at.methods[0].mean_accepted_length, 0.0);
  EXPECT_DOUBLE_EQ(at.methods[0].step_compression, 1.0);
  EXPECT_EQ(at.methods[1].method, "mulo");
  EXPECT_EQ(at.methods[1].images, 2);
  EXPECT_DOUBLE_EQ(at.methods[1].mean_accepted_length, 4.0);
  EXPECT_DOUBLE_EQ(at.methods[1].step_compression, 4.0);
  // Five minutes on, ar's image has left the window, then mulo's.
  const LiveFigures::Snapshot later = live.Read(start + minutes(7) + seconds(30));
  ASSERT_EQ(later.methods.size(), 1u);
  EXPECT_EQ(later.methods[0].method, "mulo");
  EXPECT_DOUBLE_EQ(later.images_per_second, 0.0);
  EXPECT_TRUE(live.Read(start + minutes(12)).methods.empty());
}

TEST(LiveFiguresTest, AYoungServersRateIsOverItsLifeNotAWholeMinute) {
  const Clock::time_point start{};
  LiveFigures live(minutes(5), start);
  for (int i = 0; i < 10; ++i) live.Record({"ar", 16, 16, 0, 0}, start + seconds(1));
  const LiveFigures::Snapshot at = live.Read(start + seconds(5));
  EXPECT_DOUBLE_EQ(at.images_per_second, 2.0);  // ten images in its first five seconds
  EXPECT_DOUBLE_EQ(at.window_seconds, 5.0);
  EXPECT_EQ(at.running, 0);
  EXPECT_EQ(at.queued, 0);
}

}  // namespace
}  // namespace mulo::server
