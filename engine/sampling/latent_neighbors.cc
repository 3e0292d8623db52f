#include "engine/sampling/latent_neighbors.h"

#include <algorithm>

namespace mulo::engine {
namespace {

// Per position: the cumulative target probability of the first k-1 neighbours and the mask
// of the prefix that stays within delta. Shapes [L, m].
std::pair<torch::Tensor, torch::Tensor> PrefixWithinDelta(const torch::Tensor& probs,
                                                          const torch::Tensor& tokens,
                                                          const LatentNeighbors& neighbors,
                                                          int64_t k, double delta) {
  const int64_t m = std::clamp<int64_t>(k - 1, 0, neighbors.max_neighbors());
  auto p = probs.to(torch::kFloat32);
  if (m == 0) {
    auto empty = torch::zeros({p.size(0), 0}, p.options());
    return {empty, empty.to(torch::kBool)};
  }
  auto ids = neighbors.table().index_select(0, tokens.to(neighbors.table().device()))
                 .narrow(1, 0, m)
                 .to(p.device());
  // Summed in float64 so that long prefixes of tiny probabilities do not drift.
  auto cumulative = p.gather(1, ids).to(torch::kFloat64).cumsum(1);
  return {cumulative, cumulative <= delta};
}

}  // namespace

LatentNeighbors LatentNeighbors::Build(const torch::Tensor& codebook, int64_t max_neighbors) {
  torch::NoGradGuard no_grad;
  auto book = codebook.to(torch::kCPU, torch::kFloat64);
  const int64_t v = book.size(0);
  const int64_t m = std::clamp<int64_t>(max_neighbors, 0, v - 1);
  // Row blocks keep memory at block x V (a 16384-entry codebook would need 2 GiB at once).
  constexpr int64_t kBlock = 1024;
  std::vector<torch::Tensor> blocks;
  for (int64_t start = 0; start < v; start += kBlock) {
    const int64_t rows = std::min(kBlock, v - start);
    auto distances = torch::cdist(book.narrow(0, start, rows), book);  // [rows, V]
    // Exclude the entry itself; a stable sort breaks distance ties by index.
    distances.narrow(1, start, rows).fill_diagonal_(std::numeric_limits<double>::infinity());
    auto order = std::get<1>(distances.sort(/*stable=*/true, /*dim=*/1, /*descending=*/false));
    blocks.push_back(order.narrow(1, 0, m).to(torch::kInt64));
  }
  LatentNeighbors n;
  n.table_ = torch::cat(blocks).to(codebook.device()).contiguous();
  return n;
}

torch::Tensor PooledProbability(const torch::Tensor& probs, const torch::Tensor& tokens,
                                const LatentNeighbors& neighbors, int64_t k, double delta) {
  torch::NoGradGuard no_grad;
  auto p = probs.to(torch::kFloat32);
  auto own = p.gather(1, tokens.to(p.device()).view({-1, 1})).squeeze(1).to(torch::kFloat64);
  auto [cumulative, within] = PrefixWithinDelta(p, tokens, neighbors, k, delta);
  if (cumulative.size(1) == 0) return own.to(torch::kFloat32);
  // cumsum is non-decreasing, so the masked maximum is the longest valid prefix's sum.
  auto extra = (cumulative * within.to(torch::kFloat64)).amax(1);
  return (own + extra).to(torch::kFloat32);
}

torch::Tensor PooledNeighborCount(const torch::Tensor& probs, const torch::Tensor& tokens,
                                  const LatentNeighbors& neighbors, int64_t k, double delta) {
  torch::NoGradGuard no_grad;
  auto [cumulative, within] = PrefixWithinDelta(probs, tokens, neighbors, k, delta);
  return within.sum(1);
}

}  // namespace mulo::engine
