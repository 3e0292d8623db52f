#include "engine/decode/speculative.h"

#include <chrono>

#include "engine/core/torch_guard.h"
#include "engine/decode/ar.h"
#include "engine/decode/feed_tokens.h"
#include "engine/sampling/logits_processor.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative_acceptance.h"

namespace mulo::engine {

Status ValidateSpeculativeOptions(const SpeculativeOptions& options) {
  if (options.gamma < 1 || options.gamma > 64) {
    return InvalidArgumentError("speculative.gamma: must be in [1, 64]");
  }
  return OkStatus();
}

StatusOr<DecodeResult> SpeculativeDecoder::Decode(const DecodeRequest& request,
                                                  const ModelSet& models, ProgressSink& progress,
                                                  const CancelToken& cancel) const {
  if (models.target == nullptr || models.chain == nullptr) {
    return FailedPreconditionError("speculative: the model family has no chain draft model");
  }
  MULO_RETURN_IF_ERROR(ValidateSpeculativeOptions(options_));
  const Transformer& target = *models.target;
  const Transformer& draft = *models.chain;
  const SamplingParams& sampling = request.sampling;
  MULO_RETURN_IF_ERROR(ValidateSamplingParams(sampling, target.config().vocab_size));
  if (draft.config().grid_size != target.config().grid_size ||
      draft.config().vocab_size != target.config().vocab_size) {
    return FailedPreconditionError("speculative: draft and target grids or vocabularies differ");
  }
  return GuardTorch("speculative", [&]() -> StatusOr<DecodeResult> {
    torch::NoGradGuard no_grad;
    const auto start = std::chrono::steady_clock::now();
    const auto device = target.options().device();
    const int64_t batch = CfgBatch(sampling);
    const int64_t n_total = target.config().num_image_tokens();
    DecodeResult result;
    Stats& stats = result.stats;
    stats.accepted_per_position.assign(options_.gamma, 0);
    auto distribution = [&](const torch::Tensor& logits) {  // [batch, V] -> probabilities [V]
      return ToProbabilities(GuidedLogits(logits, sampling.cfg_scale), sampling);
    };

    MULO_ASSIGN_OR_RETURN(torch::Tensor target_cond,
                          target.EmbedCondition(request.condition, batch == 2));
    MULO_ASSIGN_OR_RETURN(torch::Tensor draft_cond,
                          draft.EmbedCondition(request.condition, batch == 2));
    KvCache target_cache = target.NewCache(batch, target.config().max_positions());
    KvCache draft_cache = draft.NewCache(batch, draft.config().max_positions());
    target_cache.set_trace(request.trace);
    draft_cache.set_trace(request.trace);
    Rng target_rng(sampling.seed, RngStream::kTarget);
    Rng draft_rng(sampling.seed, RngStream::kDrafter);
    Rng accept_rng(sampling.seed, RngStream::kAcceptance);
    RowEmitter rows(target.config().grid_size, &progress);
    std::vector<int32_t>& tokens = result.tokens;

    // Token 0 comes straight from the target's prefill, as in AR.
    torch::Tensor draft_logits;
    {
      PhaseTimer timer(&stats, Phase::kPrefill, device);
      MULO_ASSIGN_OR_RETURN(ForwardOutput out,
                            target.Prefill(target_cache, target_cond, LogitsMode::kLast));
      MULO_ASSIGN_OR_RETURN(ForwardOutput dout,
                            draft.Prefill(draft_cache, draft_cond, LogitsMode::kNone));
      ++stats.target_forward_passes;
      ++stats.draft_forward_passes;
      tokens.push_back(static_cast<int32_t>(SampleToken(
          GuidedLogits(out.logits, sampling.cfg_scale).select(0, 0), sampling, target_rng)));
      rows.Commit(tokens);
    }
    // Invariants: the target cache holds every committed token but the last; the draft cache
    // holds committed tokens [0, draft_fed).
    int64_t draft_fed = 0;
    while (static_cast<int64_t>(tokens.size()) < n_total) {
      MULO_RETURN_IF_ERROR(cancel.Check());
      const int64_t n = static_cast<int64_t>(tokens.size());
      const int64_t gamma = std::min<int64_t>(options_.gamma, n_total - n);

      // Draft gamma tokens; q[j] is the draft distribution of draft j.
      std::vector<int64_t> drafts;
      std::vector<torch::Tensor> q;
      // Committed tokens then the drafts fed so far: what both models read this step.
      std::vector<int64_t> seq(tokens.begin(), tokens.end());
      {
        PhaseTimer timer(&stats, Phase::kDraft, device);
        MULO_ASSIGN_OR_RETURN(draft_logits,
                              FeedTokens(draft, draft_cache, seq, draft_fed, n, LogitsMode::kLast));
        ++stats.draft_forward_passes;
        draft_fed = n;
        for (int64_t j = 0; j < gamma; ++j) {
          q.push_back(distribution(draft_logits.select(1, draft_logits.size(1) - 1)));
          drafts.push_back(sampling.temperature == 0.0
                               ? q.back().argmax().item<int64_t>()
                               : SampleFromProbabilities(q.back(), draft_rng));
          if (j + 1 < gamma) {
            seq.push_back(drafts.back());
            MULO_ASSIGN_OR_RETURN(draft_logits, FeedTokens(draft, draft_cache, seq, n + j,
                                                           n + j + 1, LogitsMode::kLast));
            ++stats.draft_forward_passes;
          }
        }
      }
      stats.drafted_tokens += gamma;

      // One target forward: the last committed token plus the drafts (the last draft only
      // when a bonus position exists after it).
      PhaseTimer verify_timer(&stats, Phase::kVerify, device);
      const bool bonus_possible = n + gamma < n_total;
      // seq already holds every draft but the last.
      if (bonus_possible) seq.push_back(drafts.back());
      const int64_t cache_before = target_cache.length();
      MULO_ASSIGN_OR_RETURN(torch::Tensor logits,
                            FeedTokens(target, target_cache, seq, n - 1,
                                       static_cast<int64_t>(seq.size()), LogitsMode::kAll));
      ++stats.target_forward_passes;
      ++stats.verify_steps;
      int64_t accepted = 0;
      int64_t next_token = -1;
      for (; accepted < gamma; ++accepted) {
        auto p = distribution(logits.select(1, accepted));
        const int64_t x = drafts[accepted];
        const double p_x = p[x].item<double>(), q_x = q[accepted][x].item<double>();
        const bool keep = options_.accept ? options_.accept(p_x, q_x, accept_rng)
                                          : AcceptDraft(p_x, q_x, accept_rng);
        if (!keep) {
          next_token = SampleFromProbabilities(ResidualDistribution(p, q[accepted]), target_rng);
          ++stats.resampled_tokens;
          break;
        }
        ++stats.accepted_per_position[accepted];
      }
      stats.accepted_tokens += accepted;
      stats.total_tree_depth += accepted;
      for (int64_t j = 0; j < accepted; ++j) tokens.push_back(static_cast<int32_t>(drafts[j]));
      if (next_token < 0 && bonus_possible) {  // all accepted: the bonus token
        next_token = SampleToken(GuidedLogits(logits.select(1, gamma), sampling.cfg_scale),
                                 sampling, target_rng);
      }
      if (next_token >= 0) tokens.push_back(static_cast<int32_t>(next_token));
      // Keep the target rows of the accepted prefix (the last committed token stays unfed).
      MULO_RETURN_IF_ERROR(
          target_cache.Truncate(cache_before + 1 + accepted - (next_token >= 0 ? 0 : 1)));
      // The draft cache keeps the drafts that were fed and accepted.
      const int64_t draft_rows = std::min<int64_t>(accepted, gamma - 1);
      MULO_RETURN_IF_ERROR(draft_cache.Truncate(draft.config().cls_token_num + n + draft_rows));
      draft_fed = n + draft_rows;
      rows.Commit(tokens);
    }
    tokens.resize(n_total);
    stats.tokens = n_total;
    stats.total_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  });
}

}  // namespace mulo::engine
