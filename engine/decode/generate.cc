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

StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const Condition& condition,
                                       const SamplingParams& sampling, ProgressSink& progress,
                                       const CancelToken& cancel, ForwardTrace* trace) {
  const auto start = std::chrono::steady_clock::now();
  DecodeRequest request;
  request.condition = condition;
  request.sampling = sampling;
  request.trace = trace;
  MULO_ASSIGN_OR_RETURN(DecodeResult decoded, method.Decode(request, models, progress, cancel));
  MULO_RETURN_IF_ERROR(cancel.Check());
  GenerateResult result;
  result.tokens = std::move(decoded.tokens);
  result.stats = decoded.stats;
  const int64_t grid = models.target->config().grid_size;
  {
    PhaseTimer timer(&result.stats, Phase::kImageDecode, models.target->options().device());
    MULO_ASSIGN_OR_RETURN(result.image, models.vq->DecodeToRgb(result.tokens, grid, grid));
  }
  result.stats.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mulo::engine
