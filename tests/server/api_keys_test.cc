#include "server/api_keys.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace mulo::server {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ApiKeysTest, NoFileAllowsEveryCall) {
  ApiKeys keys;
  EXPECT_FALSE(keys.enabled());
  EXPECT_TRUE(keys.Authorize("").ok());
  EXPECT_TRUE(keys.Authorize("Bearer anything").ok());
}

TEST(ApiKeysTest, OnlyBearerKeysOfTheFileAreAllowed) {
  auto keys = ApiKeys::Load(WriteFile("keys", "# team a\nsk-alpha\n\n  sk-beta  \n"));
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE((*keys)->Authorize("Bearer sk-alpha").ok());
  EXPECT_TRUE((*keys)->Authorize("Bearer sk-beta").ok());  // trimmed
  for (const char* bad : {"", "sk-alpha", "Bearer", "Bearer ", "Bearer sk-alph",
                          "Bearer sk-alphaa", "bearer sk-alpha", "Bearer # team a"}) {
    const absl::Status status = (*keys)->Authorize(bad);
    EXPECT_TRUE(absl::IsUnauthenticated(status)) << bad;
    EXPECT_EQ(status.message().rfind("authorization: ", 0), 0u) << status.message();
    EXPECT_EQ(status.message().find("sk-"), std::string::npos) << "a key in: " << status.message();
  }
}

TEST(ApiKeysTest, ReloadReplacesTheKeysAndABadFileKeepsThem) {
  const std::string path = WriteFile("reload", "old-key\n");
  auto keys = ApiKeys::Load(path);
  ASSERT_TRUE(keys.ok());
  WriteFile("reload", "new-key\n");
  EXPECT_EQ(*(*keys)->Reload(), 1);
  EXPECT_FALSE((*keys)->Authorize("Bearer old-key").ok());
  EXPECT_TRUE((*keys)->Authorize("Bearer new-key").ok());
  WriteFile("reload", "# nothing\n");
  EXPECT_FALSE((*keys)->Reload().ok());
  EXPECT_TRUE((*keys)->Authorize("Bearer new-key").ok());
}

TEST(ApiKeysTest, AMissingOrEmptyFileIsAnError) {
  EXPECT_FALSE(ApiKeys::Load("/nonexistent/keys").ok());
  EXPECT_FALSE(ApiKeys::Load(WriteFile("empty", "\n# only a comment\n")).ok());
}

TEST(ApiKeysTest, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0", 2), "a"));
}

}  // namespace
}  // namespace mulo::server
