#include "server/api_keys.h"

#include <cstdio>

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
  // The scheme is case-insensitive (RFC 9110, 11.1); spaces after it are one separator.
  for (const char* good : {"bearer sk-alpha", "BEARER sk-alpha", "Bearer   sk-alpha"}) {
    EXPECT_TRUE((*keys)->Authorize(good).ok()) << good;
  }
  for (const char* bad : {"", "sk-alpha", "Bearer", "Bearer ", "Bearer sk-alph",
                          "Bearer sk-alphaa", "Basic sk-alpha", "Bearersk-alpha",
                          "Bearer # team a"}) {
    const absl::Status status = (*keys)->Authorize(bad);
    EXPECT_TRUE(absl::IsUnauthenticated(status)) << bad;
    EXPECT_EQ(status.message().rfind("authorization: ", 0), 0u) << status.message();
    EXPECT_EQ(status.message().find("sk-"), std::string::npos) << "a key in: " << status.message();
  }
}

TEST(ApiKeysTest, ReloadReplacesTheKeysAnUnreadableFileKeepsThemAnEmptyOneRevokesAll) {
  const std::string path = WriteFile("reload", "old-key\n");
  auto keys = ApiKeys::Load(path);
  ASSERT_TRUE(keys.ok());
  WriteFile("reload", "new-key\n");
  EXPECT_EQ(*(*keys)->Reload(), 1);
  EXPECT_FALSE((*keys)->Authorize("Bearer old-key").ok());
  EXPECT_TRUE((*keys)->Authorize("Bearer new-key").ok());
  // A file that cannot be read (being rewritten, permissions) keeps the keys in force.
  ASSERT_EQ(std::rename(path.c_str(), (path + ".moved").c_str()), 0);
  EXPECT_FALSE((*keys)->Reload().ok());
  EXPECT_TRUE((*keys)->Authorize("Bearer new-key").ok());
  ASSERT_EQ(std::rename((path + ".moved").c_str(), path.c_str()), 0);
  // A file read with no key revokes every key: the way to lock every client out.
  WriteFile("reload", "# nothing\n");
  EXPECT_EQ(*(*keys)->Reload(), 0);
  EXPECT_FALSE((*keys)->Authorize("Bearer new-key").ok());
  EXPECT_FALSE((*keys)->Authorize("Bearer old-key").ok());
  EXPECT_TRUE((*keys)->enabled());  // keys stay required, none is known
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
