// The neighbour table's fast path (partial selection) against the definition: every row's
// other entries in stable ascending order of distance, ties by index.
#include "engine/sampling/latent_neighbors.h"

#include <gtest/gtest.h>
#include <torch/types.h>

#include <limits>

namespace mulo::engine {
namespace {

torch::Tensor Definition(const torch::Tensor& book, int64_t m) {
  auto d = torch::cdist(book.to(torch::kFloat64), book.to(torch::kFloat64));
  d.fill_diagonal_(std::numeric_limits<double>::infinity());
  return std::get<1>(d.sort(/*stable=*/true, 1, false)).narrow(1, 0, m);
}

TEST(LatentNeighborsTest, PartialSelectionEqualsTheFullStableSort) {
  at::manual_seed(5);
  auto book = torch::randn({2500, 8});  // three row blocks, the last one partial
  for (int64_t m : {1, 10, 1000}) {
    EXPECT_TRUE(torch::equal(LatentNeighbors::Build(book, m).table(), Definition(book, m)))
        << "m=" << m;
  }
}

TEST(LatentNeighborsTest, TiesAcrossTheCutKeepIndexOrder) {
  // 300 copies of one vector (dead codes of a trained codebook look like this) and random
  // others: each copy's nearest 100 are ties at distance 0 beyond the selection's margin, so
  // the result must come from the index order, for the copies and for the others.
  at::manual_seed(6);
  auto book = torch::randn({1200, 4});
  book.narrow(0, 200, 300).copy_(book[0].expand({300, 4}));
  for (int64_t m : {100, 400}) {
    auto table = LatentNeighbors::Build(book, m).table();
    EXPECT_TRUE(torch::equal(table, Definition(book, m))) << "m=" << m;
  }
  auto table = LatentNeighbors::Build(book, 100).table();
  EXPECT_EQ(table[200][0].item<int64_t>(), 0);    // the copy at 0 comes first
  EXPECT_EQ(table[200][1].item<int64_t>(), 201);  // then the other copies by index
}

TEST(LatentNeighborsTest, AllButSelfWhenAskedForMore) {
  auto book = torch::randn({50, 3});
  auto table = LatentNeighbors::Build(book, 1000).table();
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{50, 49}));
  EXPECT_TRUE(torch::equal(table, Definition(book, 49)));
}

}  // namespace
}  // namespace mulo::engine
