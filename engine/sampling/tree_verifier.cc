#include "engine/sampling/tree_verifier.h"

#include <vector>

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

}  // namespace

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
  return GuardTorch("TreeVerifier", [&]() -> StatusOr<Verdict> {
    const auto p = input.p.to(torch::kCPU, torch::kFloat64);
    const auto q = drafts.q.defined() ? drafts.q.to(torch::kCPU, torch::kFloat64) : torch::Tensor();
    const auto children = ChildrenByRow(drafts.parents);
    Verdict verdict;
    int64_t row = length;  // the root
    while (true) {
      torch::Tensor target = p[row].clone();
      int64_t kept = -1;
      if (input.greedy) {
        const int64_t best = target.argmax().item<int64_t>();
        for (int64_t child : children[row]) {
          if (drafts.tokens[child] == best) {
            kept = child;
            break;
          }
        }
        if (kept < 0) {
          verdict.next_token = best;
          return verdict;
        }
      } else {
        for (int64_t child : children[row]) {
          const int64_t x = drafts.tokens[child];
          const double p_x = target[x].item<double>();
          const double q_x = q.defined() ? q[child][x].item<double>() : 1.0;
          if (rule_ ? rule_(p_x, q_x, *rngs.accept) : AcceptDraft(p_x, q_x, *rngs.accept)) {
            kept = child;
            break;
          }
          verdict.rejected.push_back(child);
          if (q.defined()) {
            target = ResidualDistribution(target, q[child]).to(torch::kFloat64);
          } else {
            target[x] = 0.0;  // max(p' - onehot(x), 0), renormalised
            const double rest = target.sum().item<double>();
            if (rest > 0) target /= rest;
          }
        }
        if (kept < 0) {
          verdict.next_token = SampleFromProbabilities(target, *rngs.draw);
          return verdict;
        }
      }
      verdict.accepted.push_back(kept);
      row = kept;
    }
  });
}

}  // namespace mulo::engine
