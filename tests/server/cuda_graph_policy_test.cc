#include "server/cuda_graph_policy.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

namespace mulo::server {
namespace {

TEST(CudaGraphPolicyTest, AutoReplaysGraphsOnOneCudaWorker) {
  const auto choice = ChooseCudaGraphs("auto", true, 1);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_TRUE(choice->enabled);
  EXPECT_EQ(choice->note, "");
}

TEST(CudaGraphPolicyTest, AutoAndOnReplayGraphsOnUpToThirtyTwoCudaWorkers) {
  for (const char* mode : {"auto", "on"}) {
    for (int workers : {2, 8, kMaxCudaGraphWorkers}) {
      const auto choice = ChooseCudaGraphs(mode, true, workers);
      ASSERT_TRUE(choice.ok()) << choice.status();
      EXPECT_TRUE(choice->enabled) << mode << " " << workers;
      EXPECT_EQ(choice->note, "") << mode << " " << workers;
    }
  }
}

TEST(CudaGraphPolicyTest, BeyondThePoolAutoIsEagerAndSaysWhyAndOnIsRefused) {
  const auto choice = ChooseCudaGraphs("auto", true, kMaxCudaGraphWorkers + 1);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_FALSE(choice->enabled);
  EXPECT_NE(choice->note.find("--workers=33"), std::string::npos) << choice->note;
  EXPECT_NE(choice->note.find("--max_batch"), std::string::npos) << choice->note;
  const auto on = ChooseCudaGraphs("on", true, kMaxCudaGraphWorkers + 1);
  ASSERT_FALSE(on.ok());
  EXPECT_EQ(on.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(on.status().message().find("--cuda_graphs=on"), std::string::npos);
  EXPECT_NE(on.status().message().find("--workers=33"), std::string::npos);
}

TEST(CudaGraphPolicyTest, OffOrNotCudaMeansEagerWithNothingToSay) {
  for (const auto& [mode, cuda, workers] :
       {std::tuple{"off", true, 1}, std::tuple{"off", true, 8}, std::tuple{"auto", false, 1},
        std::tuple{"on", false, 8}}) {
    const auto choice = ChooseCudaGraphs(mode, cuda, workers);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_FALSE(choice->enabled) << mode << cuda << workers;
    EXPECT_EQ(choice->note, "") << mode << cuda << workers;
  }
}

TEST(CudaGraphPolicyTest, AnUnknownModeNamesTheFlag) {
  const auto choice = ChooseCudaGraphs("true", true, 1);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(choice.status().message().find("--cuda_graphs"), std::string::npos);
}

}  // namespace
}  // namespace mulo::server
