#include "server/generation_job.h"

#include "absl/strings/str_cat.h"
#include "server/image_encoding.h"

namespace mulo::server {
namespace {

void FillStats(const engine::Stats& s, double queue_seconds, v1::Stats* out) {
  out->set_tokens(static_cast<uint32_t>(s.tokens));
  out->set_target_forward_passes(static_cast<uint32_t>(s.target_forward_passes));
  out->set_draft_forward_passes(static_cast<uint32_t>(s.draft_forward_passes));
  out->set_drafted_tokens(static_cast<uint32_t>(s.drafted_tokens));
  out->set_accepted_tokens(static_cast<uint32_t>(s.accepted_tokens));
  out->set_resampled_tokens(static_cast<uint32_t>(s.resampled_tokens));
  out->set_relaxed_accepted_tokens(static_cast<uint32_t>(s.relaxed_accepted_tokens));
  out->set_expansion_resampled_tokens(static_cast<uint32_t>(s.expansion_resampled_tokens));
  out->set_prefix_own_tokens(static_cast<uint32_t>(s.prefix_own_tokens));
  out->set_prefix_downsampled_tokens(static_cast<uint32_t>(s.prefix_downsampled_tokens));
  out->set_pooled_drafts(static_cast<uint32_t>(s.pooled_drafts));
  out->set_mean_pooled_neighbors(s.MeanPooledNeighbors());
  out->set_step_compression(s.StepCompression());
  out->set_acceptance_rate(s.AcceptanceRate());
  for (int64_t n : s.accepted_per_position) out->add_accepted_per_position(static_cast<uint32_t>(n));
  out->set_mean_accepted_length(s.MeanAcceptedLength());
  out->set_iterations(static_cast<uint32_t>(s.verify_steps));
  out->set_mean_tree_depth(s.MeanDraftedTreeDepth());
  out->set_mean_tree_width(s.MeanDraftedTreeWidth());
  for (int i = 0; i < engine::kNumPhases; ++i) {
    if (s.phase_seconds[i] > 0) {
      (*out->mutable_phase_seconds())[engine::PhaseName(static_cast<engine::Phase>(i))] =
          s.phase_seconds[i];
    }
  }
  out->set_queue_seconds(queue_seconds);
  out->set_total_seconds(s.total_seconds);
}

}  // namespace

// Streams committed rows to the mailbox (and, when asked, a decoded preview of the rows so
// far), noting when the first one arrived.
class GenerationJob::RowStream : public engine::ProgressSink {
 public:
  explicit RowStream(GenerationJob* job) : job_(job) {}

  void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>& tokens) override {
    const auto now = JobRecord::Clock::now();
    {
      std::lock_guard<std::mutex> lock(job_->mu_);
      if (!job_->record_.first_row) job_->record_.first_row = now;
    }
    committed_.insert(committed_.end(), tokens.begin(), tokens.end());
    const ValidatedRequest& r = job_->request_;
    if (!r.stream_rows) return;
    const int64_t width = r.models->target->config().grid_size;
    JobEvent event;
    event.response.emplace();
    event.response->set_request_id(r.request_id);
    auto* rows = event.response->mutable_rows();
    rows->set_first_row(static_cast<uint32_t>(first_row));
    rows->set_width(static_cast<uint32_t>(width));
    for (int32_t t : tokens) rows->add_tokens(static_cast<uint32_t>(t));
    const int64_t done_rows = first_row + num_rows;
    if (r.preview_every_rows > 0 && done_rows / r.preview_every_rows >
                                        (first_row) / r.preview_every_rows) {
      // The VQ decoder is convolutional, so the committed rows decode on their own.
      auto preview = r.models->vq->DecodeToRgb(committed_, done_rows, width,
                                                   r.models->pixel_rounding);
      if (preview.ok()) {
        auto bytes = EncodeImage(*preview, r.image_format);
        if (bytes.ok()) rows->set_preview(*std::move(bytes));
      }
    }
    job_->Post(std::move(event));
  }

 private:
  GenerationJob* job_;
  std::vector<int32_t> committed_;
};

GenerationJob::GenerationJob(ValidatedRequest request,
                             engine::CancelToken::Clock::time_point deadline, bool has_deadline,
                             bool joins_batches, absl::Duration max_decode_time)
    : request_(std::move(request)),
      joins_batches_(joins_batches),
      max_decode_time_(max_decode_time),
      cancel_(has_deadline ? engine::CancelToken(deadline) : engine::CancelToken()) {
  record_.enqueued = JobRecord::Clock::now();
}

void GenerationJob::Post(JobEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.done) record_.finished = JobRecord::Clock::now();
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

std::optional<JobEvent> GenerationJob::NextEvent(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return !events_.empty(); })) {
    return std::nullopt;
  }
  JobEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

JobRecord GenerationJob::record() const {
  std::lock_guard<std::mutex> lock(mu_);
  return record_;
}

void GenerationJob::Skip(const absl::Status& why) {
  JobEvent event;
  event.done = true;
  event.status = why;
  Post(std::move(event));
}

void GenerationJob::Run(engine::ForwardBatcher* batcher) {
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
  options.batcher = batcher;
  auto result =
      r.prompt.empty()
          ? engine::GenerateImage(*r.decoder, *r.models, r.condition, r.sampling, rows, cancel_,
                                  options)
          : engine::GenerateImage(*r.decoder, *r.models, r.prompt, r.sampling, rows, cancel_,
                                  options);
  JobEvent event;
  event.done = true;
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
  auto bytes = EncodeImage(result->image, r.image_format);
  if (!bytes.ok()) {
    event.status = bytes.status();
    Post(std::move(event));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    record_.stats = result->stats;
    record_.tokens = static_cast<int64_t>(result->tokens.size());
  }
  event.response.emplace();
  event.response->set_request_id(r.request_id);
  auto* image = event.response->mutable_image();
  image->set_data(*std::move(bytes));
  image->set_format(r.image_format);
  image->set_width(static_cast<uint32_t>(result->image.width));
  image->set_height(static_cast<uint32_t>(result->image.height));
  for (int32_t t : result->tokens) image->add_tokens(static_cast<uint32_t>(t));
  FillStats(result->stats, queue_seconds, image->mutable_stats());
  Post(std::move(event));
}

}  // namespace mulo::server
