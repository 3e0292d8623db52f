// When a generation attaches a decoded preview of its committed rows: every N rows
// (StreamOptions.preview_every_rows), and at up to K points spaced evenly over the image
// (StreamOptions.partial_images, the OpenAI Images API's partial images). Methods commit rows
// in steps of varying size, so a preview is due when a step's rows reach or pass a point.
#ifndef MULO_SERVER_PREVIEW_SCHEDULE_H_
#define MULO_SERVER_PREVIEW_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mulo::server {

class PreviewSchedule {
 public:
  // `grid_rows`: the image's token rows. `every_rows` 0 and `partial_images` 0 mean never.
  PreviewSchedule(int64_t grid_rows, int64_t every_rows, int partial_images);

  // A step committed rows [first_row, done_rows): whether a preview is due now. One step
  // passing several points gets one preview. Partial images skip the image's last row (the
  // final image follows at once), as OpenAI's may arrive fewer than asked.
  bool Due(int64_t first_row, int64_t done_rows);

  // The evenly spaced points, in rows (for tests and docs).
  const std::vector<int64_t>& points() const { return points_; }

 private:
  const int64_t grid_rows_;
  const int64_t every_rows_;
  std::vector<int64_t> points_;  // ascending, in [1, grid_rows)
  size_t next_point_ = 0;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_PREVIEW_SCHEDULE_H_
