#include "server/batch_policy.h"

#include "gtest/gtest.h"

namespace mulo::server {
namespace {

TEST(BatchPolicyTest, ACommaListBatchesExactlyItsMethods) {
  auto policy = BatchPolicy::Parse(" ar, mulo ");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_TRUE(policy->Batches("ar"));
  EXPECT_TRUE(policy->Batches("mulo"));
  EXPECT_FALSE(policy->Batches("speculative"));
  EXPECT_FALSE(policy->Batches("lantern++"));
  EXPECT_EQ(policy->ToString(), "ar,mulo");  // registry order
}

TEST(BatchPolicyTest, AllAndNone) {
  auto all = BatchPolicy::Parse("all");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->Batches("speculative"));
  EXPECT_TRUE(BatchPolicy::All().Batches("zipar"));
  EXPECT_EQ(all->ToString(), "all");
  auto none = BatchPolicy::Parse("none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->Batches("ar"));
  EXPECT_EQ(none->ToString(), "none");
}

TEST(BatchPolicyTest, AnUnknownNameIsRefusedNamingTheFlagAndTheName) {
  for (const char* text : {"ar,warp", "", "ar,,mulo", "AR"}) {
    auto policy = BatchPolicy::Parse(text);
    ASSERT_FALSE(policy.ok()) << text;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(policy.status().message().find("--batch_methods: unknown method"), std::string::npos)
        << policy.status();
  }
  EXPECT_NE(BatchPolicy::Parse("ar,warp").status().message().find("\"warp\""), std::string::npos);
}

}  // namespace
}  // namespace mulo::server
