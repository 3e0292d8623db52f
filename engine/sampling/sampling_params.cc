#include "engine/sampling/sampling_params.h"

#include <cmath>
#include <string>

namespace mulo::engine {

Status ValidateSamplingParams(const SamplingParams& p, int64_t vocab_size) {
  if (!std::isfinite(p.cfg_scale) || p.cfg_scale < 0.0 || p.cfg_scale > 100.0) {
    return InvalidArgumentError("sampling.cfg_scale: must be in [0, 100]");
  }
  if (!std::isfinite(p.temperature) || p.temperature < 0.0 || p.temperature > 100.0) {
    return InvalidArgumentError("sampling.temperature: must be in [0, 100] (0 = greedy)");
  }
  if (p.top_k < 0 || p.top_k > vocab_size) {
    return InvalidArgumentError("sampling.top_k: must be in [0, " + std::to_string(vocab_size) +
                                "] (0 = off)");
  }
  if (!std::isfinite(p.top_p) || p.top_p <= 0.0 || p.top_p > 1.0) {
    return InvalidArgumentError("sampling.top_p: must be in (0, 1] (1 = off)");
  }
  return OkStatus();
}

}  // namespace mulo::engine
