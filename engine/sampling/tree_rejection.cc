#include "engine/sampling/tree_rejection.h"

#include <string>

#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

torch::Tensor JudgeTree(const TreeCall& call) {
  torch::NoGradGuard no_grad;
  const int64_t length = call.size(), vocab = call.p.size(1), depth = call.max_depth;
  TORCH_CHECK(call.p.dim() == 2 && call.p.size(0) == length + 1,
              "JudgeTree: p needs a row after the root and after every draft");
  const auto longs = call.p.options().dtype(torch::kInt64);
  // The host verifier reads p as double; so are the masses here.
  const torch::Tensor p = call.p.to(torch::kFloat64);
  const torch::Tensor parents = call.parents.to(longs);
  const torch::Tensor tokens = call.tokens.to(longs);
  const torch::Tensor parent_row = parents + 1;  // the row each draft is judged under
  const torch::Tensor nodes = torch::arange(length, longs);
  torch::Tensor ancestors = call.ancestors;
  if (!ancestors.defined()) {  // a node's ancestors are its parent's and itself
    const torch::Tensor own = torch::eye(length, longs.dtype(torch::kBool));
    const torch::Tensor has_parent = parents.ge(0).unsqueeze(1);
    const torch::Tensor parent = parents.clamp_min(0);
    ancestors = own;
    for (int64_t level = 1; level < depth; ++level) {
      ancestors = own.logical_or(ancestors.index_select(0, parent) & has_parent);
    }
  }
  // Earlier siblings: the same parent, earlier in draft order (the order children are tried).
  const torch::Tensor earlier = parents.unsqueeze(1).eq(parents.unsqueeze(0)) &
                                nodes.unsqueeze(1).gt(nodes.unsqueeze(0));
  const torch::Tensor rank = earlier.sum(1);
  torch::Tensor kept_here;  // bool [L]: the draft would be kept were the walk to reach it
  if (call.greedy) {
    // The argmax after its parent; siblings are distinct tokens, so at most one is.
    kept_here = p.argmax(1).index_select(0, parent_row).eq(tokens);
  } else {
    // The walk reaches a draft after trying, at every level above, the path's node and its
    // earlier siblings, and at its own level its earlier siblings: its number is the
    // acceptance stream's (sum over its ancestors and itself of rank + 1) - 1.
    const torch::Tensor tried_through = (ancestors.to(torch::kInt64) * (rank + 1)).sum(1);
    const torch::Tensor u =
        call.accept_uniforms.to(p.options()).index_select(0, (tried_through - 1).clamp(0, length - 1));
    const torch::Tensor mass = p.flatten().index_select(0, parent_row * vocab + tokens);
    const torch::Tensor rest =
        p.sum(1).index_select(0, parent_row) - earlier.to(torch::kFloat64).mv(mass);
    // After a rejection the host renormalises what is left; a row left with nothing is uniform.
    const torch::Tensor at_try = torch::where(
        rank.eq(0), mass,
        torch::where(rest.gt(0.0), mass / rest.clamp_min(1e-300),
                     torch::full_like(mass, 1.0 / static_cast<double>(vocab))));
    kept_here = at_try.ge(1.0) | u.lt(at_try);
  }
  // The walk keeps the first kept child at every level: a draft is on the path when it and
  // each of its ancestors is kept and no earlier sibling is.
  const torch::Tensor first =
      kept_here & (earlier & kept_here.unsqueeze(0)).any(1).logical_not();
  const torch::Tensor on_path = (ancestors & first.logical_not().unsqueeze(0)).any(1).logical_not();
  const torch::Tensor depths = ancestors.sum(1);
  const torch::Tensor kept = on_path.sum().view({1});
  // The path's last node (the deepest; the root, row 0, when none is kept) and its children,
  // all tried and rejected when it has any.
  const torch::Tensor row =
      length > 0 ? torch::where(kept.gt(0), (on_path * depths).argmax().view({1}) + 1,
                                torch::zeros({1}, longs))
                 : torch::zeros({1}, longs);
  const torch::Tensor rejected_children = parent_row.eq(row);
  // The path root first (a node's place is its depth - 1), -1 after it; slot `depth` takes
  // the drafts off the path.
  const torch::Tensor path =
      torch::full({depth + 1}, -1, longs)
          .scatter_(0, torch::where(on_path, depths - 1, torch::full_like(depths, depth)),
                    torch::where(on_path, nodes, torch::full_like(nodes, -1)))
          .narrow(0, 0, depth);

  // The next token after the kept path: greedy the argmax; sampled a draw from the row with the
  // rejected children taken out.
  torch::Tensor next, tries;
  const torch::Tensor last = p.index_select(0, row);  // [1, V]
  if (call.greedy) {
    next = last.argmax(1);
    tries = torch::zeros({1}, longs);
  } else {
    tries = ((rank + 1) * on_path).sum().view({1}) + rejected_children.sum().view({1});
    const torch::Tensor rejected =
        torch::zeros({vocab}, longs)
            .scatter_reduce(0, tokens, rejected_children.to(torch::kInt64), "amax")
            .gt(0)
            .unsqueeze(0);
    const torch::Tensor residual = last.masked_fill(rejected, 0.0);
    const torch::Tensor total = residual.sum(1, /*keepdim=*/true);
    const torch::Tensor renormalised =
        torch::where(total.gt(0.0), residual / total.clamp_min(1e-300),
                     torch::full_like(residual, 1.0 / static_cast<double>(vocab)));
    // A leaf's row is drawn as it is, as the host draws it.
    const torch::Tensor probs =
        torch::where(rejected.any(), renormalised, last).to(torch::kFloat32);
    next = DrawRows(probs, call.draw_uniform.to(p.options()).view({1}));
  }
  return torch::cat({kept, tries, next.view({1}), path});
}

StatusOr<TreeDecision> TreeDecisionFromHost(const std::vector<int64_t>& values, int64_t size,
                                            int64_t max_depth) {
  if (static_cast<int64_t>(values.size()) != 3 + max_depth) {
    return InvalidArgumentError("TreeDecisionFromHost: " + std::to_string(values.size()) +
                                " values for a depth of " + std::to_string(max_depth) +
                                " (expected 3 + depth)");
  }
  const int64_t kept = values[0];
  if (kept < 0 || kept > max_depth) {
    return InvalidArgumentError("TreeDecisionFromHost: a kept path of " + std::to_string(kept));
  }
  TreeDecision decision;
  decision.tries = values[1];
  decision.next_token = values[2];
  for (int64_t i = 0; i < kept; ++i) {
    const int64_t node = values[3 + i];
    if (node < 0 || node >= size) {
      return InvalidArgumentError("TreeDecisionFromHost: kept draft " + std::to_string(node) +
                                  " of " + std::to_string(size));
    }
    decision.accepted.push_back(node);
  }
  return decision;
}

}  // namespace mulo::engine
