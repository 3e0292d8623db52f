#include "engine/sampling/latent_neighbors.h"

#include <algorithm>

namespace mulo::engine {

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

}  // namespace mulo::engine
