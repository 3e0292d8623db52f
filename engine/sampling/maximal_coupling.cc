#include "engine/sampling/maximal_coupling.h"

#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

torch::Tensor ResidualRows(const torch::Tensor& p, const torch::Tensor& q) {
  const torch::Tensor excess = (p - q).clamp_min(0);
  const torch::Tensor total = excess.sum(-1, /*keepdim=*/true);
  return torch::where(total > 0, excess / total.clamp_min(1e-30), p);
}

torch::Tensor KeepProbabilities(const torch::Tensor& p, const torch::Tensor& q,
                                const torch::Tensor& x) {
  const torch::Tensor column = x.unsqueeze(1);
  const torch::Tensor p_x = p.gather(1, column).squeeze(1).to(torch::kFloat64);
  const torch::Tensor q_x = q.gather(1, column).squeeze(1).to(torch::kFloat64);
  // x was drawn from q, so q_x > 0; where p_x >= q_x the ratio is at least 1.
  return torch::where(p_x >= q_x, torch::ones_like(p_x), p_x / q_x.clamp_min(1e-300));
}

CoupledDraws CoupleRows(const torch::Tensor& p, const torch::Tensor& x,
                        const torch::Tensor& keep_probability, const torch::Tensor& residual,
                        const torch::Tensor& keep_numbers, const torch::Tensor& draw_numbers,
                        const torch::Tensor& coupled) {
  CoupledDraws out;
  out.kept = keep_numbers < keep_probability;
  torch::Tensor source = residual;
  if (coupled.defined()) {
    out.kept = out.kept & coupled;
    source = torch::where(coupled.unsqueeze(1), residual, p);
  }
  out.tokens = torch::where(out.kept, x, DrawRows(source, draw_numbers));
  return out;
}

}  // namespace mulo::engine
