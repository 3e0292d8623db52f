// Draws a token from a probability vector with the request's own RNG.
#ifndef MULO_ENGINE_SAMPLING_SAMPLER_H_
#define MULO_ENGINE_SAMPLING_SAMPLER_H_

#include <torch/types.h>

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

// SampleToken split at its one device -> host read, so that the read can go where the
// caller's reads go (a request's engine loop batches it with other requests'): Prepare makes
// the tensor to read, Finish the token from its host copy. Together they are SampleToken: the
// same tokens, the same random numbers, the same one read.
struct PreparedTokenDraw {
  torch::Tensor to_read;  // the token as an int64 [1] (greedy; a draw on a CUDA device), or
                          // the probabilities (a draw on the CPU, finished on the host)
  torch::ScalarType dtype = torch::kInt64;  // what it is read as
  bool is_token = true;                     // to_read holds the token itself
};
PreparedTokenDraw PrepareTokenDraw(const torch::Tensor& logits, const SamplingParams& params,
                                   Rng& rng);
int64_t FinishTokenDraw(const PreparedTokenDraw& draw, const torch::Tensor& host, Rng& rng);

// SampleFromProbabilities' draw as device operations, without reading: the chosen index as an
// int64 [1] (the inverse CDF in double; rounding at the very top gives the last index with
// mass, as on the host). Used for CUDA tensors; it runs on any device.
torch::Tensor DrawIndexOnDevice(const torch::Tensor& probs, Rng& rng);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_SAMPLER_H_
