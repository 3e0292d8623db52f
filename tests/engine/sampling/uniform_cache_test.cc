// UniformCache hands out exactly the stream's numbers, wherever the stream stands.
#include "engine/sampling/uniform_cache.h"

#include <gtest/gtest.h>

#include "engine/core/op_count.h"
#include "engine/sampling/philox.h"
#include "engine/sampling/rng.h"

namespace mulo::engine {
namespace {

TEST(UniformCacheTest, PeekEqualsTheStreamsNextNumbersAcrossBlocks) {
  Rng rng(77, RngStream::kDrafter);
  UniformCache cache(&rng, torch::kCPU);
  at::manual_seed(3);
  int64_t peeks = 0;
  while (rng.index() < 3 * UniformCache::kBlock) {
    const int64_t count = torch::randint(1, 40, {1}).item<int64_t>();
    const torch::Tensor got = cache.Peek(count);
    ASSERT_TRUE(got.equal(StreamUniforms(rng, count, torch::kCPU))) << "at " << rng.index();
    // The first number is the one the host stream draws next.
    Rng copy = rng;
    EXPECT_EQ(got[0].item<double>(), copy.Uniform());
    rng.Skip(torch::randint(0, count + 1, {1}).item<int64_t>());
    ++peeks;
  }
  EXPECT_GT(peeks, 100);
}

TEST(UniformCacheTest, ABlockIsMadeOnceForManySmallPeeks) {
  Rng rng(5, RngStream::kAcceptance);
  UniformCache cache(&rng, torch::kCPU);
  cache.Peek(1);  // makes the first block
  OpCounts counts;
  {
    OpCounting counting;
    const OpCounts before = ThreadOpCounts();
    for (int i = 0; i < 100; ++i) {
      cache.Peek(4);
      rng.Skip(4);
    }
    const OpCounts after = ThreadOpCounts();
    counts.kernels = after.kernels - before.kernels;
  }
  // 100 slices of one block: no kernel.
  EXPECT_EQ(counts.kernels, 0);
  // A peek past the block makes a new one there.
  rng.Skip(UniformCache::kBlock);
  EXPECT_TRUE(cache.Peek(3).equal(StreamUniforms(rng, 3, torch::kCPU)));
}

// A block is the host generator's numbers uploaded at once: a handful of operators, where the
// generator's tensor ops (StreamUniforms) dispatch hundreds for the same numbers.
TEST(UniformCacheTest, ABlockCostsAFewOperatorsNotTheGeneratorsTensorOps) {
  Rng rng(11, RngStream::kTarget);
  UniformCache cache(&rng, torch::kCPU);
  OpCounting counting;
  const OpCounts before = ThreadOpCounts();
  const torch::Tensor block = cache.Take(256);
  const OpCounts middle = ThreadOpCounts();
  Rng reference(11, RngStream::kTarget);
  const torch::Tensor expected = StreamUniforms(reference, 256, torch::kCPU);
  const OpCounts after = ThreadOpCounts();
  EXPECT_TRUE(block.equal(expected));
  EXPECT_EQ(rng.index(), 256u);
  EXPECT_LE(middle.dispatched - before.dispatched, 5);  // measured: 4
  EXPECT_GT(after.dispatched - middle.dispatched, 100) << "the control: tensor-op Philox";
}

}  // namespace
}  // namespace mulo::engine
