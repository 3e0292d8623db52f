#include "engine/sampling/sampler.h"

#include "engine/sampling/logits_processor.h"

namespace mulo::engine {

int64_t SampleFromProbabilities(const torch::Tensor& probs, Rng& rng) {
  auto p = probs.to(torch::kCPU, torch::kFloat32).contiguous();
  const float* data = p.data_ptr<float>();
  const int64_t n = p.numel();
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += data[i];
  const double target = rng.Uniform() * total;
  double cumulative = 0.0;
  int64_t last_positive = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (data[i] <= 0.0f) continue;
    cumulative += data[i];
    last_positive = i;
    if (target < cumulative) return i;
  }
  return last_positive;  // rounding at the very top of the CDF
}

int64_t SampleToken(const torch::Tensor& logits, const SamplingParams& params, Rng& rng) {
  torch::NoGradGuard no_grad;
  if (params.temperature == 0.0) return logits.argmax(-1).item<int64_t>();
  return SampleFromProbabilities(ToProbabilities(logits, params), rng);
}

}  // namespace mulo::engine
