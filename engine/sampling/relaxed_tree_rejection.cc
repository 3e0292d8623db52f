#include "engine/sampling/relaxed_tree_rejection.h"

#include <algorithm>
#include <string>

#include "engine/sampling/row_sampler.h"

namespace mulo::engine {
namespace {

// What pooling borrows for each draft x_i from `rows` [R, V] float64 at row `row_of` [L]
// (PoolSet on that row, as the host walk calls it): c_m (float64 [L], exactly 0 when nothing
// is pooled) and the neighbours pooled (int64 [L]).
struct Borrowing {
  torch::Tensor mass, count;
};
Borrowing Borrow(const torch::Tensor& rows, const torch::Tensor& row_of,
                 const torch::Tensor& tokens, const RelaxedTreeCall& call) {
  const int64_t vocab = rows.size(1);
  const int64_t m = std::clamp<int64_t>(call.k, 0, call.table.size(1));
  const torch::Tensor flat = rows.view({-1});
  const torch::Tensor base = row_of * vocab;
  if (m == 0) {
    return {torch::zeros({tokens.size(0)}, rows.options()),
            torch::zeros({tokens.size(0)}, tokens.options())};
  }
  const torch::Tensor own = flat.index_select(0, base + tokens);
  const torch::Tensor ids = call.table.index_select(0, tokens).narrow(1, 0, m);
  const torch::Tensor cumulative =
      flat.index_select(0, (base.unsqueeze(1) + ids).view({-1})).view({-1, m}).cumsum(1);
  const torch::Tensor bound =
      call.kind == Pooling::kAdditive ? call.bound.expand_as(own) : own * call.bound;
  const torch::Tensor within = cumulative <= bound.unsqueeze(1);
  return {(cumulative * within.to(torch::kFloat64)).amax(1), within.sum(1)};
}

// bool [R, V]: row r marks the first k + 1 neighbours of token x[r] where take[r] (what a
// rejection after pooling takes out; TreeVerifier's RejectedNeighbourhood).
torch::Tensor Neighbourhoods(const torch::Tensor& x, const torch::Tensor& take, int64_t vocab,
                             const RelaxedTreeCall& call) {
  const int64_t count = std::min<int64_t>(call.k + 1, call.table.size(1));
  const auto flags = x.options().dtype(torch::kBool);
  if (count <= 0) return torch::zeros({x.size(0), vocab}, flags);
  return torch::zeros({x.size(0), vocab}, flags)
             .scatter_(1, call.table.index_select(0, x).narrow(1, 0, count), true) &
         take.unsqueeze(1);
}

// flags bool [D] as one int64 [1] on their device: bit d set for flags[d] (the first
// kMaxMaskedPlaces places), made on the device so that a graph can capture it.
torch::Tensor PlacesMask(const torch::Tensor& flags) {
  const int64_t places = std::min<int64_t>(flags.size(0), kMaxMaskedPlaces);
  const auto longs = flags.options().dtype(torch::kInt64);
  if (places == 0) return torch::zeros({1}, longs);
  const torch::Tensor bits = torch::pow(2, torch::arange(places, longs));
  return (flags.narrow(0, 0, places).to(torch::kInt64) * bits).sum().view({1});
}

}  // namespace

torch::Tensor JudgeRelaxedTree(const RelaxedTreeCall& call) {
  at::NoGradGuard no_grad;
  const TreeCall& tree = call.tree;
  const int64_t length = tree.size(), vocab = tree.p.size(1), depth = tree.max_depth;
  TORCH_CHECK(tree.p.dim() == 2 && tree.p.size(0) == length + 1,
              "JudgeRelaxedTree: p needs a row after the root and after every draft");
  TORCH_CHECK(tree.max_children >= 1 || length == 0,
              "JudgeRelaxedTree: needs the widest node's child count");
  TORCH_CHECK(call.table.dim() == 2 && call.table.size(0) == vocab,
              "JudgeRelaxedTree: the neighbour table needs a row per token of p");
  const auto longs = tree.p.options().dtype(torch::kInt64);
  const auto reals = tree.p.options().dtype(torch::kFloat64);
  if (length == 0) {  // no drafts: the next token from the root's row, nothing pooled
    const torch::Tensor root = tree.p.narrow(0, 0, 1).to(torch::kFloat32);
    const torch::Tensor next =
        tree.greedy ? root.argmax(1) : DrawRows(root, tree.draw_uniform.view({1}));
    return torch::cat({torch::zeros({2}, longs), next.view({1}), torch::full({depth}, -1, longs),
                       torch::zeros({3}, longs)});
  }
  const torch::Tensor& parents = tree.parents;
  const torch::Tensor& tokens = tree.tokens;
  const torch::Tensor parent_row = parents + 1;
  const torch::Tensor ancestors =
      tree.ancestors.defined() ? tree.ancestors : TreeAncestors(parents, depth);
  const torch::Tensor live =
      tree.valid.defined()
          ? (ancestors & tree.valid.logical_not().unsqueeze(0)).any(1).logical_not()
          : torch::ones({length}, longs.dtype(torch::kBool));
  // Earlier live siblings: the same parent, earlier in draft order (the order they are tried).
  const torch::Tensor earlier =
      parents.unsqueeze(1).eq(parents.unsqueeze(0)).tril(-1) & live.unsqueeze(0);
  const torch::Tensor p = tree.p.to(torch::kFloat64);
  torch::Tensor kept, relaxed, next, tries, pooled_drafts, pooled_neighbors;
  if (tree.greedy) {
    // Kept: the argmax of the parent's row with p(x) raised by what pooling borrows there.
    const torch::Tensor best = p.argmax(1);
    const torch::Tensor plain = best.index_select(0, parent_row).eq(tokens);
    const Borrowing borrowed = Borrow(p, parent_row, tokens, call);
    const torch::Tensor own = p.view({-1}).index_select(0, parent_row * vocab + tokens);
    const torch::Tensor raised = p.index_select(0, parent_row)
                                     .scatter(1, tokens.unsqueeze(1),
                                              (own + borrowed.mass).unsqueeze(1));
    kept = (plain | raised.argmax(1).eq(tokens)) & live;
    relaxed = kept & plain.logical_not();
    const torch::Tensor pooled = plain.logical_not() & live;  // the host pools these alone
    pooled_drafts = pooled.sum().view({1});
    pooled_neighbors = (borrowed.count * pooled).sum().view({1});
    // The kept path below each kept draft: the deepest draft reached from it through kept
    // drafts only (a draft j is reached from i when no draft from i down to j is unkept).
    const torch::Tensor unkept_above =
        (ancestors & kept.logical_not().unsqueeze(0)).to(torch::kFloat32);  // [j, a]
    const torch::Tensor blocked = unkept_above.mm(ancestors.to(torch::kFloat32)).gt(0.0);
    const torch::Tensor reach = ancestors & blocked.logical_not();  // [j, i]
    const torch::Tensor depths = ancestors.sum(1);
    const torch::Tensor below = (reach * depths.unsqueeze(1)).amax(0) - depths + 1;  // [i]
    // From the root, the kept child with the longest path below (the first on ties), level by
    // level.
    torch::Tensor row = torch::zeros({1}, longs);
    std::vector<torch::Tensor> path;
    for (int64_t level = 0; level < depth; ++level) {
      const torch::Tensor candidate = kept & parent_row.eq(row);
      const torch::Tensor score = torch::where(candidate, below, -1);
      const torch::Tensor longest = score.max();
      const torch::Tensor choice =
          (candidate & below.eq(longest)).to(torch::kInt64).argmax().view({1});
      const torch::Tensor step = longest.gt(0).view({1});
      path.push_back(torch::where(step, choice, -1));
      row = torch::where(step, choice + 1, row);
    }
    const torch::Tensor path_drafts = depth > 0 ? torch::cat(path) : torch::zeros({0}, longs);
    const torch::Tensor on = path_drafts.ge(0);
    next = best.index_select(0, row);
    tries = torch::zeros({1}, longs);
    const torch::Tensor relaxed_places =
        PlacesMask(relaxed.index_select(0, path_drafts.clamp_min(0)) & on);
    return torch::cat({on.sum().view({1}), tries, next, path_drafts, relaxed_places, pooled_drafts,
                       pooled_neighbors});
  }
  // The residual chain, sibling rank by sibling rank for every row at once: each draft's p'
  // at its try and what pooling borrows there, then the row after that draft is rejected.
  const int64_t widest = std::max<int64_t>(tree.max_children, 1);
  const torch::Tensor rank = earlier.sum(1);
  const int64_t cells = (length + 1) * widest;
  const torch::Tensor child_at =
      torch::full({cells + 1}, length, longs)
          .scatter_(0, torch::where(live, parent_row * widest + rank, cells),
                    torch::arange(length, longs))
          .narrow(0, 0, cells)
          .view({length + 1, widest});
  const torch::Tensor padded_tokens = torch::constant_pad_nd(tokens, {0, 1}, 0);
  const bool drawn = tree.q.defined();
  const torch::Tensor q_rows =
      drawn ? torch::constant_pad_nd(tree.q.to(torch::kFloat64), {0, 0, 0, 1}, 0.0)
            : torch::Tensor();
  torch::Tensor residual = p;
  torch::Tensor at_try = torch::zeros({length}, reals);
  torch::Tensor mass = torch::zeros({length}, reals);
  torch::Tensor count = torch::zeros({length}, longs);
  for (int64_t r = 0; r < widest; ++r) {
    const torch::Tensor tried_now = rank.eq(r) & live;
    const torch::Tensor own = residual.view({-1}).index_select(0, parent_row * vocab + tokens);
    const Borrowing borrowed = Borrow(residual, parent_row, tokens, call);
    at_try = torch::where(tried_now, own, at_try);
    mass = torch::where(tried_now, borrowed.mass, mass);
    count = torch::where(tried_now, borrowed.count, count);
    // Each row's rank-r child rejected: x (and, when pooling borrowed, its neighbourhood) out.
    const torch::Tensor child = child_at.select(1, r);
    const torch::Tensor x = padded_tokens.index_select(0, child);
    const torch::Tensor pooled_here =
        torch::constant_pad_nd(mass, {0, 1}, 0.0).index_select(0, child).gt(0.0);
    const torch::Tensor neighbourhood = Neighbourhoods(x, pooled_here, vocab, call);
    torch::Tensor after;
    if (drawn) {  // norm(max(p' - q_x, 0)), q_x without the neighbourhood, in float32
      const torch::Tensor taken = q_rows.index_select(0, child).masked_fill(neighbourhood, 0.0);
      const torch::Tensor left = (residual - taken).clamp_min(0.0);
      const torch::Tensor total = left.sum(1, /*keepdim=*/true);
      after = torch::where(total.gt(0.0), left / total, residual)
                  .to(torch::kFloat32)
                  .to(torch::kFloat64);
    } else {  // p' without x and the neighbourhood, renormalised (uniform when nothing is left)
      const torch::Tensor out = neighbourhood.scatter(1, x.unsqueeze(1), true);
      const torch::Tensor left = residual.masked_fill(out, 0.0);
      const torch::Tensor total = left.sum(1, /*keepdim=*/true);
      after = torch::where(total.gt(0.0), left / total, 1.0 / static_cast<double>(vocab));
    }
    residual = torch::where(child.lt(length).unsqueeze(1), after, residual);
  }
  // Each draft's tests: exact (u1) and, when that rejects, the relaxation's second chance (u2).
  const torch::Tensor q_x =
      drawn ? tree.q.view({-1})
                  .index_select(0, torch::arange(length, longs) * vocab + tokens)
                  .to(torch::kFloat64)
            : torch::ones({length}, reals);
  const torch::Tensor a = (at_try / q_x).clamp_max(1.0);
  const torch::Tensor b = ((at_try + mass) / q_x).clamp_max(1.0);
  const torch::Tensor second_open = mass.gt(0.0) & b.gt(a) & a.lt(1.0);
  // A rejected draft used 1 number, 2 when its second chance was open; an accepted one 1, or 2
  // when the second chance kept it. Each draft's first number: its parent's first plus the
  // parent's, then its earlier siblings' (all rejected), level by level from the root.
  const torch::Tensor cost_rejected = 1 + second_open.to(torch::kInt64);
  const torch::Tensor before_siblings =
      earlier.to(torch::kFloat64).mv(cost_rejected.to(torch::kFloat64)).to(torch::kInt64);
  const torch::Tensor& numbers = tree.accept_uniforms;
  const int64_t last_number = numbers.size(0) - 1;
  const torch::Tensor safe_parent = parents.clamp_min(0);
  torch::Tensor first_number = torch::zeros({length}, longs);
  torch::Tensor used = torch::ones({length}, longs);
  torch::Tensor exact;
  for (int64_t level = 0; level < std::max<int64_t>(depth, 1); ++level) {
    const torch::Tensor start =
        torch::where(parents.lt(0), 0, (first_number + used).index_select(0, safe_parent));
    first_number = start + before_siblings;
    const torch::Tensor u1 = numbers.index_select(0, first_number.clamp_max(last_number));
    exact = at_try.ge(q_x) | (u1 * q_x).lt(at_try);
    used = 1 + (exact.logical_not() & second_open).to(torch::kInt64);
  }
  const torch::Tensor u2 = numbers.index_select(0, (first_number + 1).clamp_max(last_number));
  const torch::Tensor second =
      exact.logical_not() & second_open & (u2 * (1.0 - a)).lt(b - a);
  kept = (exact | second) & live;
  const torch::Tensor first = kept & (earlier & kept.unsqueeze(0)).any(1).logical_not();
  const TreePath kept_path = PathOfFirstKept(first, ancestors, depth);
  // The numbers used: up to the last row's children (all tried and rejected) and with them.
  const torch::Tensor ends = torch::cat({torch::zeros({1}, longs), first_number + used});
  const torch::Tensor children = live & parent_row.eq(kept_path.row);
  tries = (ends.index_select(0, kept_path.row) + (cost_rejected * children).sum()).view({1});
  next = DrawRows(residual.index_select(0, kept_path.row).to(torch::kFloat32),
                  tree.draw_uniform.view({1}));
  // Tried: under the root or a kept draft on the path, with no earlier sibling kept.
  const torch::Tensor reached = torch::cat({torch::ones({1}, longs.dtype(torch::kBool)),
                                            kept_path.on_path});
  const torch::Tensor tried = live & reached.index_select(0, parent_row) &
                              (earlier & kept.unsqueeze(0)).any(1).logical_not();
  pooled_drafts = tried.sum().view({1});
  pooled_neighbors = (count * tried).sum().view({1});
  const torch::Tensor on = kept_path.path.ge(0);
  const torch::Tensor relaxed_places =
      PlacesMask(second.index_select(0, kept_path.path.clamp_min(0)) & on);
  return torch::cat({kept_path.length, tries, next.view({1}), kept_path.path, relaxed_places,
                     pooled_drafts, pooled_neighbors});
}

StatusOr<RelaxedTreeDecision> RelaxedTreeDecisionFromHost(const std::vector<int64_t>& values,
                                                          int64_t size, int64_t max_depth) {
  if (static_cast<int64_t>(values.size()) != 6 + max_depth) {
    return InvalidArgumentError("RelaxedTreeDecisionFromHost: " + std::to_string(values.size()) +
                                " values for a depth of " + std::to_string(max_depth) +
                                " (expected 6 + depth)");
  }
  RelaxedTreeDecision out;
  MULO_ASSIGN_OR_RETURN(
      out.decision,
      TreeDecisionFromHost({values.begin(), values.begin() + 3 + max_depth}, size, max_depth));
  const int64_t relaxed_places = values[3 + max_depth];
  for (int64_t place = 0; place < static_cast<int64_t>(out.decision.accepted.size()); ++place) {
    if (place < kMaxMaskedPlaces && ((relaxed_places >> place) & 1) != 0) {
      out.relaxed.push_back(out.decision.accepted[place]);
    }
  }
  out.pooled_drafts = values[4 + max_depth];
  out.pooled_neighbors = values[5 + max_depth];
  return out;
}

}  // namespace mulo::engine
