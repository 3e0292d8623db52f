#include "engine/sampling/chain_rejection.h"

#include <algorithm>

#include "engine/core/device_upload.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

namespace {

// u q < p, always when p >= q (float64 masses).
torch::Tensor Keeps(const torch::Tensor& p, const torch::Tensor& q, const torch::Tensor& u) {
  return p.ge(q).logical_or(u.mul(q).lt(p));
}

// t padded with zeros after its last row to `rows` rows (t itself when it has them).
torch::Tensor PadRows(const torch::Tensor& t, int64_t rows) {
  const int64_t missing = rows - t.size(0);
  if (missing == 0) return t;
  std::vector<int64_t> pad(2 * t.dim(), 0);
  pad.back() = missing;  // the pad list runs from the last dimension to the first
  return torch::constant_pad_nd(t, pad, 0);
}

// [calls, rows, ...]: part(call) of every call, padded to `rows` rows.
template <typename Part>
torch::Tensor Stacked(const std::vector<ChainCall>& calls, int64_t rows, Part part) {
  if (calls.size() == 1) return PadRows(part(calls[0]), rows).unsqueeze(0);
  std::vector<torch::Tensor> parts;
  parts.reserve(calls.size());
  for (const ChainCall& call : calls) parts.push_back(PadRows(part(call), rows));
  return torch::stack(parts);
}

torch::Tensor OnDevice(const std::vector<int64_t>& values, const torch::Device& device) {
  return Upload(torch::tensor(values, torch::kInt64), device);
}

}  // namespace

torch::Tensor JudgeChains(const std::vector<ChainCall>& calls) {
  at::NoGradGuard no_grad;
  TORCH_CHECK(!calls.empty(), "JudgeChains: no calls");
  const int64_t count = static_cast<int64_t>(calls.size());
  const torch::Device device = calls[0].p.device();
  const int64_t vocab = calls[0].p.size(1);
  const auto long_options = torch::dtype(torch::kInt64).device(device);
  const auto real = torch::dtype(torch::kFloat64).device(device);
  std::vector<int64_t> lengths, has_bonus, greedy, pooled;
  for (const ChainCall& call : calls) {
    TORCH_CHECK(call.p.device() == device && call.p.size(1) == vocab,
                "JudgeChains: the calls differ in device or vocabulary");
    lengths.push_back(call.length());
    has_bonus.push_back(call.p.size(0) > call.length());
    greedy.push_back(call.greedy);
    pooled.push_back(call.pooled.has_value());
  }
  const int64_t width = *std::max_element(lengths.begin(), lengths.end());
  const auto all = [](const std::vector<int64_t>& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [x](int64_t y) { return y == x; });
  };
  // Ragged: the chains' lengths differ, so padded positions must be masked.
  const bool ragged = !all(lengths, width);
  const torch::Tensor length = ragged ? OnDevice(lengths, device) : torch::Tensor();
  const auto rows_at = [&](const torch::Tensor& t, const torch::Tensor& row) {  // t[c, row[c]]
    return t.gather(1, row.view({count, 1, 1}).expand({count, 1, vocab})).squeeze(1);
  };

  // Rows past a call's own are zeros; the rule's masses in double, on the float32 values the
  // host verifier reads.
  const torch::Tensor probs =
      Stacked(calls, width + 1, [](const ChainCall& c) { return c.p.to(torch::kFloat32); });
  const torch::Tensor draw_numbers =
      Stacked(calls, 1, [&](const ChainCall& c) {
        return c.draw_uniform.defined() ? c.draw_uniform.to(real) : torch::zeros({1}, real);
      }).view({count});
  torch::Tensor accepted = torch::zeros({count}, long_options);
  torch::Tensor next = torch::full({count}, -1, long_options);
  torch::Tensor relaxed = torch::zeros({count}, long_options);
  torch::Tensor relaxed_at = torch::zeros({count, width}, long_options);
  torch::Tensor neighbors = torch::zeros({count}, long_options);
  if (width > 0) {
    const torch::Tensor drafts =
        Stacked(calls, width, [](const ChainCall& c) { return c.q.to(torch::kFloat32); });
    const torch::Tensor ids =
        Stacked(calls, width, [&](const ChainCall& c) { return c.tokens.to(long_options); })
            .unsqueeze(2);
    const torch::Tensor u =
        Stacked(calls, width, [&](const ChainCall& c) { return c.accept_uniforms.to(real); });
    const torch::Tensor p_x =
        probs.narrow(1, 0, width).gather(2, ids).squeeze(2).to(torch::kFloat64);
    const torch::Tensor q_x = drafts.gather(2, ids).squeeze(2).to(torch::kFloat64);
    const torch::Tensor own = Keeps(p_x, q_x, u);
    torch::Tensor keep = own;
    const bool any_pooled = !all(pooled, 0);
    torch::Tensor pooled_neighbors;
    if (any_pooled) {
      // A field of every call's pooled masses; zeros for calls judged by their own.
      const auto pooled_field = [&](torch::Tensor PooledMasses::*field,
                                    const torch::TensorOptions& options) {
        return Stacked(calls, width, [&](const ChainCall& c) {
          return c.pooled ? ((*c.pooled).*field).to(options) : torch::zeros({0}, options);
        });
      };
      const torch::Tensor judged_by_pool = Keeps(pooled_field(&PooledMasses::p, real),
                                                 pooled_field(&PooledMasses::q, real), u);
      pooled_neighbors = pooled_field(&PooledMasses::neighbors, long_options);
      keep = all(pooled, 1) ? judged_by_pool
                            : torch::where(OnDevice(pooled, device).to(torch::kBool).unsqueeze(1),
                                           judged_by_pool, own);
    }
    const torch::Tensor positions = torch::arange(width, long_options).unsqueeze(0);
    const torch::Tensor in_chain = ragged ? positions.lt(length.unsqueeze(1)) : torch::Tensor();
    if (ragged) keep = keep.logical_and(in_chain);
    const torch::Tensor kept = keep.to(torch::kInt64).cumprod(1);  // 1 for the kept prefix
    accepted = kept.sum(1);
    if (any_pooled) {
      // Calls judged by their own masses have keep == own: no relaxed accepts, no neighbours.
      relaxed_at = kept.mul(own.logical_not().to(torch::kInt64));
      relaxed = relaxed_at.sum(1);
      // Judged: the kept drafts and the first rejected one (all of them when none is).
      torch::Tensor judged = positions.le(accepted.unsqueeze(1));
      if (ragged) judged = judged.logical_and(in_chain);
      neighbors = pooled_neighbors.mul(judged.to(torch::kInt64)).sum(1);
    }
    // The residual at the first rejection (the last draft stands in when none is rejected;
    // its draw is then discarded).
    const torch::Tensor at = ragged ? torch::minimum(accepted, (length - 1).clamp_min(0))
                                    : accepted.clamp_max(width - 1);
    const torch::Tensor p_a = rows_at(probs, at);
    const torch::Tensor residual =
        (p_a.to(torch::kFloat64) - rows_at(drafts, at).to(torch::kFloat64)).clamp_min(0.0);
    const torch::Tensor total = residual.sum(1, /*keepdim=*/true);
    const torch::Tensor replacement =
        torch::where(total.gt(0.0), residual.div(total).to(torch::kFloat32), p_a);
    const torch::Tensor resampled = DrawRows(replacement, draw_numbers);
    next = torch::where(ragged ? accepted.lt(length) : accepted.lt(width), resampled, next);
  }
  if (!all(has_bonus, 0)) {
    const torch::Tensor bonus_row = ragged ? rows_at(probs, length) : probs.select(1, width);
    torch::Tensor bonus;
    if (all(greedy, 1)) {
      bonus = bonus_row.argmax(1);
    } else if (all(greedy, 0)) {
      bonus = DrawRows(bonus_row, draw_numbers);
    } else {
      bonus = torch::where(OnDevice(greedy, device).to(torch::kBool), bonus_row.argmax(1),
                           DrawRows(bonus_row, draw_numbers));
    }
    torch::Tensor whole = ragged ? accepted.eq(length) : accepted.eq(width);
    if (!all(has_bonus, 1)) whole = whole.logical_and(OnDevice(has_bonus, device).to(torch::kBool));
    next = torch::where(whole, bonus, next);
  }
  return torch::cat({torch::stack({accepted, next, relaxed, neighbors}, 1), relaxed_at}, 1);
}

}  // namespace mulo::engine
