#include "engine/decode/ar.h"

#include <chrono>

#include "engine/core/torch_guard.h"
#include "engine/sampling/logits_processor.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/sampler.h"

namespace mulo::engine {

torch::Tensor GuidedLogits(const torch::Tensor& logits, double cfg_scale) {
  return logits.size(0) == 2 ? MixCfg(logits, cfg_scale) : logits.select(0, 0);
}

StatusOr<DecodeResult> ArDecoder::Decode(const DecodeRequest& request, const ModelSet& models,
                                         ProgressSink& progress,
                                         const CancelToken& cancel) const {
  if (models.target == nullptr) return FailedPreconditionError("ar: no target model loaded");
  const Transformer& target = *models.target;
  const TransformerConfig& config = target.config();
  MULO_RETURN_IF_ERROR(ValidateSamplingParams(request.sampling, config.vocab_size));
  const auto start = std::chrono::steady_clock::now();
  const auto device = target.options().device();
  const int64_t batch = CfgBatch(request.sampling);
  const int64_t n = config.num_image_tokens();

  DecodeResult result;
  Stats& stats = result.stats;
  MULO_ASSIGN_OR_RETURN(torch::Tensor condition,
                        target.EmbedCondition(request.condition, batch == 2));
  KvCache cache = target.NewCache(batch, config.max_positions());
  cache.set_trace(request.trace);
  Rng rng(request.sampling.seed, RngStream::kTarget);
  RowEmitter rows(config.grid_size, &progress);
  torch::Tensor logits;
  {
    PhaseTimer timer(&stats, Phase::kPrefill, device);
    MULO_ASSIGN_OR_RETURN(ForwardOutput out, target.Prefill(cache, condition, LogitsMode::kLast));
    logits = out.logits;
    ++stats.target_forward_passes;
  }
  result.tokens.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    MULO_RETURN_IF_ERROR(cancel.Check());
    int64_t token;
    {
      PhaseTimer timer(&stats, Phase::kSampling, device);
      MULO_ASSIGN_OR_RETURN(token, GuardTorch("ar sampling", [&]() -> StatusOr<int64_t> {
        return SampleToken(GuidedLogits(logits, request.sampling.cfg_scale).select(0, 0),
                           request.sampling, rng);
      }));
    }
    result.tokens.push_back(static_cast<int32_t>(token));
    rows.Commit(result.tokens);
    if (i + 1 == n) break;  // the last token is never fed back
    PhaseTimer timer(&stats, Phase::kTargetForward, device);
    auto input = torch::full({batch, 1}, token, torch::kInt64);
    auto position = torch::full({1}, target.TokenPosition(i), torch::kInt64);
    MULO_ASSIGN_OR_RETURN(ForwardOutput out,
                          target.ForwardTokens(cache, input, position, LogitsMode::kLast));
    logits = out.logits;
    ++stats.target_forward_passes;
  }
  stats.tokens = n;
  stats.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mulo::engine
