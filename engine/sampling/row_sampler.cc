#include "engine/sampling/row_sampler.h"

#include <cmath>
#include <vector>

#include "engine/core/device_upload.h"
#include "engine/sampling/logits_processor.h"

namespace mulo::engine {

torch::Tensor DrawRows(const torch::Tensor& probs, const torch::Tensor& uniforms) {
  TORCH_CHECK(probs.dim() == 2, "DrawRows: probs must be [rows, vocab]");
  TORCH_CHECK(uniforms.dim() == 1 && uniforms.size(0) == probs.size(0),
              "DrawRows: one uniform per row");
  const torch::Tensor mass = probs.to(torch::kFloat64);
  const torch::Tensor cumulative = mass.cumsum(1);
  const int64_t vocab = probs.size(1);
  const torch::Tensor target =
      cumulative.select(1, vocab - 1).unsqueeze(1) * Upload(uniforms, mass.device()).unsqueeze(1);
  const torch::Tensor index =
      torch::searchsorted(cumulative, target, /*out_int32=*/false, /*right=*/true).squeeze(1);
  // The last entry with mass of each row, for draws that round past the top of the CDF.
  const torch::Tensor positions =
      torch::arange(vocab, torch::TensorOptions().dtype(torch::kInt64).device(probs.device()));
  const torch::Tensor last_with_mass =
      torch::where(mass > 0, positions.unsqueeze(0), torch::zeros_like(positions).unsqueeze(0))
          .amax(1);
  return torch::where(index < vocab, index, last_with_mass);
}

bool HasFilters(const SamplingParams& params, int64_t vocab) {
  return (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0;
}

torch::Tensor FilterRows(const torch::Tensor& tempered, const RowFilters& filters) {
  const int64_t vocab = tempered.size(-1), last = tempered.dim() - 1;
  std::vector<int64_t> row_shape = tempered.sizes().vec();
  row_shape.back() = 1;
  // One stable descending sort serves both filters (a second full sort cost the CPU ~60 us per
  // row of 1,024 logits, more than the rest of the filter): top-k's threshold is the k-th
  // value, and what top-k leaves sorts in the same order with its dropped tail at -inf, which
  // is how ToProbabilities' stable sort of the masked row orders it (ties in index order).
  auto [sorted, order] = tempered.sort(/*stable=*/true, last, /*descending=*/true);
  // Top-k: keep logits >= the k-th largest (ties at the threshold stay); a row that keeps
  // everything compares with its smallest logit, which drops nothing.
  const torch::Tensor k = filters.top_k.to(torch::kInt64);
  const torch::Tensor kept = torch::where(k.gt(0).logical_and(k.lt(vocab)), k, vocab);
  const torch::Tensor below_kth = sorted < sorted.gather(last, (kept - 1).expand(row_shape));
  // Top-p on what top-k left: drop a token when the mass before it already exceeds top_p (the
  // top token always stays); a row whose top_p is 1 drops nothing.
  const torch::Tensor mass = torch::softmax(sorted.masked_fill(below_kth, -INFINITY), last);
  const torch::Tensor top_p = filters.top_p.to(torch::kFloat32);
  const torch::Tensor drop_sorted = below_kth.logical_or(
      ((mass.cumsum(last) - mass) > top_p).logical_and(top_p < 1.0));
  const torch::Tensor drop = torch::zeros_like(drop_sorted).scatter(last, order, drop_sorted);
  return tempered.masked_fill(drop, -INFINITY);
}

torch::Tensor GuidedProbabilities(const torch::Tensor& cond, const torch::Tensor& uncond,
                                  const torch::Tensor& cfg, const torch::Tensor& temperature,
                                  bool one_hot_greedy, const RowFilters* filters) {
  const torch::Tensor guided = uncond + cfg * (cond - uncond);
  const torch::Tensor greedy = temperature == 0;
  const torch::Tensor divisor = torch::where(greedy, torch::ones_like(temperature), temperature);
  const torch::Tensor tempered = guided / divisor;
  const torch::Tensor p =
      torch::softmax(filters != nullptr ? FilterRows(tempered, *filters) : tempered, -1);
  if (!one_hot_greedy) {
    // A greedy row ranks by its unfiltered distribution (DecodeSession's ranking params).
    return filters != nullptr ? torch::where(greedy, torch::softmax(tempered, -1), p) : p;
  }
  const int64_t last = guided.dim() - 1;
  const torch::Tensor one_hot =
      torch::zeros_like(guided).scatter_(last, guided.argmax(last, /*keepdim=*/true), 1.0);
  return torch::where(greedy, one_hot, p);
}

torch::Tensor SampleRows(const torch::Tensor& logits, const SamplingParams& params,
                         const torch::Tensor& uniforms) {
  at::NoGradGuard no_grad;
  if (params.temperature == 0.0) return logits.argmax(-1);
  return DrawRows(ToProbabilities(logits, params), uniforms);
}

}  // namespace mulo::engine
