// --kv_cache_memory in requests' worth of KV-cache slots per worker.
#include "server/kv_pool_sizing.h"

#include "gtest/gtest.h"

namespace mulo::server {
namespace {

TEST(KvPoolSizingTest, ZeroIsMaxBatchRequestsWorth) {
  auto requests = KvPoolRequests(0, 6, 3 << 20);
  ASSERT_TRUE(requests.ok());
  EXPECT_EQ(*requests, 6);
}

TEST(KvPoolSizingTest, AMemoryBudgetHoldsWholeRequestsUpToMaxBatch) {
  // 10 MiB at 3 MiB a request: 3 requests.
  EXPECT_EQ(*KvPoolRequests(10, 8, 3 << 20), 3);
  // More memory than max_batch requests could use: max_batch.
  EXPECT_EQ(*KvPoolRequests(1000, 8, 3 << 20), 8);
}

TEST(KvPoolSizingTest, TooLittleOrNegativeMemoryIsRefusedNamingTheFlag) {
  auto small = KvPoolRequests(2, 8, 3 << 20);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("--kv_cache_memory: 2 MiB"), absl::string_view::npos)
      << small.status();
  EXPECT_NE(small.status().message().find("one takes 3 MiB"), absl::string_view::npos)
      << small.status();
  auto negative = KvPoolRequests(-1, 8, 3 << 20);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("--kv_cache_memory: must be >= 0"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace mulo::server
