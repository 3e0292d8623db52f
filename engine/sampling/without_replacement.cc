#include "engine/sampling/without_replacement.h"

#include "engine/sampling/sampler.h"

namespace mulo::engine {

SiblingDraws DrawWithoutReplacement(const torch::Tensor& q, int64_t count, Rng& rng,
                                    bool greedy) {
  torch::NoGradGuard no_grad;
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

}  // namespace mulo::engine
