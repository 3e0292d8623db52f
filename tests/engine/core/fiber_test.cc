// Fibers as the engine loop uses them: interleaved on one thread, each counting its own host
// reads and operators, torch running inside them, an escaping exception contained.
#include "engine/core/fiber.h"

#include <gtest/gtest.h>
#include <torch/types.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/core/op_count.h"

namespace mulo::engine {
namespace {

std::unique_ptr<Fiber> MakeOrDie(std::function<void()> body) {
  std::string error;
  std::unique_ptr<Fiber> fiber = Fiber::Make(std::move(body), &error);
  EXPECT_NE(fiber, nullptr) << error;
  return fiber;
}

TEST(FiberTest, FibersInterleaveAtTheirYields) {
  std::vector<std::string> log;
  auto a = MakeOrDie([&] {
    log.push_back("a1");
    Fiber::Yield();
    log.push_back("a2");
  });
  auto b = MakeOrDie([&] {
    log.push_back("b1");
    Fiber::Yield();
    log.push_back("b2");
    Fiber::Yield();
    log.push_back("b3");
  });
  EXPECT_EQ(Fiber::Current(), nullptr);
  while (!a->finished() || !b->finished()) {
    if (!a->finished()) a->Resume();
    if (!b->finished()) b->Resume();
  }
  EXPECT_EQ(log, (std::vector<std::string>{"a1", "b1", "a2", "b2", "b3"}));
  EXPECT_EQ(Fiber::Current(), nullptr);
  Fiber::Yield();  // outside any fiber: nothing
}

TEST(FiberTest, EachFiberCountsItsOwnHostReadsAndOperators) {
  const int64_t thread_reads = HostReadCount();
  OpCounting counting;
  const OpCounts thread_ops = ThreadOpCounts();
  const torch::Tensor x = torch::ones({4});
  auto reader = MakeOrDie([&] {
    for (int i = 0; i < 3; ++i) {
      HostRead(x);
      Fiber::Yield();
    }
  });
  auto adder = MakeOrDie([&] {
    for (int i = 0; i < 5; ++i) {
      torch::Tensor y = x + x;
      Fiber::Yield();
    }
  });
  while (!reader->finished() || !adder->finished()) {
    reader->Resume();
    adder->Resume();
    torch::Tensor z = x * 2;  // the thread's own
  }
  EXPECT_EQ(reader->counters().host_reads, 3);
  EXPECT_EQ(adder->counters().host_reads, 0);
  EXPECT_EQ(HostReadCount(), thread_reads) << "the fibers' reads are not the thread's";
  EXPECT_GE(adder->counters().ops_kernels, 5);
  EXPECT_GT(ThreadOpCounts().kernels, thread_ops.kernels);
}

TEST(FiberTest, AnEscapingExceptionEndsOnlyItsFiber) {
  auto thrower = MakeOrDie([] { throw std::runtime_error("escaped"); });
  thrower->Resume();
  EXPECT_TRUE(thrower->finished());
  // Deep frames and torch work on a fiber's own stack.
  std::function<int(int)> depth = [&](int n) { return n == 0 ? 0 : 1 + depth(n - 1); };
  int reached = 0;
  torch::Tensor sum;
  auto deep = MakeOrDie([&] {
    reached = depth(20000);
    sum = torch::randn({64, 64}).matmul(torch::randn({64, 64})).sum();
  });
  deep->Resume();
  EXPECT_TRUE(deep->finished());
  EXPECT_EQ(reached, 20000);
  EXPECT_TRUE(sum.defined());
}

}  // namespace
}  // namespace mulo::engine
