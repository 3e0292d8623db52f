#include "server/preview_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace mulo::server {
namespace {

// Feeds steps of `step` rows through a schedule; returns the done-row counts that got a preview.
std::vector<int64_t> PreviewsAt(PreviewSchedule schedule, int64_t grid, int64_t step) {
  std::vector<int64_t> at;
  for (int64_t first = 0; first < grid; first += step) {
    const int64_t done = std::min(grid, first + step);
    if (schedule.Due(first, done)) at.push_back(done);
  }
  return at;
}

TEST(PreviewScheduleTest, PartialImagesAreSpacedEvenlyOverTheRows) {
  EXPECT_EQ(PreviewSchedule(16, 0, 1).points(), (std::vector<int64_t>{8}));
  EXPECT_EQ(PreviewSchedule(16, 0, 2).points(), (std::vector<int64_t>{5, 11}));
  EXPECT_EQ(PreviewSchedule(16, 0, 3).points(), (std::vector<int64_t>{4, 8, 12}));
  EXPECT_EQ(PreviewSchedule(32, 0, 3).points(), (std::vector<int64_t>{8, 16, 24}));
  EXPECT_TRUE(PreviewSchedule(16, 0, 0).points().empty());
  // Two rows cannot hold three points: they round together and the last row is no point.
  EXPECT_EQ(PreviewSchedule(2, 0, 3).points(), (std::vector<int64_t>{1}));
}

TEST(PreviewScheduleTest, RowAtATimeGetsEveryPartialImage) {
  EXPECT_EQ(PreviewsAt(PreviewSchedule(16, 0, 3), 16, 1), (std::vector<int64_t>{4, 8, 12}));
  EXPECT_EQ(PreviewsAt(PreviewSchedule(16, 0, 2), 16, 1), (std::vector<int64_t>{5, 11}));
}

TEST(PreviewScheduleTest, AStepPassingSeveralPointsSendsOnePreview) {
  // Steps of 6 rows: 6 passes 4, 12 passes 8 and 12, 16 is the final image (no partial).
  EXPECT_EQ(PreviewsAt(PreviewSchedule(16, 0, 3), 16, 6), (std::vector<int64_t>{6, 12}));
  // One step of the whole image: the final image only.
  EXPECT_TRUE(PreviewsAt(PreviewSchedule(16, 0, 3), 16, 16).empty());
}

TEST(PreviewScheduleTest, EveryNRowsIncludesTheLastRow) {
  EXPECT_EQ(PreviewsAt(PreviewSchedule(16, 4, 0), 16, 1), (std::vector<int64_t>{4, 8, 12, 16}));
  EXPECT_EQ(PreviewsAt(PreviewSchedule(16, 4, 0), 16, 3),
            (std::vector<int64_t>{6, 9, 12, 16}));
  EXPECT_TRUE(PreviewsAt(PreviewSchedule(16, 0, 0), 16, 1).empty());
}

}  // namespace
}  // namespace mulo::server
