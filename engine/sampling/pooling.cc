#include "engine/sampling/pooling.h"


#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/core/device_upload.h"

namespace mulo::engine {
namespace {

// Per position: x's own probability [L] (float64), the cumulative target probability of its
// first k neighbours and the mask of the prefix that stays within the rule's bound ([L, m]).
struct Prefix {
  torch::Tensor own, cumulative, within;
};

Prefix PrefixWithinBound(const torch::Tensor& probs, const torch::Tensor& tokens,
                         const LatentNeighbors& neighbors, const PoolingRule& rule) {
  // float64 rows (a verifier's running residual) stay float64, so that a pooled mass of zero
  // is exactly zero; everything else is scored in float32.
  auto p = probs.scalar_type() == torch::kFloat64 ? probs : probs.to(torch::kFloat32);
  Prefix out;
  out.own = p.gather(1, Upload(tokens, p.device()).view({-1, 1})).squeeze(1).to(torch::kFloat64);
  const int64_t m = rule.kind == Pooling::kNone
                        ? 0
                        : std::clamp<int64_t>(rule.k, 0, neighbors.max_neighbors());
  if (m == 0) {
    out.cumulative = torch::zeros({p.size(0), 0}, p.options().dtype(torch::kFloat64));
    out.within = out.cumulative.to(torch::kBool);
    return out;
  }
  // The table where p is: a host copy of a verifier's rows reads nothing from the device.
  const torch::Tensor& table = neighbors.TableOn(p.device());
  auto ids = table.index_select(0, Upload(tokens, p.device())).narrow(1, 0, m);
  // Summed in float64 so that long prefixes of tiny probabilities do not drift.
  out.cumulative = p.gather(1, ids).to(torch::kFloat64).cumsum(1);
  auto bound = rule.kind == Pooling::kAdditive
                   ? torch::full_like(out.own, rule.delta)
                   : out.own * (rule.lambda - 1.0);
  out.within = out.cumulative <= bound.unsqueeze(1);
  return out;
}

// c_m per position: cumsum is non-decreasing, so the masked maximum is the longest valid
// prefix's sum (exactly 0 when no neighbour is pooled).
torch::Tensor BorrowedMass(const Prefix& prefix) {
  if (prefix.cumulative.size(1) == 0) return torch::zeros_like(prefix.own);
  return (prefix.cumulative * prefix.within.to(torch::kFloat64)).amax(1);
}

}  // namespace

const char* PoolingName(Pooling pooling) {
  switch (pooling) {
    case Pooling::kAdditive: return "additive";
    case Pooling::kMultiplicative: return "multiplicative";
    case Pooling::kNone: return "none";
  }
  return "unknown";
}

StatusOr<Pooling> ParsePooling(const std::string& name, const std::string& field) {
  for (Pooling p : {Pooling::kAdditive, Pooling::kMultiplicative, Pooling::kNone}) {
    if (name == PoolingName(p)) return p;
  }
  return InvalidArgumentError(field + ": \"" + name +
                              "\" is not additive, multiplicative or none");
}

Status PoolingRule::Validate(const std::string& prefix) const {
  if (k < 0) return InvalidArgumentError(prefix + ".k: must be >= 0");
  if (!(delta >= 0.0 && delta <= 1.0)) {
    return InvalidArgumentError(prefix + ".delta: must be in [0, 1]");
  }
  if (!(lambda >= 1.0) || !std::isfinite(lambda)) {
    return InvalidArgumentError(prefix + ".lambda: must be a finite number >= 1");
  }
  return OkStatus();
}

PooledProbabilities Pool(const torch::Tensor& probs, const torch::Tensor& tokens,
                         const LatentNeighbors& neighbors, const PoolingRule& rule) {
  at::NoGradGuard no_grad;
  Prefix prefix = PrefixWithinBound(probs, tokens, neighbors, rule);
  PooledProbabilities out;
  out.own = prefix.own.to(torch::kFloat32);
  out.pooled = prefix.cumulative.size(1) == 0
                   ? out.own
                   : (prefix.own + BorrowedMass(prefix)).to(torch::kFloat32);
  return out;
}

torch::Tensor PooledProbability(const torch::Tensor& probs, const torch::Tensor& tokens,
                                const LatentNeighbors& neighbors, const PoolingRule& rule) {
  return Pool(probs, tokens, neighbors, rule).pooled;
}

PooledSet PoolSet(const torch::Tensor& probs, const torch::Tensor& tokens,
                  const LatentNeighbors& neighbors, const PoolingRule& rule) {
  at::NoGradGuard no_grad;
  Prefix prefix = PrefixWithinBound(probs, tokens, neighbors, rule);
  return PooledSet{BorrowedMass(prefix), prefix.within.sum(1)};
}

torch::Tensor PooledNeighborCount(const torch::Tensor& probs, const torch::Tensor& tokens,
                                  const LatentNeighbors& neighbors, const PoolingRule& rule) {
  return PoolSet(probs, tokens, neighbors, rule).neighbors;
}

}  // namespace mulo::engine
