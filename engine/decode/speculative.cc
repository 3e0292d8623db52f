#include "engine/decode/speculative.h"

#include <algorithm>

#include "engine/decode/chain_proposer.h"
#include "engine/sampling/exact_verifier.h"

namespace mulo::engine {
namespace {

class SpeculativeState : public SteppedMethod::State {
 public:
  SpeculativeState(ModelStream* target, ModelStream* draft, const SpeculativeOptions& options)
      : target_(target),
        draft_(draft),
        proposer_(draft),
        verifier_(options.accept, options.residual),
        gamma_(options.gamma),
        default_rules_(!options.accept && !options.residual) {}

  // Invariant: the target has been fed every committed token but the last.
  Status Step(DecodeSession& session) override {
    if (InGraphs(session)) return StepInGraphs(session);
    Stats& stats = session.stats();
    std::vector<int64_t> x = session.committed();
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t gamma = std::min<int64_t>(gamma_, session.num_tokens() - n);
    DraftBatch drafts;
    {  // 1. Draft gamma tokens x_n.. from q.
      auto timer = session.Time(Phase::kDraft);
      MULO_ASSIGN_OR_RETURN(drafts, proposer_.Propose(session, gamma));
    }
    stats.drafted_tokens += gamma;
    Verdict verdict;
    {  // 2. One target forward scores them (and the bonus position when one follows).
      auto timer = session.Time(Phase::kVerify);
      const bool bonus_possible = n + gamma < session.num_tokens();
      std::vector<int64_t> seq = x;
      seq.insert(seq.end(), drafts.tokens.begin(), drafts.tokens.end() - (bonus_possible ? 0 : 1));
      MULO_ASSIGN_OR_RETURN(torch::Tensor logits, target_->Feed(seq, n - 1, seq.size(),
                                                                LogitsMode::kAll));
      ++stats.verify_steps;
      // 3. Keep with min(1, p/q); replace the first rejection from norm(max(p - q, 0)).
      MULO_ASSIGN_OR_RETURN(
          verdict, verifier_.Verify({drafts, session.Probabilities(logits), session.greedy()},
                                    session.verifier_rngs()));
    }
    const int64_t accepted = static_cast<int64_t>(verdict.accepted.size());
    stats.CountAcceptedPath(accepted);
    stats.resampled_tokens += accepted < gamma;
    session.commit_map().Path(n, accepted, {}, /*redrawn=*/accepted < gamma);
    x.insert(x.end(), drafts.tokens.begin(), drafts.tokens.begin() + accepted);
    if (verdict.next_token >= 0) x.push_back(verdict.next_token);
    // Both models keep what they were fed of the new committed prefix.
    MULO_RETURN_IF_ERROR(target_->Truncate(static_cast<int64_t>(x.size()) - 1));
    MULO_RETURN_IF_ERROR(proposer_.Retain(n + std::min<int64_t>(accepted, gamma - 1)));
    session.Commit(std::move(x));
    return OkStatus();
  }

 private:
  // Whether this step may run as the pools' two graphs: the default rules, and graphs that fit
  // both streams.
  bool InGraphs(DecodeSession& session) const {
    const int64_t n = static_cast<int64_t>(session.committed().size());
    return default_rules_ && draft_->CanDraftChain(gamma_, n, session.sampling()) &&
           target_->CanVerifyChain({gamma_, /*redraw=*/false}, session.sampling());
  }

  // Step's algorithm as two graph replays and one host read (issue 61): the drafter feeds what
  // it has not seen and drafts the chain (one replay, nothing read); the target scores it,
  // judges it and draws the next token (one replay); one read brings back the chain, the kept
  // length and the next token. Given the same numbers, Step's decisions. At the image's end
  // the graphs' chain runs past it: its drafts there are drawn and judged but never kept, and
  // the streams move only by the numbers Step would have taken.
  Status StepInGraphs(DecodeSession& session) {
    Stats& stats = session.stats();
    std::vector<int64_t> x = session.committed();
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t gamma = std::min<int64_t>(gamma_, session.num_tokens() - n);
    RowGraphs::Output drafts;
    {  // 1. Draft gamma tokens x_n.. from q.
      auto timer = session.Time(Phase::kDraft);
      const torch::Tensor numbers =
          session.greedy() ? torch::Tensor() : session.uniforms(RngStream::kDrafter).Peek(gamma_);
      MULO_ASSIGN_OR_RETURN(drafts, draft_->DraftChain(x, numbers, session.sampling(), gamma_));
      if (!session.greedy()) session.rng(RngStream::kDrafter).Skip(static_cast<uint64_t>(gamma));
    }
    stats.drafted_tokens += gamma;
    VerifyGraphs::Output verdict;
    const bool bonus_possible = n + gamma < session.num_tokens();
    const VerifierRngs rngs = session.verifier_rngs();
    {  // 2-3. One target forward scores them; keep with min(1, p/q), re-draw the first rejection.
      auto timer = session.Time(Phase::kVerify);
      const ChainNumbers numbers = PeekChainNumbers(rngs, gamma_, session.device());
      MULO_ASSIGN_OR_RETURN(
          verdict, target_->VerifyChain({gamma_, /*redraw=*/false},
                                        {nullptr, x.back(), drafts.drafts, drafts.probabilities,
                                         numbers.accept, numbers.draw, torch::Tensor(),
                                         session.sampling()}));
      ++stats.verify_steps;
    }
    const int64_t accepted = std::min(verdict.kept, gamma);
    SkipChainNumbers(rngs, gamma, accepted, bonus_possible && !session.greedy());
    stats.CountAcceptedPath(accepted);
    stats.resampled_tokens += accepted < gamma;
    session.commit_map().Path(n, accepted, {}, /*redrawn=*/accepted < gamma);
    draft_->ResolveDrawn(n, verdict.drafts);
    x.insert(x.end(), verdict.drafts.begin(), verdict.drafts.begin() + accepted);
    // At the image's end the chain has no bonus: its row was fed at the last position, unread.
    if (accepted < gamma || bonus_possible) x.push_back(verdict.next_token);
    MULO_RETURN_IF_ERROR(target_->Truncate(static_cast<int64_t>(x.size()) - 1));
    MULO_RETURN_IF_ERROR(proposer_.Retain(n + std::min<int64_t>(accepted, gamma_ - 1)));
    session.Commit(std::move(x));
    return OkStatus();
  }

  ModelStream* target_;
  ModelStream* draft_;
  ChainProposer proposer_;
  ExactVerifier verifier_;
  int64_t gamma_;
  bool default_rules_;  // the graphs judge with the exact rule only
};

}  // namespace

Status ValidateSpeculativeOptions(const SpeculativeOptions& options) {
  if (options.gamma < 1 || options.gamma > kMaxGamma) {
    return InvalidArgumentError("speculative.gamma: must be in [1, " + std::to_string(kMaxGamma) +
                                "]");
  }
  return OkStatus();
}

Status SpeculativeDecoder::Validate(const ModelSet& models) const {
  if (models.target == nullptr || models.chain == nullptr) {
    return FailedPreconditionError("speculative: the model family has no chain draft model");
  }
  MULO_RETURN_IF_ERROR(ValidateSpeculativeOptions(options_));
  const TokenModel& target = *models.target;
  const TokenModel& draft = *models.chain;
  if (draft.grid_size() != target.grid_size() || draft.vocab_size() != target.vocab_size()) {
    return FailedPreconditionError("speculative: draft and target grids or vocabularies differ");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<SteppedMethod::State>> SpeculativeDecoder::Begin(
    DecodeSession& session) const {
  session.stats().accepted_per_position.assign(options_.gamma, 0);
  MULO_ASSIGN_OR_RETURN(ModelStream * target,
                        session.Open(*session.models().target, StreamRole::kTarget));
  MULO_ASSIGN_OR_RETURN(ModelStream * draft,
                        session.Open(*session.models().chain, StreamRole::kDraft));
  // Token 0 comes straight from the target's prefill, as in AR.
  session.Append(session.Draw(target->next_logits(), RngStream::kTarget));
  return std::unique_ptr<State>(std::make_unique<SpeculativeState>(target, draft, options_));
}

}  // namespace mulo::engine
