#include "engine/decode/ar.h"

#include <utility>
#include <vector>


namespace mulo::engine {
namespace {

// Tokens are drawn on the target's device and fed back from there; the host reads them once
// per row of the grid, when the row is committed and streamed (one host synchronisation per
// row on a GPU instead of one per token). Position i's token uses the target stream's i-th
// number, so the tokens are those of a host draw (DecodeSession::DrawOnDevice); the numbers
// of every position are made at once, in one batch of tensor ops. Where the target's pool has
// graphs of whole rows (row_graphs.h), a row's draws and forwards are one replay of them: the
// same tokens, with one launch per row instead of a forward and a draw per token.
class ArState : public SteppedMethod::State {
 public:
  ArState(ModelStream* target, torch::Tensor uniforms)
      : target_(target), uniforms_(std::move(uniforms)) {}

  Status Step(DecodeSession& session) override {
    if (drawn_ % session.grid() == 0 && target_->CanFeedRow(session.grid(), session.sampling())) {
      return StepRow(session);
    }
    return StepToken(session);
  }

 private:
  // The next row of the grid, drawn, fed and read back in one replay, then committed.
  Status StepRow(DecodeSession& session) {
    const int64_t count = session.grid();
    auto timer = session.Time(Phase::kTargetForward);
    MULO_ASSIGN_OR_RETURN(
        const std::vector<int64_t> ids,
        target_->DrawAndFeedRow(
            uniforms_.defined() ? uniforms_.narrow(0, drawn_, count) : uniforms_,
            session.sampling(), count));
    drawn_ += count;
    for (int64_t id : ids) session.Append(id);
    return OkStatus();
  }

  // x_i ~ p(. | x_<i); feed x_i (the last token is never fed back).
  Status StepToken(DecodeSession& session) {
    const int64_t i = drawn_++;
    torch::Tensor token;
    {
      auto timer = session.Time(Phase::kSampling);
      MULO_ASSIGN_OR_RETURN(
          token, session.DrawOnDevice(target_->next_logits(),
                                      uniforms_.defined() ? uniforms_.narrow(0, i, 1) : uniforms_));
      row_.push_back(token);
      const bool last = drawn_ == session.num_tokens();
      if (last || drawn_ % session.grid() == 0) {
        MULO_ASSIGN_OR_RETURN(const std::vector<int64_t> ids, session.ReadIds(torch::cat(row_)));
        target_->ResolveDrawn(drawn_ - static_cast<int64_t>(ids.size()), ids);
        for (int64_t id : ids) session.Append(id);
        row_.clear();
      }
    }
    if (session.done()) return OkStatus();
    auto timer = session.Time(Phase::kTargetForward);
    return target_->FeedDrawn(token);
  }

  ModelStream* target_;
  torch::Tensor uniforms_;          // [tokens] on the device; undefined when greedy
  int64_t drawn_ = 0;               // tokens drawn so far (the next one's raster position)
  std::vector<torch::Tensor> row_;  // this row's tokens, still on the device
};

}  // namespace

Status ArDecoder::Validate(const ModelSet& models) const {
  if (models.target == nullptr) return FailedPreconditionError("ar: no target model loaded");
  return OkStatus();
}

StatusOr<std::unique_ptr<SteppedMethod::State>> ArDecoder::Begin(DecodeSession& session) const {
  MULO_ASSIGN_OR_RETURN(ModelStream * target,
                        session.Open(*session.models().target, StreamRole::kTarget));
  // Position i's number is the target stream's i-th: all of them at once (none when greedy).
  return std::unique_ptr<State>(std::make_unique<ArState>(
      target, session.DrawNumbers(RngStream::kTarget, session.num_tokens())));
}

}  // namespace mulo::engine
