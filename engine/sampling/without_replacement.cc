#include "engine/sampling/without_replacement.h"

#include "engine/sampling/row_sampler.h"
#include "engine/sampling/sampler.h"

namespace mulo::engine {

SiblingDraws DrawWithoutReplacement(const torch::Tensor& q, int64_t count, Rng& rng,
                                    bool greedy) {
  at::NoGradGuard no_grad;
  SiblingDraws out;
  torch::Tensor remaining = q.to(torch::kCPU, torch::kFloat32).clone();
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < count; ++i) {
    const double mass = remaining.sum().item<double>();
    if (!(mass > 0)) break;
    remaining /= mass;
    const int64_t token = greedy ? remaining.argmax().item<int64_t>()
                                 : SampleFromHostProbabilities(remaining, rng);
    rows.push_back(greedy ? torch::one_hot(torch::tensor(token), remaining.size(0))
                                .to(torch::kFloat32)
                          : remaining.clone());
    out.tokens.push_back(token);
    remaining[token] = 0.0f;
  }
  out.q = rows.empty() ? torch::zeros({0, q.size(0)}) : torch::stack(rows);
  return out;
}

SiblingDrawsOnDevice DrawSiblingsOnDevice(const torch::Tensor& q, int64_t count,
                                          const torch::Tensor& uniforms, bool greedy) {
  at::NoGradGuard no_grad;
  TORCH_CHECK(q.dim() == 2, "DrawSiblingsOnDevice: q must be [parents, V]");
  TORCH_CHECK(greedy || (uniforms.dim() == 2 && uniforms.size(0) == q.size(0) &&
                         uniforms.size(1) == count),
              "DrawSiblingsOnDevice: uniforms must be [parents, count]");
  torch::Tensor remaining = q.to(torch::kFloat32);
  std::vector<torch::Tensor> tokens, rows, valid;
  for (int64_t r = 0; r < count; ++r) {
    // The host loop's steps, row-wise: the remaining mass in float32, the row renormalised
    // by it, the draw, then the drawn token's mass removed.
    const torch::Tensor mass = remaining.sum(1, /*keepdim=*/true);
    const torch::Tensor has_mass = mass > 0;
    remaining = remaining / torch::where(has_mass, mass, torch::ones_like(mass));
    const torch::Tensor token =
        greedy ? remaining.argmax(1) : DrawRows(remaining, uniforms.select(1, r));
    rows.push_back(greedy ? torch::zeros_like(remaining).scatter_(1, token.unsqueeze(1), 1.0f)
                          : remaining);
    tokens.push_back(token);
    valid.push_back(has_mass.squeeze(1));
    remaining = remaining.scatter(1, token.unsqueeze(1), 0.0f);
  }
  if (count == 0) {
    const auto ints = q.options().dtype(torch::kInt64);
    return {torch::zeros({q.size(0), 0}, ints), torch::zeros({q.size(0), 0, q.size(1)}, q.options()),
            torch::zeros({q.size(0), 0}, ints.dtype(torch::kBool))};
  }
  return {torch::stack(tokens, 1), torch::stack(rows, 1), torch::stack(valid, 1)};
}

}  // namespace mulo::engine
