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
                                       ForwardTrace* trace) {
  MULO_ASSIGN_OR_RETURN(Condition condition, ConditionFromPrompt(models, prompt));
  return GenerateImage(method, models, condition, sampling, progress, cancel, trace);
}

StatusOr<Condition> ResolveCondition(const ModelSet& models, const Condition& condition) {
  if (condition.ta_tok_ids.empty()) return condition;
  if (models.ta_tok == nullptr) {
    return FailedPreconditionError("model family '" + models.name +
                                   "' has no TA-Tok de-quantiser; send condition features");
  }
  const int64_t want = models.target->config().cls_token_num;
  if (static_cast<int64_t>(condition.ta_tok_ids.size()) != want) {
    return InvalidArgumentError("condition_tokens: " +
                                std::to_string(condition.ta_tok_ids.size()) +
                                " ids, the target takes " + std::to_string(want));
  }
  Condition resolved = condition;
  MULO_ASSIGN_OR_RETURN(resolved.features, models.ta_tok->Decode(condition.ta_tok_ids));
  resolved.ta_tok_ids.clear();
  return resolved;
}

StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const Condition& condition,
                                       const SamplingParams& sampling, ProgressSink& progress,
                                       const CancelToken& cancel, ForwardTrace* trace) {
  const auto start = std::chrono::steady_clock::now();
  DecodeRequest request;
  double dequantize_seconds = 0.0;
  {
    const auto begin = std::chrono::steady_clock::now();
    MULO_ASSIGN_OR_RETURN(request.condition, ResolveCondition(models, condition));
    dequantize_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  }
  request.sampling = sampling;
  request.trace = trace;
  MULO_ASSIGN_OR_RETURN(DecodeResult decoded, method.Decode(request, models, progress, cancel));
  MULO_RETURN_IF_ERROR(cancel.Check());
  GenerateResult result;
  result.tokens = std::move(decoded.tokens);
  result.stats = decoded.stats;
  result.stats.phase_seconds[static_cast<int>(Phase::kPrefill)] += dequantize_seconds;
  const int64_t grid = models.target->config().grid_size;
  {
    PhaseTimer timer(&result.stats, Phase::kImageDecode, models.target->options().device());
    MULO_ASSIGN_OR_RETURN(result.image, models.vq->DecodeToRgb(result.tokens, grid, grid,
                                                                   models.pixel_rounding));
  }
  result.stats.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mulo::engine
