#include "engine/sampling/logits_processor.h"

#include <cmath>

namespace mulo::engine {

torch::Tensor MixCfg(const torch::Tensor& logits, double scale) {
  auto cond = logits.select(0, 0).to(torch::kFloat32);
  auto uncond = logits.select(0, 1).to(torch::kFloat32);
  return uncond + scale * (cond - uncond);
}

torch::Tensor ToProbabilities(const torch::Tensor& logits, const SamplingParams& params) {
  at::NoGradGuard no_grad;
  auto x = logits.to(torch::kFloat32);
  const int64_t vocab = x.size(-1);
  if (params.temperature == 0.0) {
    return torch::one_hot(x.argmax(-1), vocab).to(torch::kFloat32);
  }
  x = x / params.temperature;
  if (params.top_k > 0 && params.top_k < vocab) {
    // Keep logits >= the k-th largest (ties at the threshold stay, as upstream).
    auto kth = std::get<0>(x.topk(params.top_k, -1)).narrow(-1, params.top_k - 1, 1);
    x = x.masked_fill(x < kth, -INFINITY);
  }
  if (params.top_p < 1.0) {
    // Stable: tied logits keep index order, as the graphs' FilterRows sorts them.
    auto [sorted, order] = x.sort(/*stable=*/true, -1, /*descending=*/true);
    auto cumulative = torch::softmax(sorted, -1).cumsum(-1);
    // Drop a token when the mass before it already exceeds top_p; the top token always stays.
    auto drop_sorted = (cumulative - torch::softmax(sorted, -1)) > params.top_p;
    auto drop = torch::zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
    x = x.masked_fill(drop, -INFINITY);
  }
  return torch::softmax(x, -1);
}

}  // namespace mulo::engine
