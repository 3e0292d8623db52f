// The operator counter: nothing is counted outside a scope or on another thread; inside one,
// each ATen call counts as dispatched, and kernels are the calls with a kernel of their own
// that are not views and run inside no other kernel (an add is one kernel, a view none, a
// linear layer with bias one addmm, not the bias copy addmm makes on the CPU); nested scopes
// count once; a graph replay counts one replay and none of the operators run inside it.
#include "engine/core/op_count.h"

#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>
#include <thread>
#include <vector>

namespace mulo::engine {
namespace {

OpCounts Since(const OpCounts& before) {
  const OpCounts now = ThreadOpCounts();
  return {now.dispatched - before.dispatched, now.kernels - before.kernels,
          now.graph_replays - before.graph_replays};
}

TEST(OpCountTest, NothingIsCountedOutsideAScope) {
  const torch::Tensor a = torch::ones({4, 4});
  const OpCounts before = ThreadOpCounts();
  torch::Tensor b = a + a;
  b = b.mm(a);
  EXPECT_EQ(Since(before).dispatched, 0);
  EXPECT_EQ(Since(before).kernels, 0);
}

TEST(OpCountTest, KernelsAreCallsWithAKernelOfTheirOwnOutsideOtherKernels) {
  at::NoGradGuard no_grad;
  const torch::Tensor a = torch::ones({4, 4});
  const torch::Tensor w = torch::ones({3, 4});
  const torch::Tensor bias = torch::zeros({3});
  OpCounting counting;
  OpCounts before = ThreadOpCounts();
  torch::Tensor sum = a + a;
  EXPECT_EQ(Since(before).kernels, 1);
  EXPECT_GE(Since(before).dispatched, 1);

  before = ThreadOpCounts();
  torch::Tensor view = sum.view({16});
  EXPECT_EQ(Since(before).kernels, 0) << "a view launches nothing";
  EXPECT_GE(Since(before).dispatched, 1);

  std::vector<std::string> names;
  {
    OpCounting named(&names);
    before = ThreadOpCounts();
    torch::Tensor out = torch::linear(a, w, bias);
  }
  const OpCounts linear = Since(before);
  EXPECT_EQ(linear.kernels, static_cast<int64_t>(names.size()));
  EXPECT_EQ(names, (std::vector<std::string>{"aten::addmm"})) << "one addmm";
  EXPECT_GT(linear.dispatched, linear.kernels) << "linear and the transpose are dispatched too";
}

TEST(OpCountTest, NestedScopesCountOnceAndOtherThreadsNotAtAll) {
  const torch::Tensor a = torch::ones({8});
  OpCounting outer;
  OpCounts before = ThreadOpCounts();
  {
    OpCounting inner;
    torch::Tensor b = a * 2;
  }
  EXPECT_EQ(Since(before).kernels, 1);
  // The outer scope still counts after the inner one ends.
  before = ThreadOpCounts();
  torch::Tensor c = a - 1;
  EXPECT_EQ(Since(before).kernels, 1);
  // Work on another thread is that thread's.
  before = ThreadOpCounts();
  std::thread([&] { torch::Tensor d = a.exp(); }).join();
  EXPECT_EQ(Since(before).dispatched, 0);
}

TEST(OpCountTest, AGraphReplayIsOneReplayAndNoDispatchedOperators) {
  const torch::Tensor a = torch::ones({8});
  OpCounts before = ThreadOpCounts();
  { GraphReplay replay; }
  EXPECT_EQ(Since(before).graph_replays, 1) << "replays count without a counting scope too";
  OpCounting counting;
  before = ThreadOpCounts();
  torch::Tensor b = a * 2;  // dispatched by the host
  {
    GraphReplay replay;  // an emulated replay: what runs inside is the graph's
    torch::Tensor c = (b + 1).exp().sum();
    {
      GraphReplay nested;
      torch::Tensor d = c * 3;
    }
  }
  torch::Tensor e = b - 1;  // counting resumes after the replay
  const OpCounts counted = Since(before);
  EXPECT_EQ(counted.kernels, 2) << "the mul and the sub; nothing inside the replays";
  EXPECT_EQ(counted.graph_replays, 2);
}

TEST(OpCountTest, MetadataOnlyOperatorsAreNamed) {
  EXPECT_TRUE(IsMetadataOnlyOp("aten::view"));
  EXPECT_TRUE(IsMetadataOnlyOp("aten::empty"));
  EXPECT_FALSE(IsMetadataOnlyOp("aten::add"));
  EXPECT_FALSE(IsMetadataOnlyOp("aten::copy_"));
}

}  // namespace
}  // namespace mulo::engine
