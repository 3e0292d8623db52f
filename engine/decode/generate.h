// Prompt in, image out: the path every caller (server, benchmarks, tests) takes through a
// decoding method. Encodes the prompt with the family's text conditioner, decodes tokens with
// the chosen method, turns them into RGB with the VQ decoder, and fills one Stats.
#ifndef MULO_ENGINE_DECODE_GENERATE_H_
#define MULO_ENGINE_DECODE_GENERATE_H_

#include <string>
#include <vector>

#include "engine/decode/decoding_method.h"

namespace mulo::engine {

// How a request runs, besides what it asks for (DecodeRequest's fields of the same names).
struct GenerateOptions {
  ForwardTrace* trace = nullptr;      // receives every transformer forward (benchmarks)
  EngineLoop* loop = nullptr;  // the forwards join batches with other requests'
  KvReservation* kv = nullptr;  // the caches come from the worker's pools (kv_pools.h)
  bool synchronize_phases = false;    // phase timers wait for the GPU (benchmarks)
  // The MLLM stage's method (a family with one, a condition with prompt_ids): null is ar.
  const DecodingMethod* mllm_method = nullptr;
};

// How Tar samples its MLLM (upstream t2i_inference.py): temperature 1, top-p 0.95, top-k 1200,
// no classifier-free guidance; `seed` is the request's.
SamplingParams TarMllmSampling(uint64_t seed);

// Tar's MLLM stage: the family's MLLM (ModelSet::mllm_stage) writes the target's TA-Tok ids
// from the prompt's text ids with `method` (ar when null) under `sampling`. INVALID_ARGUMENT
// naming prompt_ids when the family has no MLLM or the ids do not fit it; `stage_stats`
// (optional) receives the stage's own Stats.
StatusOr<std::vector<int64_t>> RunMllmStage(const ModelSet& models,
                                            const std::vector<int64_t>& prompt_ids,
                                            const DecodingMethod* method,
                                            const SamplingParams& sampling,
                                            const CancelToken& cancel,
                                            Stats* stage_stats = nullptr);

struct GenerateResult {
  std::vector<int32_t> tokens;  // raster order, grid_size^2 ids
  RgbImage image;
  Stats stats;  // includes the image decode phase
};

// Condition features for a prompt (INVALID_ARGUMENT naming "prompt" on a bad prompt).
StatusOr<Condition> ConditionFromPrompt(const ModelSet& models, const std::string& prompt);

StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const std::string& prompt, const SamplingParams& sampling,
                                       ProgressSink& progress, const CancelToken& cancel,
                                       const GenerateOptions& options = {});

// TA-Tok ids the family can turn into its target's condition: it has a de-quantiser, and
// the ids are the target's cls_token_num, each one the de-quantiser takes. INVALID_ARGUMENT
// naming "condition_tokens" otherwise (the server's validation).
Status CheckConditionTokens(const ModelSet& models, const std::vector<int64_t>& ids);

// The family's condition pipeline (ModelSet::pipeline, conditioner.h) from the stage that reads
// what `condition` carries to the target's features; features or a class label come back as
// they are. INVALID_ARGUMENT naming the condition's field when no stage reads it. Each stage
// is timed in `stats` (stages reading text as text_stage, the others with the prefill); a stage
// that decodes (Tar's MLLM) runs options.mllm_method (ar when null) under
// TarMllmSampling(seed) and adds its tokens and forward passes to stats' text-stage counters.
StatusOr<Condition> RunConditionPipeline(const ModelSet& models, const Condition& condition,
                                         uint64_t seed, const CancelToken& cancel,
                                         const GenerateOptions& options, Stats& stats);

// The same from any condition the family's pipeline reads (RunConditionPipeline: the prompt's
// text, its text ids for Tar's MLLM, FLAN-T5 ids, TA-Tok ids), or features or a class label.
StatusOr<GenerateResult> GenerateImage(const DecodingMethod& method, const ModelSet& models,
                                       const Condition& condition,
                                       const SamplingParams& sampling, ProgressSink& progress,
                                       const CancelToken& cancel,
                                       const GenerateOptions& options = {});

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_GENERATE_H_
