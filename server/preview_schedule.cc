#include "server/preview_schedule.h"

namespace mulo::server {

PreviewSchedule::PreviewSchedule(int64_t grid_rows, int64_t every_rows, int partial_images)
    : grid_rows_(grid_rows), every_rows_(every_rows) {
  for (int i = 1; i <= partial_images; ++i) {
    // i * H / (K + 1), rounded; small grids can round two points together.
    const int64_t point = (2 * i * grid_rows + partial_images + 1) / (2 * (partial_images + 1));
    if (point < 1 || point >= grid_rows) continue;
    if (!points_.empty() && points_.back() == point) continue;
    points_.push_back(point);
  }
}

bool PreviewSchedule::Due(int64_t first_row, int64_t done_rows) {
  const bool every = every_rows_ > 0 && done_rows / every_rows_ > first_row / every_rows_;
  bool passed_point = false;
  while (next_point_ < points_.size() && done_rows >= points_[next_point_]) {
    passed_point = true;
    ++next_point_;
  }
  return every || (passed_point && done_rows < grid_rows_);
}

}  // namespace mulo::server
