#include "engine/sampling/row_sampler.h"

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

torch::Tensor GuidedProbabilities(const torch::Tensor& cond, const torch::Tensor& uncond,
                                  const torch::Tensor& cfg, const torch::Tensor& temperature,
                                  bool one_hot_greedy) {
  const torch::Tensor guided = uncond + cfg * (cond - uncond);
  const torch::Tensor greedy = temperature == 0;
  const torch::Tensor divisor = torch::where(greedy, torch::ones_like(temperature), temperature);
  const torch::Tensor p = torch::softmax(guided / divisor, -1);
  if (!one_hot_greedy) return p;
  const int64_t last = guided.dim() - 1;
  const torch::Tensor one_hot =
      torch::zeros_like(guided).scatter_(last, guided.argmax(last, /*keepdim=*/true), 1.0);
  return torch::where(greedy, one_hot, p);
}

torch::Tensor SampleRows(const torch::Tensor& logits, const SamplingParams& params,
                         const torch::Tensor& uniforms) {
  torch::NoGradGuard no_grad;
  if (params.temperature == 0.0) return logits.argmax(-1);
  return DrawRows(ToProbabilities(logits, params), uniforms);
}

}  // namespace mulo::engine
