#include "engine/sampling/chain_rejection.h"

#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

namespace {

// u q < p, always when p >= q (float64 masses).
torch::Tensor Keeps(const torch::Tensor& p, const torch::Tensor& q, const torch::Tensor& u) {
  return p.ge(q).logical_or(u.mul(q).lt(p));
}

// Both entry points; `pooled` null judges x_i by its own masses and returns int64 [2].
torch::Tensor Verify(const torch::Tensor& p, const torch::Tensor& q, const torch::Tensor& tokens,
                     const torch::Tensor& accept_uniforms, const torch::Tensor& draw_uniform,
                     bool greedy, const PooledMasses* pooled) {
  torch::NoGradGuard no_grad;
  const int64_t length = q.size(0), rows = p.size(0);
  const auto long_options = torch::dtype(torch::kInt64).device(p.device());
  const torch::Tensor probs = p.to(torch::kFloat32);
  torch::Tensor accepted = torch::zeros({}, long_options);
  torch::Tensor next = torch::full({1}, -1, long_options);
  torch::Tensor relaxed, neighbors;  // the pooled rule's counts
  if (pooled != nullptr) {
    relaxed = torch::zeros({1}, long_options);
    neighbors = torch::zeros({1}, long_options);
  }
  if (length > 0) {
    // The rule in double, on the float32 values the host verifier reads.
    const torch::Tensor drafts = q.to(torch::kFloat32);
    const torch::Tensor ids = tokens.to(long_options).view({length, 1});
    const torch::Tensor p_x =
        probs.narrow(0, 0, length).gather(1, ids).squeeze(1).to(torch::kFloat64);
    const torch::Tensor q_x = drafts.gather(1, ids).squeeze(1).to(torch::kFloat64);
    const torch::Tensor own = Keeps(p_x, q_x, accept_uniforms);
    const torch::Tensor keep =
        pooled != nullptr ? Keeps(pooled->p, pooled->q, accept_uniforms) : own;
    const torch::Tensor kept = keep.to(torch::kInt64).cumprod(0);  // 1 for the kept prefix
    accepted = kept.sum();
    if (pooled != nullptr) {
      relaxed = kept.mul(own.logical_not().to(torch::kInt64)).sum().view({1});
      // Judged: the kept drafts and the first rejected one (all of them when none is).
      const torch::Tensor judged =
          torch::arange(length, long_options).le(accepted).to(torch::kInt64);
      neighbors = pooled->neighbors.mul(judged).sum().view({1});
    }
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
  if (pooled == nullptr) return torch::cat({accepted.view({1}), next});
  return torch::cat({accepted.view({1}), next, relaxed, neighbors});
}

}  // namespace

torch::Tensor VerifyChain(const torch::Tensor& p, const torch::Tensor& q,
                          const torch::Tensor& tokens, const torch::Tensor& accept_uniforms,
                          const torch::Tensor& draw_uniform, bool greedy) {
  return Verify(p, q, tokens, accept_uniforms, draw_uniform, greedy, nullptr);
}

torch::Tensor VerifyPooledChain(const torch::Tensor& p, const torch::Tensor& q,
                                const torch::Tensor& tokens, const torch::Tensor& accept_uniforms,
                                const torch::Tensor& draw_uniform, bool greedy,
                                const PooledMasses& pooled) {
  return Verify(p, q, tokens, accept_uniforms, draw_uniform, greedy, &pooled);
}

}  // namespace mulo::engine
