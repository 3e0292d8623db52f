#include "engine/sampling/tree_rejection.h"

#include <string>

#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

torch::Tensor TreeAncestors(const torch::Tensor& parents, int64_t max_depth) {
  at::NoGradGuard no_grad;
  const int64_t length = parents.size(0);
  const auto reals = parents.options().dtype(torch::kFloat32);
  // Row i: i itself and its parent; after s squarings, every ancestor up to 2^s levels up (the
  // products count paths, at most the depth: exact in float32). A comparison, not an
  // accumulating index_put_: that one cannot be captured in a CUDA graph (pytorch#105439), and
  // the tree graphs (eagle_tree_graphs.h) run this.
  const torch::Tensor columns = torch::arange(length, parents.options());
  torch::Tensor reach =
      (columns.unsqueeze(0) == parents.unsqueeze(1))
          .logical_or(torch::eye(length, parents.options().dtype(torch::kBool)))
          .to(reals);
  for (int64_t levels = 1; levels < max_depth - 1; levels *= 2) {
    reach = reach.mm(reach).clamp_max(1.0);
  }
  return reach.gt(0.0);
}

namespace {

// p' for every draft at its try under a static tree's rules, float64 [L]: the host walk's
// residual chain, norm(max(p' - q_s, 0)) after each earlier sibling s (rounded to float32 at
// every link, as HostResidualDistribution returns it; p' itself when nothing is left), for
// every parent at once, sibling rank by sibling rank. Also the residual after every live child
// of each row, [L + 1, V] float64: what the walk draws from when it stops there. `live`
// undefined: every draft is.
struct StaticChain {
  torch::Tensor at_try, after_children;
};
StaticChain ResidualChain(const torch::Tensor& p, const torch::Tensor& q,
                          const torch::Tensor& parent_row, const torch::Tensor& rank,
                          const torch::Tensor& live, const torch::Tensor& tokens,
                          int64_t widest) {
  const int64_t length = tokens.size(0), vocab = p.size(1);
  const auto longs = tokens.options();
  // child_at[row, r]: the live draft of rank r under `row`, or `length` (a row of zeros in q).
  const int64_t cells = (length + 1) * widest;
  const torch::Tensor child_at =
      torch::full({cells + 1}, length, longs)
          .scatter_(0,
                    live.defined() ? torch::where(live, parent_row * widest + rank, cells)
                                   : parent_row * widest + rank,
                    torch::arange(length, longs))
          .narrow(0, 0, cells)
          .view({length + 1, widest});
  const torch::Tensor q_rows =
      torch::constant_pad_nd(q.to(torch::kFloat64), {0, 0, 0, 1}, 0.0);  // [L + 1, V]
  const torch::Tensor where_tried = parent_row * vocab + tokens;
  torch::Tensor residual = p.to(torch::kFloat64);
  torch::Tensor at_try = torch::zeros({length}, residual.options());
  for (int64_t r = 0; r < widest; ++r) {
    at_try = torch::where(rank.eq(r), residual.view({-1}).index_select(0, where_tried), at_try);
    const torch::Tensor child = child_at.select(1, r);
    const torch::Tensor left = (residual - q_rows.index_select(0, child)).clamp_min(0.0);
    const torch::Tensor total = left.sum(1, /*keepdim=*/true);
    const torch::Tensor next =
        torch::where(total.gt(0.0), left / total, residual).to(torch::kFloat32).to(torch::kFloat64);
    residual = torch::where(child.lt(length).unsqueeze(1), next, residual);
  }
  return {at_try, residual};
}

}  // namespace

TreePath PathOfFirstKept(const torch::Tensor& first, const torch::Tensor& ancestors,
                         int64_t max_depth) {
  const int64_t length = first.size(0);
  const auto longs = ancestors.options().dtype(torch::kInt64);
  TreePath out;
  // On the path: the draft and each of its ancestors is its parent's first kept child.
  out.on_path = (ancestors & first.logical_not().unsqueeze(0)).any(1).logical_not();
  const torch::Tensor depths = ancestors.sum(1);
  const torch::Tensor along = out.on_path * depths;  // the path's drafts' depths, 0 elsewhere
  // The path's deepest node's row: the first largest of [root 0, drafts' depths on the path].
  out.row = torch::cat({torch::zeros({1}, longs), along}).argmax().view({1});
  // The path root first (a draft's place is its depth - 1), -1 after it; slot `max_depth`
  // takes the drafts off the path.
  out.path = torch::full({max_depth + 1}, -1, longs)
                 .scatter_(0, torch::where(out.on_path, depths - 1, max_depth),
                           torch::where(out.on_path, torch::arange(length, longs), -1))
                 .narrow(0, 0, max_depth);
  out.length = out.on_path.sum().view({1});
  return out;
}

torch::Tensor JudgeTree(const TreeCall& call) {
  at::NoGradGuard no_grad;
  const int64_t length = call.size(), vocab = call.p.size(1), depth = call.max_depth;
  TORCH_CHECK(call.p.dim() == 2 && call.p.size(0) == length + 1,
              "JudgeTree: p needs a row after the root and after every draft");
  TORCH_CHECK(!call.q.defined() || call.max_children >= 1,
              "JudgeTree: a static tree needs its widest node's child count");
  const auto longs = call.p.options().dtype(torch::kInt64);
  const torch::Tensor& parents = call.parents;
  const torch::Tensor& tokens = call.tokens;
  const torch::Tensor parent_row = parents + 1;  // the row of p each draft is judged under
  const torch::Tensor ancestors =
      call.ancestors.defined() ? call.ancestors : TreeAncestors(parents, depth);
  // A static tree's drafts whose draw found no mass are dropped with their subtrees, as the
  // host does before it walks: not tried, not counted among their parent's children.
  // Undefined: every draft is live (no operators spent on a mask of ones).
  const torch::Tensor live =
      call.valid.defined()
          ? (ancestors & call.valid.logical_not().unsqueeze(0)).any(1).logical_not()
          : torch::Tensor();
  const auto only_live = [&](const torch::Tensor& flags) {
    return live.defined() ? flags & live : flags;
  };
  // first[i]: the walk would keep draft i on reaching its parent, its first kept child.
  torch::Tensor first, tried_here;
  torch::Tensor after_children;  // static trees: each row's residual after its children
  if (call.greedy) {
    // The argmax after its parent (siblings are distinct tokens: at most one is).
    first = only_live(call.p.argmax(1).index_select(0, parent_row).eq(tokens));
  } else {
    // Earlier siblings: the same parent, earlier in draft order (the order they are tried).
    torch::Tensor earlier = parents.unsqueeze(1).eq(parents.unsqueeze(0)).tril(-1);
    if (live.defined()) earlier = earlier & live.unsqueeze(0);
    const torch::Tensor rank = earlier.sum(1);
    tried_here = rank + 1;  // the tries at a draft's level up to and with it
    // The walk reaches a draft after trying, at every level above, the path's node and its
    // earlier siblings: its number is the acceptance stream's (sum of tried_here over its
    // ancestors and itself) - 1.
    const torch::Tensor u =
        call.accept_uniforms.index_select(0, (ancestors * tried_here).sum(1) - 1);
    torch::Tensor kept;
    if (call.q.defined()) {
      // Drawn from q_i: kept when p' >= q_i(x) or u q_i(x) < p' (AcceptDraft).
      const StaticChain chain =
          ResidualChain(call.p, call.q, parent_row, rank, live, tokens, call.max_children);
      const torch::Tensor q_x = call.q.view({-1})
                                    .index_select(0, torch::arange(length, longs) * vocab + tokens)
                                    .to(torch::kFloat64);
      kept = chain.at_try.ge(q_x) | (u * q_x).lt(chain.at_try);
      after_children = chain.after_children;
    } else {
      // One-hot q: p' after the rejected siblings is the row renormalised without them (the
      // first child's is its own mass); kept when u < p'.
      const torch::Tensor mass =
          call.p.view({-1}).index_select(0, parent_row * vocab + tokens).to(torch::kFloat64);
      const torch::Tensor rest = call.p.sum(1, /*keepdim=*/false, torch::kFloat64)
                                     .index_select(0, parent_row) -
                                 earlier.to(torch::kFloat64).mv(mass);
      const torch::Tensor at_try =
          torch::where(rank.eq(0), mass, mass / rest.clamp_min(1e-300));
      kept = u.lt(at_try);
    }
    kept = only_live(kept);
    first = kept & (earlier & kept.unsqueeze(0)).any(1).logical_not();
  }
  const TreePath kept_path = PathOfFirstKept(first, ancestors, depth);
  const torch::Tensor& on_path = kept_path.on_path;
  const torch::Tensor& row = kept_path.row;
  const torch::Tensor& path = kept_path.path;
  const torch::Tensor& kept_length = kept_path.length;

  // The next token after the path: greedy the argmax; sampled a draw from the row without the
  // last node's children (all tried and rejected when it has any).
  torch::Tensor next, tries;
  const torch::Tensor last = call.p.index_select(0, row);  // [1, V]
  if (call.greedy) {
    next = last.argmax(1);
    tries = torch::zeros({1}, longs);
  } else if (after_children.defined()) {
    const torch::Tensor children = only_live(parent_row.eq(row));
    tries = ((tried_here * on_path).sum() + children.sum()).view({1});
    next = DrawRows(after_children.index_select(0, row).to(torch::kFloat32),
                    call.draw_uniform.view({1}));
  } else {
    const torch::Tensor children = parent_row.eq(row);
    tries = ((tried_here * on_path).sum() + children.sum()).view({1});
    const torch::Tensor rejected =
        torch::zeros({vocab}, longs)
            .scatter_reduce_(0, tokens, children.to(torch::kInt64), "amax")
            .gt(0)
            .unsqueeze(0);
    const torch::Tensor residual = last.to(torch::kFloat64).masked_fill(rejected, 0.0);
    const torch::Tensor total = residual.sum(1, /*keepdim=*/true);
    // A row left with no mass is uniform, as the host makes it; a leaf's row is drawn as it is.
    const torch::Tensor renormalised =
        torch::where(total.gt(0.0), residual / total, 1.0 / static_cast<double>(vocab));
    const torch::Tensor probs =
        torch::where(children.any(), renormalised.to(torch::kFloat32), last);
    next = DrawRows(probs, call.draw_uniform.view({1}));
  }
  return torch::cat({kept_length, tries, next.view({1}), path});
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
