#include "server/generation_job.h"

#include "absl/strings/str_cat.h"
#include "server/engine_status.h"
#include "server/image_encoding.h"
#include "server/preview_schedule.h"

namespace mulo::server {

// Hands committed rows to the listener (with a decoded preview when one is due), noting when
// the first one arrived.
class GenerationJob::RowStream : public engine::ProgressSink {
 public:
  explicit RowStream(GenerationJob* job)
      : job_(job),
        width_(job->request_.engine->grid_size()),
        previews_(width_, job->request_.preview_every_rows, job->request_.partial_images) {}

  void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>& tokens) override {
    const auto now = JobRecord::Clock::now();
    {
      std::lock_guard<std::mutex> lock(job_->mu_);
      if (!job_->record_.first_row) job_->record_.first_row = now;
    }
    committed_.insert(committed_.end(), tokens.begin(), tokens.end());
    const ValidatedRequest& r = job_->request_;
    const int64_t done_rows = first_row + num_rows;
    const bool preview_due = previews_.Due(first_row, done_rows);
    if (!r.stream_rows && !preview_due) return;
    GenerationEvent event;
    event.kind = GenerationEvent::Kind::kRows;
    event.first_row = first_row;
    event.num_rows = num_rows;
    event.width = width_;
    event.tokens = tokens;
    if (preview_due) {
      auto preview = r.engine->Preview(committed_, done_rows);
      if (preview.ok() && r.full_size_previews) {
        // The grid is square, so the full image is as tall as it is wide.
        preview->pixels.resize(static_cast<size_t>(preview->width * preview->width * 3), 128);
        preview->height = preview->width;
      }
      if (preview.ok()) {
        auto bytes = EncodeImage(
            *preview, EncodeOptions{r.image_format, r.output_width, r.output_height,
                                    r.image_quality});
        if (bytes.ok()) {
          event.preview = *std::move(bytes);
          event.preview_index = previews_sent_++;
        }
      }
    }
    job_->Post(std::move(event));
  }

 private:
  GenerationJob* job_;
  const int64_t width_;  // the grid is square: rows of `width_` tokens, `width_` rows
  PreviewSchedule previews_;
  int previews_sent_ = 0;
  std::vector<int32_t> committed_;
};

GenerationJob::GenerationJob(ValidatedRequest request,
                             engine::CancelToken::Clock::time_point deadline, bool has_deadline,
                             bool joins_batches, absl::Duration max_decode_time,
                             GenerationListener listener)
    : request_(std::move(request)),
      joins_batches_(joins_batches),
      kv_demand_(request_.plan.kv_demand),
      max_decode_time_(max_decode_time),
      listener_(std::move(listener)),
      cancel_(has_deadline ? engine::CancelToken(deadline) : engine::CancelToken()) {
  record_.enqueued = JobRecord::Clock::now();
}

void GenerationJob::Post(GenerationEvent event) {
  if (event.kind == GenerationEvent::Kind::kDone) {
    std::lock_guard<std::mutex> lock(mu_);
    record_.finished = JobRecord::Clock::now();
  }
  listener_(std::move(event));
}

JobRecord GenerationJob::record() const {
  std::lock_guard<std::mutex> lock(mu_);
  return record_;
}

void GenerationJob::Skip(const absl::Status& why) {
  GenerationEvent event;
  event.status = why;
  Post(std::move(event));
}

void GenerationJob::Run(engine::EngineLoop* loop, engine::KvReservation* kv) {
  const auto started = JobRecord::Clock::now();
  double queue_seconds;
  {
    std::lock_guard<std::mutex> lock(mu_);
    record_.started = started;
    queue_seconds = std::chrono::duration<double>(started - record_.enqueued).count();
  }
  if (max_decode_time_ != absl::InfiniteDuration()) {
    cancel_.LimitWorkUntil(started + absl::ToChronoNanoseconds(max_decode_time_));
  }
  RowStream rows(this);
  const ValidatedRequest& r = request_;
  engine::GenerateOptions options;
  options.loop = loop;
  options.kv = kv;
  auto result = r.engine->Run(r.plan, rows, cancel_, options);
  GenerationEvent event;  // kDone unless the image follows
  if (!result.ok()) {
    event.status = ToAbsl(result.status());
    if (absl::IsDeadlineExceeded(event.status) && cancel_.WorkLimitPassed()) {
      event.status = absl::DeadlineExceededError(absl::StrCat(
          "request: decoding ran past this server's limit of ",
          absl::FormatDuration(max_decode_time_),
          " per request (--max_decode_time); ask for less work (a smaller draft tree or "
          "window) or run a server with a higher limit"));
    }
    Post(std::move(event));
    return;
  }
  auto bytes = EncodeImage(result->image, EncodeOptions{r.image_format, r.output_width,
                                                        r.output_height, r.image_quality});
  if (!bytes.ok()) {
    event.status = bytes.status();
    Post(std::move(event));
    return;
  }
  GenerationEvent image;
  {
    std::lock_guard<std::mutex> lock(mu_);
    record_.stats = result->stats;
    record_.tokens = static_cast<int64_t>(result->tokens.size());
    if (record_.first_row) {
      image.first_row_seconds =
          std::chrono::duration<double>(*record_.first_row - record_.enqueued).count();
    }
  }
  image.kind = GenerationEvent::Kind::kImage;
  image.image = *std::move(bytes);
  image.format = r.image_format;
  image.image_width = r.output_width > 0 ? r.output_width : result->image.width;
  image.image_height = r.output_height > 0 ? r.output_height : result->image.height;
  image.tokens = result->tokens;
  image.stats = result->stats;
  if (!r.return_commit_map) image.stats.commit_map.clear();
  image.queue_seconds = queue_seconds;
  image.method = r.plan.method;
  image.method_choice = r.plan.method_config.chosen_by;
  Post(std::move(image));
  Post(std::move(event));
}

}  // namespace mulo::server
