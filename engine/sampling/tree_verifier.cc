#include "engine/sampling/tree_verifier.h"

#include <algorithm>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative_acceptance.h"

namespace mulo::engine {
namespace {

// Children of every node in draft order; index L holds the root's.
std::vector<std::vector<int64_t>> ChildrenByRow(const std::vector<int64_t>& parents) {
  const int64_t length = static_cast<int64_t>(parents.size());
  std::vector<std::vector<int64_t>> children(length + 1);
  for (int64_t i = 0; i < length; ++i) children[parents[i] < 0 ? length : parents[i]].push_back(i);
  return children;
}

// The relaxation's second chance after the exact test min(1, p/q) rejected: accepting with
// (b - a) / (1 - a) makes the overall probability b = min(1, p~/q).
bool RelaxedSecondChance(double p_x, double pooled_x, double q_x, Rng& rng) {
  const double a = std::min(1.0, p_x / q_x), b = std::min(1.0, pooled_x / q_x);
  if (b <= a || a >= 1.0) return false;
  return rng.Uniform() * (1.0 - a) < b - a;
}

// p' renormalised; a row with no mass left becomes uniform, as the reference does.
void Renormalise(torch::Tensor& target) {
  const double rest = target.sum().item<double>();
  if (rest > 0) {
    target /= rest;
  } else {
    target.fill_(1.0 / static_cast<double>(target.size(0)));
  }
}

}  // namespace

double TreeVerifier::Borrowed(const torch::Tensor& target, int64_t x, Verdict* verdict) const {
  if (!relaxation_.active()) return 0.0;
  const PooledSet set = PoolSet(target.unsqueeze(0), torch::tensor({x}, torch::kInt64),
                                *relaxation_.neighbors, relaxation_.rule);
  ++verdict->pooled_drafts;
  verdict->pooled_neighbors += set.neighbors.item<int64_t>();
  return set.borrowed.item<double>();
}

torch::Tensor TreeVerifier::RejectedNeighbourhood(int64_t x) const {
  const LatentNeighbors& n = *relaxation_.neighbors;
  const int64_t count = std::min(relaxation_.rule.k + 1, n.max_neighbors());
  return n.host_table()[x].narrow(0, 0, count);
}

StatusOr<Verdict> TreeVerifier::Verify(const VerifyInput& input, const VerifierRngs& rngs) const {
  const DraftBatch& drafts = input.drafts;
  const int64_t length = drafts.size();
  if (static_cast<int64_t>(drafts.parents.size()) != length) {
    return InvalidArgumentError("TreeVerifier: one parent per draft");
  }
  for (int64_t i = 0; i < length; ++i) {
    if (drafts.parents[i] < -1 || drafts.parents[i] >= i) {
      return InvalidArgumentError("TreeVerifier: parents must come before their children");
    }
  }
  if (!input.p.defined() || input.p.dim() != 2 || input.p.size(0) != length + 1) {
    return InvalidArgumentError("TreeVerifier: needs p after every draft and after the root");
  }
  if (drafts.q.defined() && drafts.q.size(0) != length) {
    return InvalidArgumentError("TreeVerifier: q, when given, needs a row per draft");
  }
  if (relaxation_.active() && (relaxation_.neighbors == nullptr ||
                               relaxation_.neighbors->codebook_size() != input.p.size(1))) {
    return InvalidArgumentError(
        "TreeVerifier: a relaxation needs the latent neighbour table of the p's vocabulary");
  }
  return GuardTorch("TreeVerifier", [&]() -> StatusOr<Verdict> {
    const auto children = ChildrenByRow(drafts.parents);
    if (input.greedy || !drafts.q.defined()) {
      MULO_ASSIGN_OR_RETURN(torch::Tensor p,
                            HostReadWith(rngs.reader, input.p, torch::kFloat64));
      if (input.greedy) return Greedy(p, drafts, children);
      return Sampled(p, torch::Tensor(), drafts, children, rngs);
    }
    // p and q in one read: the rows of p, then q's.
    MULO_ASSIGN_OR_RETURN(
        const torch::Tensor both,
        HostReadWith(rngs.reader,
                     torch::cat({input.p.to(torch::kFloat64), drafts.q.to(torch::kFloat64)}),
                     torch::kFloat64));
    const int64_t p_rows = input.p.size(0);
    return Sampled(both.narrow(0, 0, p_rows), both.narrow(0, p_rows, length), drafts, children,
                   rngs);
  });
}

Verdict TreeVerifier::Greedy(const torch::Tensor& p, const DraftBatch& drafts,
                             const std::vector<std::vector<int64_t>>& children) const {
  const int64_t length = drafts.size();
  Verdict verdict;
  // kept[i]: draft i is the argmax after its parent (with p(x) raised to p~(x) when relaxed);
  // relaxed[i]: kept only thanks to the relaxation.
  std::vector<bool> kept(length, false), relaxed(length, false);
  const torch::Tensor best_rows = p.argmax(1);  // the argmax after every node and the root
  const auto best = best_rows.accessor<int64_t, 1>();
  for (int64_t i = 0; i < length; ++i) {
    const int64_t row = drafts.parents[i] < 0 ? length : drafts.parents[i];
    const int64_t x = drafts.tokens[i];
    kept[i] = x == best[row];
    if (!kept[i] && relaxation_.active()) {
      torch::Tensor raised = p[row].clone();
      raised[x] += Borrowed(p[row], x, &verdict);
      kept[i] = relaxed[i] = raised.argmax().item<int64_t>() == x;
    }
  }
  // The longest kept path below every node: children come after their parents, so drafts
  // from the last, then the root (row L).
  std::vector<int64_t> kept_depth(length + 1, 0);
  auto settle = [&](int64_t row) {
    for (int64_t child : children[row]) {
      if (kept[child]) kept_depth[row] = std::max(kept_depth[row], 1 + kept_depth[child]);
    }
  };
  for (int64_t i = length - 1; i >= 0; --i) {
    if (kept[i]) settle(i);
  }
  settle(length);
  int64_t row = length;  // the root
  while (kept_depth[row] > 0) {
    int64_t next = -1;
    for (int64_t child : children[row]) {
      if (kept[child] && 1 + kept_depth[child] == kept_depth[row]) {
        next = child;
        break;
      }
    }
    verdict.accepted.push_back(next);
    if (relaxed[next]) verdict.relaxed.push_back(next);
    row = next;
  }
  verdict.next_token = best[row];
  return verdict;
}

Verdict TreeVerifier::Sampled(const torch::Tensor& p, const torch::Tensor& q,
                              const DraftBatch& drafts,
                              const std::vector<std::vector<int64_t>>& children,
                              const VerifierRngs& rngs) const {
  Verdict verdict;
  Walk(drafts.size(), p, q, drafts, children, rngs, &verdict);
  // keep_longest_path also kept siblings off the path it chose: only the path's drafts count.
  const auto off_path = [&](int64_t node) {
    return std::find(verdict.accepted.begin(), verdict.accepted.end(), node) ==
           verdict.accepted.end();
  };
  verdict.relaxed.erase(std::remove_if(verdict.relaxed.begin(), verdict.relaxed.end(), off_path),
                        verdict.relaxed.end());
  return verdict;
}

void TreeVerifier::Walk(int64_t row, const torch::Tensor& p, const torch::Tensor& q,
                        const DraftBatch& drafts,
                        const std::vector<std::vector<int64_t>>& children,
                        const VerifierRngs& rngs, Verdict* verdict) const {
  while (true) {
    torch::Tensor target = p[row].clone();
    std::vector<int64_t> kept;
    for (int64_t child : children[row]) {
      const int64_t x = drafts.tokens[child];
      const double p_x = target[x].item<double>();
      const double q_x = q.defined() ? q[child][x].item<double>() : 1.0;
      const double borrowed = Borrowed(target, x, verdict);
      bool accept = rule_ ? rule_(p_x, q_x, *rngs.accept) : AcceptDraft(p_x, q_x, *rngs.accept);
      if (!accept && borrowed > 0.0 &&
          RelaxedSecondChance(p_x, p_x + borrowed, q_x, *rngs.accept)) {
        accept = true;
        verdict->relaxed.push_back(child);
      }
      if (accept) {
        kept.push_back(child);
        if (!hooks_.keep_longest_path) break;
        continue;
      }
      verdict->rejected.push_back(child);
      if (hooks_.residual) {
        const torch::Tensor taken =
            q.defined() ? q[child]
                        : torch::zeros_like(target).index_fill(0, torch::tensor({x}), 1.0);
        target = hooks_.residual(target, taken).to(torch::kFloat64);
      } else if (q.defined()) {  // p' <- norm(max(p' - q_x, 0)), q_x without the neighbourhood
        torch::Tensor taken = q[child];
        if (borrowed > 0.0) taken = taken.index_fill(0, RejectedNeighbourhood(x), 0.0);
        target = HostResidualDistribution(target, taken).to(torch::kFloat64);
      } else {  // max(p' - onehot(x), 0), and the neighbourhood, renormalised
        target[x] = 0.0;
        if (borrowed > 0.0) target.index_fill_(0, RejectedNeighbourhood(x), 0.0);
        Renormalise(target);
      }
    }
    if (kept.empty()) {
      verdict->next_token = SampleFromHostProbabilities(target, *rngs.draw);
      return;
    }
    if (kept.size() > 1) {  // keep_longest_path: walk below every kept child, keep the longest
      Verdict best;
      for (int64_t child : kept) {
        Verdict below;
        below.accepted.push_back(child);
        Walk(child, p, q, drafts, children, rngs, &below);
        if (best.accepted.empty() || below.accepted.size() > best.accepted.size()) best = below;
      }
      verdict->accepted.insert(verdict->accepted.end(), best.accepted.begin(),
                               best.accepted.end());
      verdict->relaxed.insert(verdict->relaxed.end(), best.relaxed.begin(), best.relaxed.end());
      verdict->next_token = best.next_token;
      return;
    }
    verdict->accepted.push_back(kept[0]);
    row = kept[0];
  }
}

}  // namespace mulo::engine
