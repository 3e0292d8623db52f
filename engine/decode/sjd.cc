#include "engine/decode/sjd.h"

#include <algorithm>
#include <typeinfo>
#include <utility>
#include <vector>

#include "engine/sampling/exact_verifier.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {
namespace {

class JacobiState : public SteppedMethod::State {
 public:
  JacobiState(const SjdDecoder* method, ModelStream* target, std::unique_ptr<Verifier> verifier,
              const SjdOptions& options)
      : method_(method),
        target_(target),
        verifier_(std::move(verifier)),
        options_(options),
        rules_(method->RulesInGraphs()) {}

  // Invariant: the target has been fed every committed token but the last; window_ holds the
  // drafts carried for the positions right after the committed prefix and their q (in the
  // graphs, carried_q_ holds the q).
  Status Step(DecodeSession& session) override {
    if (InGraphs(session)) return StepInGraphs(session);
    if (carried_q_.defined()) {  // leaving the graphs (the image's last window): q by rows
      window_.q = carried_q_.unbind(0);
      carried_q_ = torch::Tensor();
    }
    Stats& stats = session.stats();
    std::vector<int64_t> x = session.committed();
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t length = std::min<int64_t>(options_.window, session.num_tokens() - n);
    {  // 1. Fill the window: carried drafts, then new initial tokens with one-hot q.
      auto timer = session.Time(Phase::kDraft);
      FillJacobiWindow(session, options_.init, x, length, window_);
    }
    stats.drafted_tokens += length;
    DraftBatch drafts{window_.tokens, DraftBatch::ChainParents(length), torch::stack(window_.q)};
    Verdict verdict;
    torch::Tensor p;
    {  // 2. One target forward over x_{n-1} and the window (its last draft only if a row
       //    follows it); 3. verify left to right.
      auto timer = session.Time(Phase::kVerify);
      const bool bonus_possible = n + length < session.num_tokens();
      std::vector<int64_t> seq = x;
      seq.insert(seq.end(), window_.tokens.begin(),
                 window_.tokens.end() - (bonus_possible ? 0 : 1));
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
    stats.relaxed_accepted_tokens += verdict.relaxed_accepts();
    session.commit_map().Path(n, accepted, verdict.relaxed, /*redrawn=*/accepted < length);
    stats.pooled_drafts += verdict.pooled_drafts;
    stats.pooled_neighbors += verdict.pooled_neighbors;
    x.insert(x.end(), window_.tokens.begin(), window_.tokens.begin() + accepted);
    if (verdict.next_token >= 0) x.push_back(verdict.next_token);
    {  // 4. Jacobi update: the positions past the new prefix are re-drawn from this p.
      auto timer = session.Time(Phase::kSampling);
      const int64_t first = static_cast<int64_t>(x.size()) - n;
      const int64_t carried = std::max<int64_t>(0, length - first);
      const std::vector<int64_t> carried_tokens(window_.tokens.end() - carried,
                                                window_.tokens.end());
      const std::vector<torch::Tensor> carried_q(window_.q.end() - carried, window_.q.end());
      MULO_ASSIGN_OR_RETURN(window_.tokens,
                            method_->Redraw(session, p, first, carried_tokens, carried_q));
      window_.q = method_->NextQ(p, first, window_.tokens, carried_tokens, carried_q);
    }
    MULO_RETURN_IF_ERROR(target_->Truncate(static_cast<int64_t>(x.size()) - 1));
    session.Commit(std::move(x));
    return OkStatus();
  }

 private:
  VerifyGraphs::Shape GraphShape() const {
    return {options_.window, /*redraw=*/true, rules_->groups ? rules_->groups->size : 0,
            rules_->couple};
  }
  // Whether this iteration may run as one replay of the pool's verify graphs: rules they
  // hold and graphs that fit.
  bool InGraphs(DecodeSession& session) const {
    return rules_ && target_->CanVerifyChain(GraphShape(), session.sampling());
  }

  // Step's iteration as one graph replay and one host read (issue 61): the forward, the
  // verification and the Jacobi re-draw of every row run in the graph, which also makes the
  // new tokens' one-hot q; the read brings back the kept length, the next token and the
  // re-draws, and p stays on the device as the carried drafts' q. Given the same numbers,
  // Step's decisions. The image's last windows are shorter than the graphs': the graph's
  // window is padded with token 0 past the image's end, judged but never kept (with GSD's
  // groups, rejected: its counts are the real drafts').
  Status StepInGraphs(DecodeSession& session) {
    Stats& stats = session.stats();
    std::vector<int64_t> x = session.committed();
    const int64_t n = static_cast<int64_t>(x.size()), window = options_.window;
    const int64_t length = std::min<int64_t>(window, session.num_tokens() - n);
    {  // 1. Fill the window: carried drafts, then new initial tokens.
      auto timer = session.Time(Phase::kDraft);
      FillJacobiTokens(session, options_.init, x, length, window_.tokens);
      if (carried_q_.defined() && carried_q_.size(0) > length) {
        carried_q_ = carried_q_.narrow(0, 0, length);
      }
    }
    stats.drafted_tokens += length;
    const bool bonus_possible = n + length < session.num_tokens();
    const VerifierRngs rngs = session.verifier_rngs();
    VerifyGraphs::Output out;
    {  // 2-4. The forward, the verification and every row's re-draw, in one replay.
      auto timer = session.Time(Phase::kVerify);
      const ChainNumbers numbers = PeekChainNumbers(rngs, window, session.device());
      const torch::Tensor redraw_numbers =
          session.greedy() ? torch::Tensor()
                           : session.uniforms(RngStream::kDrafter).Peek(window + 1);
      std::vector<int64_t> drafts = window_.tokens;
      drafts.resize(window, 0);
      VerifyGraphs::Call call{
          nullptr, x.back(), torch::from_blob(drafts.data(), {window}, torch::kInt64),
          carried_q_, numbers.accept, numbers.draw, redraw_numbers, session.sampling()};
      call.group = rules_->groups;
      call.judged = length;
      MULO_ASSIGN_OR_RETURN(out, target_->VerifyChain(GraphShape(), std::move(call)));
      ++stats.verify_steps;
    }
    const int64_t accepted = std::min(out.kept, length);
    SkipChainNumbers(rngs, length, accepted, bonus_possible && !session.greedy());
    stats.CountAcceptedPath(accepted);
    stats.resampled_tokens += accepted < length;
    session.commit_map().Path(n, accepted, out.relaxed, /*redrawn=*/accepted < length);
    if (rules_->groups) {  // as the eager verdict counts them: every judged draft pools
      stats.relaxed_accepted_tokens += static_cast<int64_t>(out.relaxed.size());
      stats.pooled_drafts += std::min(accepted + 1, length);
      stats.pooled_neighbors += out.neighbors;
    }
    x.insert(x.end(), window_.tokens.begin(), window_.tokens.begin() + accepted);
    if (accepted < length || bonus_possible) x.push_back(out.next_token);
    // 4. The positions past the new prefix carry this iteration's re-draws, q their rows of p
    //    (rows up to the bonus position's; the drafter stream moves by the numbers they took).
    const int64_t first = static_cast<int64_t>(x.size()) - n;
    const int64_t rows = std::max<int64_t>(0, (bonus_possible ? length + 1 : length) - first);
    if (!session.greedy()) session.rng(RngStream::kDrafter).Skip(static_cast<uint64_t>(rows));
    // MC-SJD's coupling took a keep test's number for each draft it coupled.
    const int64_t coupled = std::max<int64_t>(0, length - first);
    if (rules_->couple && !session.greedy() && rows > 0 && coupled > 0) {
      session.rng(RngStream::kAcceptance).Skip(static_cast<uint64_t>(coupled));
    }
    window_.tokens.assign(out.redraws.begin() + first, out.redraws.begin() + first + rows);
    carried_q_ = rows > 0 ? out.p.narrow(0, first, rows) : torch::Tensor();
    MULO_RETURN_IF_ERROR(target_->Truncate(static_cast<int64_t>(x.size()) - 1));
    session.Commit(std::move(x));
    return OkStatus();
  }

  const SjdDecoder* method_;  // outlives its states (they run inside its Generate)
  ModelStream* target_;
  std::unique_ptr<Verifier> verifier_;
  SjdOptions options_;
  JacobiWindow window_;
  torch::Tensor carried_q_;  // in the graphs: [carried drafts, V], the window's q
  const std::optional<SjdDecoder::GraphRules> rules_;  // what the graphs do, if they can
};

}  // namespace

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

torch::Tensor SjdDecoder::RedrawOnDevice(DecodeSession& session, const torch::Tensor& p,
                                         int64_t first, const std::vector<int64_t>&,
                                         const std::vector<torch::Tensor>&) const {
  // Drawn on p's device in one batch: row i with the drafter stream's (i - first)-th next
  // number (its argmax when greedy: there p is one-hot), the numbers a row-by-row host draw
  // would take.
  const int64_t rows = p.size(0) - first;
  if (rows <= 0) return torch::zeros({0}, torch::dtype(torch::kInt64).device(p.device()));
  const torch::Tensor tail = p.narrow(0, first, rows);
  return session.greedy() ? tail.argmax(1)
                          : DrawRows(tail, session.uniforms(RngStream::kDrafter).Take(rows));
}

StatusOr<std::vector<int64_t>> SjdDecoder::Redraw(
    DecodeSession& session, const torch::Tensor& p, int64_t first,
    const std::vector<int64_t>& carried, const std::vector<torch::Tensor>& carried_q) const {
  if (p.size(0) - first <= 0) return std::vector<int64_t>();
  return session.ReadIds(RedrawOnDevice(session, p, first, carried, carried_q));
}

std::vector<torch::Tensor> SjdDecoder::NextQ(const torch::Tensor& p, int64_t first,
                                             const std::vector<int64_t>&,
                                             const std::vector<int64_t>&,
                                             const std::vector<torch::Tensor>&) const {
  std::vector<torch::Tensor> q;
  for (int64_t i = first; i < p.size(0); ++i) q.push_back(p[i]);
  return q;
}

std::optional<SjdDecoder::GraphRules> SjdDecoder::RulesInGraphs() const {
  // SJD's own rules only: not a subclass's (unless it says so) nor a test's broken rule.
  if (typeid(*this) != typeid(SjdDecoder) || options_.accept || options_.residual) {
    return std::nullopt;
  }
  return GraphRules{};
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
