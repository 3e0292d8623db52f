// A model family: every component a request may need, loaded once and shared read-only by
// all requests. Described by <dir>/family.json:
//   {"name": "synth", "default_cfg_scale": 4.0,
//    "components": {"target": "target", "vq": "vq", "conditioner": "conditioner",
//                   "drafter": "drafter", "chain": "chain", "upsampler": "upsampler",
//                   "downsampler": "downsampler", "eagle": "eagle", "ta_tok": "ta_tok",
//                   "mllm": "mllm", "t5": "t5"},
//    "pipeline": ["mllm", "ta_tok"],
//    "method_defaults": {"mulo": {"tau": 1e-3, ...}}, "pixel_rounding": "round"}
// Component paths are relative to <dir>. target and vq are required; the others enable the
// methods that need them. "pipeline" lists the conditioners in the order a condition passes
// through them (conditioner.h); without it the components imply it: [conditioner], [t5],
// [mllm, ta_tok] or [ta_tok]. Loading checks that the components fit together (vocabularies,
// grids, condition widths).
#ifndef MULO_ENGINE_MODEL_MODEL_SET_H_
#define MULO_ENGINE_MODEL_MODEL_SET_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/conditioner.h"
#include "engine/model/eagle_head.h"
#include "engine/model/resampler.h"
#include "engine/model/ta_tok_dequantizer.h"
#include "engine/model/text_conditioner.h"
#include "engine/model/architectures.h"
#include "engine/model/token_model.h"
#include "engine/model/vq_decoder.h"
#include "engine/sampling/latent_neighbors.h"

namespace mulo::engine {

struct ModelSet {
  std::string name;
  double default_cfg_scale = 4.0;
  // family.json "pixel_rounding": "round" (default) or "truncate" (Tar's uint8 cast).
  PixelRounding pixel_rounding = PixelRounding::kNearest;
  std::shared_ptr<const TokenModel> target;  // any architecture (architectures.h)
  std::shared_ptr<const VqDecoder> vq;
  std::shared_ptr<const TextConditioner> conditioner;  // prompt -> condition features
  std::shared_ptr<const TaTokDequantizer> ta_tok;      // Tar image-token ids -> features
  // Tar's MLLM stage (components.mllm, a qwen2 / llama component with image tokens): the
  // language model that writes the target's TA-Tok ids from the prompt's text ids, as a family
  // of its own (its target is the MLLM, no VQ), so any single-model method decodes it
  // (RunMllmStage in generate.h). Null when the family has none.
  std::shared_ptr<const ModelSet> mllm_stage;
  // The conditioners from what a request sends to what the target reads, in order; each
  // stage's output is the next one's input and the last writes features. Empty for a family
  // whose target reads class labels or features only.
  std::vector<std::shared_ptr<const Conditioner>> pipeline;
  std::shared_ptr<const TokenModel> drafter;           // MuLo-SD low-resolution drafter
  std::shared_ptr<const TokenModel> chain;             // small draft model (speculative)
  std::shared_ptr<const Resampler> upsampler;          // MuLo-SD U_r
  std::shared_ptr<const Resampler> downsampler;        // MuLo-SD D_r
  std::shared_ptr<const EagleHead> eagle;              // EAGLE-style head over the target
  // Nearest codebook entries of every entry (LANTERN / MuLo-SD pooling), built at load.
  std::shared_ptr<const LatentNeighbors> neighbors;
  // family.json's "method_defaults": per method name, the options the family was calibrated
  // for (read through each method's spec by DefaultMethodConfig); empty when none.
  nlohmann::json method_defaults = nlohmann::json::object();
  // Bytes of every component's weights (in the compute dtype) plus the neighbour table, as
  // resident on the device: what keeping this family loaded costs.
  int64_t weight_bytes = 0;

  // Pixels per side of the target's images.
  int64_t ImageSize() const;
  // The pipeline's stage that reads `form`, or null.
  const Conditioner* StageReading(ConditionForm form) const;
};

StatusOr<ModelSet> LoadModelSet(const std::string& dir, const LoadOptions& options);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_MODEL_SET_H_
