#include "engine/sampling/sampler.h"

#include "engine/core/host_read.h"
#include "engine/sampling/logits_processor.h"

namespace mulo::engine {

namespace {

// The same draw on the device: only the chosen index crosses to the host (8 bytes instead of
// the whole distribution). searchsorted(right) returns the first i whose cumulative mass
// exceeds the target, which never lands on a zero-probability entry, as the host loop skips
// them; the cumulative sum runs in double on the device, in another order than the host's.
int64_t SampleOnDevice(const torch::Tensor& probs, Rng& rng) {
  const double u = rng.Uniform();
  auto cumulative = probs.to(torch::kFloat64).flatten().cumsum(0);
  auto target = (cumulative.narrow(0, cumulative.size(0) - 1, 1) * u);
  const int64_t index =
      ItemOf<int64_t>(torch::searchsorted(cumulative, target, /*out_int32=*/false, /*right=*/true));
  if (index < cumulative.size(0)) return index;
  // Rounding at the very top of the CDF: the last entry with mass, as on the host.
  return ItemOf<int64_t>(torch::nonzero(probs.flatten() > 0).max());
}

}  // namespace

int64_t SampleFromProbabilities(const torch::Tensor& probs, Rng& rng) {
  if (probs.is_cuda()) return SampleOnDevice(probs, rng);
  return SampleFromHostProbabilities(HostRead(probs, torch::kFloat32), rng);
}

int64_t SampleFromHostProbabilities(const torch::Tensor& probs, Rng& rng) {
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
  if (params.temperature == 0.0) return ItemOf<int64_t>(logits.argmax(-1));
  return SampleFromProbabilities(ToProbabilities(logits, params), rng);
}

}  // namespace mulo::engine
