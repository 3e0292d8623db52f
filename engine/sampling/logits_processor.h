// Turns raw logits into the distribution tokens are drawn from: classifier-free guidance,
// then temperature, top-k and top-p (LlamaGen's order). Drafters and verifiers use the same
// functions so that p and q are processed identically.
#ifndef MULO_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
#define MULO_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_

#include <torch/types.h>

#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

// logits [2, ...] with the conditional stream in row 0 and the unconditional one in row 1 ->
// uncond + scale * (cond - uncond), shape [...].
torch::Tensor MixCfg(const torch::Tensor& logits, double scale);

// Probabilities [..., vocab] (float32) after temperature, top-k and top-p. Temperature 0
// gives the one-hot distribution of the argmax (the first maximum on ties).
torch::Tensor ToProbabilities(const torch::Tensor& logits, const SamplingParams& params);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
