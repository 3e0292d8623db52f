#include "engine/sampling/speculative_acceptance.h"

#include "engine/core/host_read.h"

namespace mulo::engine {

bool AcceptDraft(double p_x, double q_x, Rng& rng) {
  if (p_x >= q_x) {
    rng.Uniform();  // keep the stream's position independent of the outcome
    return true;
  }
  return rng.Uniform() * q_x < p_x;
}

namespace {

// `counted`: the total is a host read (p and q where the model is), not a host value.
torch::Tensor Residual(const torch::Tensor& p, const torch::Tensor& q, bool counted) {
  at::NoGradGuard no_grad;
  auto residual = (p.to(torch::kFloat64) - q.to(torch::kFloat64)).clamp_min(0.0);
  const torch::Tensor sum = residual.sum();
  const double total = counted ? ItemOf<double>(sum) : sum.item<double>();
  if (total <= 0.0) return p.to(torch::kFloat32);
  return (residual / total).to(torch::kFloat32);
}

}  // namespace

torch::Tensor ResidualDistribution(const torch::Tensor& p, const torch::Tensor& q) {
  return Residual(p, q, /*counted=*/true);
}

torch::Tensor HostResidualDistribution(const torch::Tensor& p, const torch::Tensor& q) {
  return Residual(p, q, /*counted=*/false);
}

}  // namespace mulo::engine
