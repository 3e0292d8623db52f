#include "engine/sampling/chain_rejection.h"

#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

torch::Tensor VerifyChain(const torch::Tensor& p, const torch::Tensor& q,
                          const torch::Tensor& tokens, const torch::Tensor& accept_uniforms,
                          const torch::Tensor& draw_uniform, bool greedy) {
  torch::NoGradGuard no_grad;
  const int64_t length = q.size(0), rows = p.size(0);
  const auto long_options = torch::dtype(torch::kInt64).device(p.device());
  const torch::Tensor probs = p.to(torch::kFloat32);
  torch::Tensor accepted = torch::zeros({}, long_options);
  torch::Tensor next = torch::full({1}, -1, long_options);
  if (length > 0) {
    // The rule in double, on the float32 values the host verifier reads.
    const torch::Tensor drafts = q.to(torch::kFloat32);
    const torch::Tensor ids = tokens.to(long_options).view({length, 1});
    const torch::Tensor p_x =
        probs.narrow(0, 0, length).gather(1, ids).squeeze(1).to(torch::kFloat64);
    const torch::Tensor q_x = drafts.gather(1, ids).squeeze(1).to(torch::kFloat64);
    const torch::Tensor keep = p_x.ge(q_x).logical_or(accept_uniforms.mul(q_x).lt(p_x));
    accepted = keep.to(torch::kInt64).cumprod(0).sum();
    // The residual at the first rejection (row length - 1 stands in when none is rejected;
    // its draw is then discarded).
    const torch::Tensor at = accepted.clamp_max(length - 1).view({1});
    const torch::Tensor p_a = probs.index_select(0, at);
    const torch::Tensor residual =
        (p_a.to(torch::kFloat64) - drafts.index_select(0, at).to(torch::kFloat64)).clamp_min(0.0);
    const torch::Tensor total = residual.sum();
    const torch::Tensor replacement =
        torch::where(total.gt(0.0), residual.div(total).to(torch::kFloat32), p_a);
    const torch::Tensor resampled = DrawRows(replacement, draw_uniform);
    next = torch::where(accepted.lt(length), resampled, next);
  }
  if (rows > length) {
    const torch::Tensor bonus_row = probs.narrow(0, length, 1);
    const torch::Tensor bonus = greedy ? bonus_row.argmax(1) : DrawRows(bonus_row, draw_uniform);
    next = torch::where(accepted.eq(length), bonus, next);
  }
  return torch::cat({accepted.view({1}), next});
}

}  // namespace mulo::engine
