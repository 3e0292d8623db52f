#include "engine/decode/generate.h"

#include <chrono>

namespace mulo::engine {

StatusOr<Condition> ConditionFromPrompt(const ModelSet& models, const std::string& prompt) {
  if (models.conditioner == nullptr) {
    return FailedPreconditionError("model family '" + models.name +
                                   "' has no text conditioner; send condition features");
  }
  Condition condition;
  MULO_ASSIGN_OR_RETURN(condition.features, models.conditioner->Encode(prompt));
  return condition;
}

StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const std::string& prompt, const SamplingParams& sampling,
                                       ProgressSink& progress, const CancelToken& cancel,
                                       const GenerateOptions& options) {
  MULO_ASSIGN_OR_RETURN(Condition condition, ConditionFromPrompt(models, prompt));
  return GenerateImage(method, models, condition, sampling, progress, cancel, options);
}

Status CheckConditionTokens(const ModelSet& models, const std::vector<int64_t>& ids) {
  if (models.ta_tok == nullptr) {
    return InvalidArgumentError("condition_tokens: model family '" + models.name +
                                "' has no TA-Tok de-quantiser (see ModelInfo.conditions)");
  }
  const int64_t want = models.target->condition_shape().rows;
  if (static_cast<int64_t>(ids.size()) != want) {
    return InvalidArgumentError("condition_tokens: " + std::to_string(ids.size()) +
                                " ids, the model takes " + std::to_string(want) +
                                " (Tar: 729, 169 or 81 by scale)");
  }
  return models.ta_tok->CheckIds(ids);
}

StatusOr<Condition> ResolveCondition(const ModelSet& models, const Condition& condition) {
  if (condition.ta_tok_ids.empty()) return condition;
  MULO_RETURN_IF_ERROR(CheckConditionTokens(models, condition.ta_tok_ids));
  Condition resolved = condition;
  MULO_ASSIGN_OR_RETURN(resolved.features, models.ta_tok->Decode(condition.ta_tok_ids));
  resolved.ta_tok_ids.clear();
  return resolved;
}

StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const Condition& condition,
                                       const SamplingParams& sampling, ProgressSink& progress,
                                       const CancelToken& cancel,
                                       const GenerateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  DecodeRequest request;
  Stats condition_stats;  // the de-quantiser's time, added to the prefill phase below
  {
    PhaseTimer timer(&condition_stats, Phase::kPrefill, models.target->options().device(),
                     options.synchronize_phases);
    MULO_ASSIGN_OR_RETURN(request.condition, ResolveCondition(models, condition));
  }
  request.sampling = sampling;
  request.trace = options.trace;
  request.batcher = options.batcher;
  request.synchronize_phases = options.synchronize_phases;
  MULO_ASSIGN_OR_RETURN(DecodeResult decoded, method.Decode(request, models, progress, cancel));
  MULO_RETURN_IF_ERROR(cancel.Check());
  GenerateResult result;
  result.tokens = std::move(decoded.tokens);
  result.stats = decoded.stats;
  result.stats.phase_seconds[static_cast<int>(Phase::kPrefill)] +=
      condition_stats.PhaseSeconds(Phase::kPrefill);
  const int64_t grid = models.target->grid_size();
  {
    PhaseTimer timer(&result.stats, Phase::kImageDecode, models.target->options().device(),
                     options.synchronize_phases);
    MULO_ASSIGN_OR_RETURN(result.image, models.vq->DecodeToRgb(result.tokens, grid, grid,
                                                                   models.pixel_rounding));
  }
  result.stats.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mulo::engine
