#include "engine/decode/generate.h"

#include <algorithm>
#include <chrono>

#include "engine/decode/ar.h"

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

SamplingParams TarMllmSampling(uint64_t seed) {
  SamplingParams sampling;
  sampling.cfg_scale = 1.0;
  sampling.temperature = 1.0;
  sampling.top_p = 0.95;
  sampling.top_k = 1200;
  sampling.seed = seed;
  return sampling;
}

namespace {

// Progress of the MLLM stage: its rows are TA-Tok ids, not the image's, so none stream.
class SilentProgress : public ProgressSink {
 public:
  void OnRows(int64_t, int64_t, const std::vector<int32_t>&) override {}
};

}  // namespace

StatusOr<std::vector<int64_t>> RunMllmStage(const ModelSet& models,
                                            const std::vector<int64_t>& prompt_ids,
                                            const DecodingMethod* method,
                                            const SamplingParams& sampling,
                                            const CancelToken& cancel, Stats* stage_stats) {
  if (models.mllm_stage == nullptr) {
    return InvalidArgumentError("prompt_ids: model family '" + models.name +
                                "' has no MLLM stage (components.mllm)");
  }
  const ArDecoder ar;
  const DecodingMethod& stage_method = method != nullptr ? *method : ar;
  DecodeRequest request;
  request.condition.prompt_ids = prompt_ids;
  request.sampling = sampling;
  // A top-k past the image vocabulary keeps every image token (Tar's 1200 of 65,536; a small
  // family's whole range).
  request.sampling.top_k = std::min(sampling.top_k, models.mllm_stage->target->vocab_size());
  SilentProgress progress;
  MULO_ASSIGN_OR_RETURN(DecodeResult decoded,
                        stage_method.Decode(request, *models.mllm_stage, progress, cancel));
  if (stage_stats != nullptr) *stage_stats = decoded.stats;
  return std::vector<int64_t>(decoded.tokens.begin(), decoded.tokens.end());
}

StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const Condition& condition, const SamplingParams& sampling,
                                       ProgressSink& progress, const CancelToken& cancel,
                                       const GenerateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  DecodeRequest request;
  Stats condition_stats;  // the MLLM's and the de-quantiser's times, added below
  Condition staged = condition;
  if (!condition.prompt_ids.empty() &&
      models.target->condition_shape().mode != ConditionMode::kPromptIds) {
    PhaseTimer timer(&condition_stats, Phase::kTextStage, models.target->options().device(),
                     options.synchronize_phases);
    MULO_ASSIGN_OR_RETURN(staged.ta_tok_ids,
                          RunMllmStage(models, condition.prompt_ids, options.mllm_method,
                                       TarMllmSampling(sampling.seed), cancel));
    staged.prompt_ids.clear();
  }
  {
    PhaseTimer timer(&condition_stats, Phase::kPrefill, models.target->options().device(),
                     options.synchronize_phases);
    MULO_ASSIGN_OR_RETURN(request.condition, ResolveCondition(models, staged));
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
  for (Phase phase : {Phase::kTextStage, Phase::kPrefill}) {
    result.stats.phase_seconds[static_cast<int>(phase)] += condition_stats.PhaseSeconds(phase);
  }
  const int64_t grid = models.target->grid_size();
  {
    PhaseTimer timer(&result.stats, Phase::kImageDecode, models.target->options().device(),
                     options.synchronize_phases);
    MULO_ASSIGN_OR_RETURN(result.image,
                          models.vq->DecodeToRgb(result.tokens, grid, grid, models.pixel_rounding));
  }
  result.stats.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mulo::engine
