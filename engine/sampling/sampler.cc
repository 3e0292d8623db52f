#include "engine/sampling/sampler.h"

#include "engine/core/host_read.h"
#include "engine/sampling/logits_processor.h"

namespace mulo::engine {

// The same draw on the device: only the chosen index crosses to the host (8 bytes instead of
// the whole distribution). searchsorted(right) returns the first i whose cumulative mass
// exceeds the target, which never lands on a zero-probability entry, as the host loop skips
// them; the cumulative sum runs in double on the device, in another order than the host's.
torch::Tensor DrawIndexOnDevice(const torch::Tensor& probs, Rng& rng) {
  const double u = rng.Uniform();
  const torch::Tensor flat = probs.flatten();
  const int64_t n = flat.size(0);
  const torch::Tensor cumulative = flat.to(torch::kFloat64).cumsum(0);
  const torch::Tensor target = cumulative.narrow(0, n - 1, 1) * u;
  const torch::Tensor index =
      torch::searchsorted(cumulative, target, /*out_int32=*/false, /*right=*/true);
  // Rounding at the very top of the CDF: the last entry with mass, as on the host. Chosen on
  // the device, so the draw stays one read.
  const torch::Tensor positions = torch::arange(n, index.options());
  const torch::Tensor last_with_mass =
      torch::where(flat > 0, positions, torch::full_like(positions, -1)).max().reshape({1});
  return torch::where(index < n, index, last_with_mass);
}

int64_t SampleFromProbabilities(const torch::Tensor& probs, Rng& rng) {
  if (probs.is_cuda()) return ItemOf<int64_t>(DrawIndexOnDevice(probs, rng));
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

PreparedTokenDraw PrepareTokenDraw(const torch::Tensor& logits, const SamplingParams& params,
                                   Rng& rng) {
  at::NoGradGuard no_grad;
  if (params.temperature == 0.0) return {logits.argmax(-1).reshape({1}), torch::kInt64, true};
  const torch::Tensor probs = ToProbabilities(logits, params);
  if (probs.is_cuda()) return {DrawIndexOnDevice(probs, rng), torch::kInt64, true};
  return {probs, torch::kFloat32, false};
}

int64_t FinishTokenDraw(const PreparedTokenDraw& draw, const torch::Tensor& host, Rng& rng) {
  // The token, read as int64 [1]: its first element (data_ptr honours a view's offset).
  if (draw.is_token) return host.data_ptr<int64_t>()[0];
  return SampleFromHostProbabilities(host, rng);
}

int64_t SampleToken(const torch::Tensor& logits, const SamplingParams& params, Rng& rng) {
  const PreparedTokenDraw draw = PrepareTokenDraw(logits, params, rng);
  return FinishTokenDraw(draw, HostRead(draw.to_read, draw.dtype), rng);
}

}  // namespace mulo::engine
