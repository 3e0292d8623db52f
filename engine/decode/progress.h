// Streaming of committed token rows, in raster order, as a method commits them.
#ifndef MULO_ENGINE_DECODE_PROGRESS_H_
#define MULO_ENGINE_DECODE_PROGRESS_H_

#include <cstdint>
#include <vector>

namespace mulo::engine {

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // Rows [first_row, first_row + num_rows) are final; `tokens` holds their ids in raster
  // order (num_rows * grid_width ids).
  virtual void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>& tokens) = 0;
};

class NullProgressSink : public ProgressSink {
 public:
  void OnRows(int64_t, int64_t, const std::vector<int32_t>&) override {}
};

// Tracks how much of the raster is committed and reports every newly completed row once.
class RowEmitter {
 public:
  RowEmitter(int64_t grid_width, ProgressSink* sink) : width_(grid_width), sink_(sink) {}

  // `tokens` is the whole committed prefix (its length may grow by any amount per call).
  void Commit(const std::vector<int32_t>& tokens) {
    const int64_t complete = static_cast<int64_t>(tokens.size()) / width_;
    if (complete <= rows_sent_) return;
    std::vector<int32_t> rows(tokens.begin() + rows_sent_ * width_,
                              tokens.begin() + complete * width_);
    sink_->OnRows(rows_sent_, complete - rows_sent_, rows);
    rows_sent_ = complete;
  }

  int64_t rows_sent() const { return rows_sent_; }

 private:
  int64_t width_;
  ProgressSink* sink_;
  int64_t rows_sent_ = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_PROGRESS_H_
