#include "engine/decode/generate.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "engine/decode/ar.h"
#include "engine/model/condition_stages.h"

namespace mulo::engine {

namespace {

// A family that tokenises a prompt in the engine has a stage reading it (the bundled text
// encoder); the converted families' prompts come as ids from the server.
Status RequirePromptStage(const ModelSet& models) {
  if (models.StageReading(ConditionForm::kPrompt) != nullptr) return OkStatus();
  return FailedPreconditionError("model family '" + models.name +
                                 "' has no text conditioner; send condition features");
}

}  // namespace

StatusOr<Condition> ConditionFromPrompt(const ModelSet& models, const std::string& prompt) {
  MULO_RETURN_IF_ERROR(RequirePromptStage(models));
  Condition condition;
  condition.prompt = prompt;
  Stats stats;
  CancelToken cancel;
  return RunConditionPipeline(models, condition, 0, cancel, {}, stats);
}

StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const std::string& prompt, const SamplingParams& sampling,
                                       ProgressSink& progress, const CancelToken& cancel,
                                       const GenerateOptions& options) {
  MULO_RETURN_IF_ERROR(RequirePromptStage(models));
  Condition condition;
  condition.prompt = prompt;
  return GenerateImage(method, models, condition, sampling, progress, cancel, options);
}

Status CheckConditionTokens(const ModelSet& models, const std::vector<int64_t>& ids) {
  if (models.ta_tok == nullptr) {
    return InvalidArgumentError("condition_tokens: model family '" + models.name +
                                "' has no TA-Tok de-quantiser (see ModelInfo.conditions)");
  }
  return CheckTaTokIds(*models.ta_tok, models.target->condition_shape().rows, ids);
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

namespace {

// A stage family (its target the language model) decoded by `method` (ar when null).
// With `loop`, its forwards join the batches of the other requests' forwards (of this
// model and of every other).
StatusOr<std::vector<int64_t>> DecodeStage(const ModelSet& stage,
                                           const std::vector<int64_t>& prompt_ids,
                                           const DecodingMethod* method,
                                           const SamplingParams& sampling,
                                           const CancelToken& cancel, Stats* stage_stats,
                                           EngineLoop* loop = nullptr) {
  const ArDecoder ar;
  const DecodingMethod& stage_method = method != nullptr ? *method : ar;
  DecodeRequest request;
  request.condition.prompt_ids = prompt_ids;
  request.sampling = sampling;
  // A top-k past the image vocabulary keeps every image token (Tar's 1200 of 65,536; a small
  // family's whole range).
  request.sampling.top_k = std::min(sampling.top_k, stage.target->vocab_size());
  request.loop = loop;
  SilentProgress progress;
  MULO_ASSIGN_OR_RETURN(DecodeResult decoded,
                        stage_method.Decode(request, stage, progress, cancel));
  if (stage_stats != nullptr) *stage_stats = decoded.stats;
  return std::vector<int64_t>(decoded.tokens.begin(), decoded.tokens.end());
}

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
  return DecodeStage(*models.mllm_stage, prompt_ids, method, sampling, cancel, stage_stats);
}

namespace {

// The request's side of a decoding stage: its method, seed, cancellation and loop; the
// stage's tokens and forwards go to the request's text-stage counters.
class RequestStageDecoder : public StageDecoder {
 public:
  RequestStageDecoder(const DecodingMethod* method, uint64_t seed, const CancelToken& cancel,
                      EngineLoop* loop, Stats& stats)
      : method_(method), seed_(seed), cancel_(cancel), loop_(loop), stats_(stats) {}

  StatusOr<std::vector<int64_t>> Decode(const ModelSet& stage,
                                        const std::vector<int64_t>& prompt_ids) override {
    Stats stage_stats;
    MULO_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                          DecodeStage(stage, prompt_ids, method_, TarMllmSampling(seed_), cancel_,
                                      &stage_stats, loop_));
    stats_.text_stage_tokens += stage_stats.tokens;
    stats_.text_stage_forward_passes += stage_stats.target_forward_passes;
    return ids;
  }

 private:
  const DecodingMethod* method_;
  uint64_t seed_;
  const CancelToken& cancel_;
  EngineLoop* loop_;
  Stats& stats_;
};

}  // namespace

StatusOr<Condition> RunConditionPipeline(const ModelSet& models, const Condition& condition,
                                         uint64_t seed, const CancelToken& cancel,
                                         const GenerateOptions& options, Stats& stats) {
  const ConditionForm form = FormOf(condition);
  if (form == ConditionForm::kFeatures || form == ConditionForm::kClassLabel) return condition;
  auto stage = std::find_if(models.pipeline.begin(), models.pipeline.end(),
                            [&](const auto& s) { return s->input() == form; });
  if (stage == models.pipeline.end()) {
    return InvalidArgumentError(std::string(ConditionFormField(form)) + ": model family '" +
                                models.name + "' has no stage that reads it (see " +
                                "ModelInfo.conditions)");
  }
  RequestStageDecoder decoder(options.mllm_method, seed, cancel, options.loop, stats);
  Condition current = condition;
  for (; stage != models.pipeline.end(); ++stage) {
    MULO_RETURN_IF_ERROR(cancel.Check());
    PhaseTimer timer(&stats, (*stage)->reads_text() ? Phase::kTextStage : Phase::kPrefill,
                     models.target->options().device(), options.synchronize_phases);
    MULO_ASSIGN_OR_RETURN(current, (*stage)->Run(current, decoder));
  }
  return current;
}

StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const Condition& condition, const SamplingParams& sampling,
                                       ProgressSink& progress, const CancelToken& cancel,
                                       const GenerateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  DecodeRequest request;
  Stats condition_stats;  // the pipeline's stages, added below
  if (models.target->condition_shape().mode == ConditionMode::kPromptIds) {
    request.condition = condition;  // the family is itself a language model reading the ids
  } else {
    MULO_ASSIGN_OR_RETURN(request.condition,
                          RunConditionPipeline(models, condition, sampling.seed, cancel, options,
                                               condition_stats));
  }
  request.sampling = sampling;
  request.trace = options.trace;
  request.loop = options.loop;
  request.kv = options.kv;
  request.synchronize_phases = options.synchronize_phases;
  MULO_ASSIGN_OR_RETURN(DecodeResult decoded, method.Decode(request, models, progress, cancel));
  MULO_RETURN_IF_ERROR(cancel.Check());
  GenerateResult result;
  result.tokens = std::move(decoded.tokens);
  result.stats = decoded.stats;
  for (Phase phase : {Phase::kTextStage, Phase::kPrefill}) {
    result.stats.phase_seconds[static_cast<int>(phase)] += condition_stats.PhaseSeconds(phase);
  }
  result.stats.text_stage_tokens = condition_stats.text_stage_tokens;
  result.stats.text_stage_forward_passes = condition_stats.text_stage_forward_passes;
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
