// The store behind response_format url: what it keeps, for how long, within what memory.
#include "server/http/image_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

namespace mulo::server::http {
namespace {

TEST(ImageStoreTest, KeepsEachImageWithItsTypeAndOwnerUnderAnUnguessableId) {
  ImageStore store(std::chrono::seconds(60), 1 << 20);
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    const std::string id = store.Put("bytes" + std::to_string(i), "image/png", "Bearer k");
    EXPECT_EQ(id.size(), 32u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
  const auto image = store.Get(*ids.begin());
  ASSERT_TRUE(image.has_value());
  EXPECT_EQ(image->content_type, "image/png");
  EXPECT_EQ(image->owner, "Bearer k");
  EXPECT_FALSE(store.Get("0123456789abcdef0123456789abcdef").has_value());
  EXPECT_FALSE(store.Get("").has_value());
}

TEST(ImageStoreTest, AFullBudgetDropsTheOldestFirst) {
  ImageStore store(std::chrono::seconds(60), 100);
  const std::string first = store.Put(std::string(40, 'a'), "image/png");
  const std::string second = store.Put(std::string(40, 'b'), "image/png");
  const std::string third = store.Put(std::string(40, 'c'), "image/png");  // 120 > 100
  EXPECT_FALSE(store.Get(first).has_value());
  EXPECT_EQ(store.Get(second)->bytes, std::string(40, 'b'));
  EXPECT_EQ(store.Get(third)->bytes, std::string(40, 'c'));
  EXPECT_EQ(store.bytes(), 80u);
  EXPECT_EQ(store.count(), 2u);
  EXPECT_EQ(store.Put(std::string(101, 'd'), "image/png"), "") << "larger than the budget";
  EXPECT_EQ(store.count(), 2u);
}

TEST(ImageStoreTest, ImagesExpireAfterTheirTime) {
  ImageStore store(std::chrono::seconds(1), 1 << 20);
  const std::string id = store.Put("x", "image/png");
  EXPECT_TRUE(store.Get(id).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_FALSE(store.Get(id).has_value());
  EXPECT_EQ(store.count(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

}  // namespace
}  // namespace mulo::server::http
