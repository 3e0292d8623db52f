#include "engine/decode/sjd.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/sampling/exact_verifier.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {
namespace {

class JacobiState : public SteppedMethod::State {
 public:
  JacobiState(const SjdDecoder* method, ModelStream* target, std::unique_ptr<Verifier> verifier,
              const SjdOptions& options)
      : method_(method), target_(target), verifier_(std::move(verifier)), options_(options) {}

  // Invariant: the target has been fed every committed token but the last; window_ holds the
  // drafts carried for the positions right after the committed prefix, q_ their distributions.
  Status Step(DecodeSession& session) override {
    Stats& stats = session.stats();
    std::vector<int64_t> x = session.committed();
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t length = std::min<int64_t>(options_.window, session.num_tokens() - n);
    {  // 1. Fill the window: carried drafts, then new initial tokens with one-hot q.
      auto timer = session.Time(Phase::kDraft);
      FillWindow(session, x, length);
    }
    stats.drafted_tokens += length;
    DraftBatch drafts{window_, DraftBatch::ChainParents(length), torch::stack(q_)};
    Verdict verdict;
    torch::Tensor p;
    {  // 2. One target forward over x_{n-1} and the window (its last draft only if a row
       //    follows it); 3. verify left to right.
      auto timer = session.Time(Phase::kVerify);
      const bool bonus_possible = n + length < session.num_tokens();
      std::vector<int64_t> seq = x;
      seq.insert(seq.end(), window_.begin(), window_.end() - (bonus_possible ? 0 : 1));
      MULO_ASSIGN_OR_RETURN(torch::Tensor logits,
                            target_->Feed(seq, n - 1, seq.size(), LogitsMode::kAll));
      ++stats.verify_steps;
      p = session.Probabilities(logits);  // row i: position n + i
      MULO_ASSIGN_OR_RETURN(
          verdict, verifier_->Verify({drafts, p, session.greedy()}, session.verifier_rngs()));
    }
    const int64_t accepted = static_cast<int64_t>(verdict.accepted.size());
    stats.CountAcceptedPath(accepted);
    stats.resampled_tokens += accepted < length;
    stats.relaxed_accepted_tokens += verdict.relaxed_accepts;
    stats.pooled_drafts += verdict.pooled_drafts;
    stats.pooled_neighbors += verdict.pooled_neighbors;
    x.insert(x.end(), window_.begin(), window_.begin() + accepted);
    if (verdict.next_token >= 0) x.push_back(verdict.next_token);
    {  // 4. Jacobi update: the positions past the new prefix are re-drawn from this p.
      auto timer = session.Time(Phase::kSampling);
      const int64_t first = static_cast<int64_t>(x.size()) - n;
      const int64_t carried = std::max<int64_t>(0, length - first);
      window_ = method_->Redraw(
          session, p, first,
          std::vector<int64_t>(window_.begin() + (length - carried), window_.end()),
          std::vector<torch::Tensor>(q_.begin() + (length - carried), q_.end()));
      q_.clear();
      for (int64_t i = first; i < p.size(0); ++i) q_.push_back(p[i]);
    }
    MULO_RETURN_IF_ERROR(target_->Truncate(static_cast<int64_t>(x.size()) - 1));
    session.Commit(std::move(x));
    return OkStatus();
  }

 private:
  void FillWindow(DecodeSession& session, const std::vector<int64_t>& x, int64_t length) {
    window_.resize(std::min<int64_t>(window_.size(), length));
    q_.resize(window_.size());
    const int64_t n = static_cast<int64_t>(x.size()), grid = session.grid();
    const int64_t vocab = session.models().target->config().vocab_size;
    while (static_cast<int64_t>(window_.size()) < length) {
      const int64_t position = n + static_cast<int64_t>(window_.size());
      int64_t token;
      if (options_.init == JacobiInit::kRepeatHorizon && position >= grid) {
        const int64_t above = position - grid;
        token = above < n ? x[above] : window_[above - n];
      } else {
        Rng& rng = session.rng(RngStream::kDrafter);
        token = std::min<int64_t>(vocab - 1, static_cast<int64_t>(rng.Uniform() * vocab));
      }
      window_.push_back(token);
      torch::Tensor one_hot = torch::zeros({vocab}, torch::dtype(torch::kFloat32).device(
                                                         session.device()));
      one_hot[token] = 1.0f;
      q_.push_back(one_hot);
    }
  }

  const SjdDecoder* method_;  // outlives its states (they run inside its Generate)
  ModelStream* target_;
  std::unique_ptr<Verifier> verifier_;
  SjdOptions options_;
  std::vector<int64_t> window_;
  std::vector<torch::Tensor> q_;
};

}  // namespace

const char* JacobiInitName(JacobiInit init) {
  return init == JacobiInit::kRandom ? "random" : "repeat_horizon";
}

Status ValidateJacobiWindow(int64_t window, const std::string& method) {
  if (window < 1 || window > kMaxJacobiWindow) {
    return InvalidArgumentError(method + ".window: must be in [1, " +
                                std::to_string(kMaxJacobiWindow) + "]");
  }
  return OkStatus();
}

Status SjdDecoder::Validate(const ModelSet& models) const {
  if (models.target == nullptr) return FailedPreconditionError(name() + ": no target model");
  return ValidateJacobiWindow(options_.window, name());
}

std::vector<int64_t> SjdDecoder::Redraw(DecodeSession& session, const torch::Tensor& p,
                                        int64_t first, const std::vector<int64_t>&,
                                        const std::vector<torch::Tensor>&) const {
  // Drawn on p's device in one batch and read back once: row i with the drafter stream's
  // (i - first)-th next number (its argmax when greedy: there p is one-hot), the numbers a
  // row-by-row host draw would take.
  const int64_t rows = p.size(0) - first;
  if (rows <= 0) return {};
  const torch::Tensor tail = p.narrow(0, first, rows);
  return HostReadIds(session.greedy()
                         ? tail.argmax(1)
                         : DrawRows(tail, session.uniforms(RngStream::kDrafter).Take(rows)));
}

std::unique_ptr<Verifier> SjdDecoder::MakeVerifier(const ModelSet&) const {
  return std::make_unique<ExactVerifier>(options_.accept, options_.residual);
}

StatusOr<std::unique_ptr<SteppedMethod::State>> SjdDecoder::Begin(DecodeSession& session) const {
  session.stats().accepted_per_position.assign(options_.window, 0);
  MULO_ASSIGN_OR_RETURN(ModelStream * target,
                        session.Open(*session.models().target, StreamRole::kTarget));
  // Token 0 comes straight from the target's prefill, as in AR.
  session.Append(session.Draw(target->next_logits(), RngStream::kTarget));
  return std::unique_ptr<State>(
      std::make_unique<JacobiState>(this, target, MakeVerifier(session.models()), options_));
}

}  // namespace mulo::engine
