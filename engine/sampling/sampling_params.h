// How tokens are drawn from the target's logits. Shared by every decoding method.
#ifndef MULO_ENGINE_SAMPLING_SAMPLING_PARAMS_H_
#define MULO_ENGINE_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>

#include "engine/core/status.h"

namespace mulo::engine {

struct SamplingParams {
  // Classifier-free guidance: logits = uncond + cfg_scale * (cond - uncond). 1 = condition
  // only: the unconditional stream is then not run at all (CfgBatch in guidance.h).
  double cfg_scale = 4.0;
  // 0 = greedy (argmax, no randomness); otherwise logits are divided by it.
  double temperature = 1.0;
  // Keep only the k most likely tokens (0 = all).
  int64_t top_k = 0;
  // Nucleus: keep the smallest set of most likely tokens whose mass reaches top_p (1 = all).
  double top_p = 1.0;
  // Seeds every random draw of the request; same seed, same tokens on one machine.
  uint64_t seed = 0;
};

// INVALID_ARGUMENT naming the offending field ("sampling.temperature: ...").
Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_SAMPLING_PARAMS_H_
