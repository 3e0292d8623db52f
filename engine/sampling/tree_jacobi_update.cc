#include "engine/sampling/tree_jacobi_update.h"

#include "engine/sampling/maximal_coupling.h"
#include "engine/sampling/without_replacement.h"

namespace mulo::engine {

TreeJacobiUpdate UpdateJacobiAfterTree(const TreeJacobiCall& call) {
  at::NoGradGuard no_grad;
  const int64_t window = call.carried.size(0), rows = window + 1;
  const auto longs = call.carried.options();
  const torch::Tensor kept = call.verdict.narrow(0, 0, 1);
  const torch::Tensor tries = call.verdict.narrow(0, 1, 1);
  const torch::Tensor bonus = call.bonus.ne(0);
  const torch::Tensor first = kept + (kept.lt(call.length) | bonus).to(torch::kInt64);
  const torch::Tensor steps = torch::arange(rows, longs);
  const torch::Tensor after_first = (steps - first).clamp_min(0);
  // Row i's numbers: the coupling's keep test the acceptance stream's tries + (i - first), the
  // draw the drafter stream's i - first.
  const torch::Tensor keep_numbers = call.accept_uniforms.index_select(
      0, (tries + after_first).clamp_max(call.accept_uniforms.size(0) - 1));
  const torch::Tensor draw_numbers = call.drafter_uniforms.index_select(0, after_first);
  const torch::Tensor x = torch::cat({call.carried, torch::zeros({1}, longs)});
  const torch::Tensor q = torch::cat({call.carried_q, call.p.narrow(0, window, 1)});
  const torch::Tensor coupled = steps.ge(first) & steps.lt(call.length);
  TreeJacobiUpdate update;
  update.redraws = CoupleRows(call.p, x, KeepProbabilities(call.p, q, x),
                              ResidualRows(call.p, q), keep_numbers, draw_numbers, coupled)
                       .tokens;
  // The next window's first levels: rows first + l (clamped: past the window they are junk).
  const torch::Tensor level_rows =
      (first + torch::arange(call.levels, longs)).clamp_max(window);
  const torch::Tensor level_p = call.p.index_select(0, level_rows);
  const torch::Tensor without_draft =
      level_p.scatter(1, update.redraws.index_select(0, level_rows).unsqueeze(1), 0.0f);
  const torch::Tensor redrawn = call.length + bonus.to(torch::kInt64) - first;
  const torch::Tensor sibling_numbers =
      call.drafter_uniforms
          .index_select(0, (redrawn.clamp_min(0) + torch::arange(call.levels * call.extras, longs))
                               .clamp_max(call.drafter_uniforms.size(0) - 1))
          .view({call.levels, call.extras});
  const SiblingDrawsOnDevice siblings =
      DrawSiblingsOnDevice(without_draft, call.extras, sibling_numbers, /*greedy=*/false);
  update.sibling_tokens = siblings.tokens;
  update.sibling_valid = siblings.valid;
  update.sibling_q = siblings.q;
  return update;
}

}  // namespace mulo::engine
