// Classifier-free guidance as every method applies it: the conditional and unconditional
// streams run as one batch of two, and their logits are mixed before any other processing.
#ifndef MULO_ENGINE_SAMPLING_GUIDANCE_H_
#define MULO_ENGINE_SAMPLING_GUIDANCE_H_

#include <torch/types.h>

#include <cstdint>

#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

// CFG runs two streams unless the scale is exactly 1, where the mix equals the condition.
inline int64_t CfgBatch(const SamplingParams& params) { return params.cfg_scale == 1.0 ? 1 : 2; }

// The logits of the one guided stream: [batch, ...] -> [...], CFG-mixed when the batch holds
// [cond, uncond], else row 0.
torch::Tensor GuidedLogits(const torch::Tensor& logits, double cfg_scale);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_GUIDANCE_H_
