// Draws a token from a probability vector with the request's own RNG.
#ifndef MULO_ENGINE_SAMPLING_SAMPLER_H_
#define MULO_ENGINE_SAMPLING_SAMPLER_H_

#include <torch/torch.h>

#include <cstdint>

#include "engine/sampling/rng.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

// Inverse-CDF draw from probs [vocab] (need not be normalised; summed in double, on the
// device for CUDA tensors so that only the chosen index crosses to the host).
// Reads probs from the device once (engine/core/host_read.h counts it).
int64_t SampleFromProbabilities(const torch::Tensor& probs, Rng& rng);

// The same draw from probs already copied to the host: reads nothing from a device, so it
// counts no host read.
int64_t SampleFromHostProbabilities(const torch::Tensor& probs, Rng& rng);

// Greedy argmax when params.temperature == 0 (consumes no random number), otherwise a draw
// from ToProbabilities(logits, params). logits: [vocab], already CFG-mixed.
int64_t SampleToken(const torch::Tensor& logits, const SamplingParams& params, Rng& rng);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_SAMPLER_H_
