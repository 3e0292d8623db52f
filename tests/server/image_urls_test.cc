// Image URLs (`response_format: "url"`) with API keys on, as clients fetch them: the openai
// SDKs' users and Open WebUI send their key, LibreChat's DALL-E tool fetches with no header at
// all (tests/peers/client_payloads.json). A URL works without a key only while the key that
// made it is valid, never with a wrong key, not after its time, and not at all without a key
// under --image_url_needs_key.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/grpc_calls.h"
#include "tests/server/metrics/http_client.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using server::metrics::testing::HttpOptions;
using server::metrics::testing::HttpRequest;

// The paths (/v1/images/files/<id>.png) of `n` images made with `key`.
std::vector<std::string> MakeImages(int port, const std::string& key, int n) {
  HttpOptions options;
  options.body = Json{{"model", "tiny"}, {"prompt", "a red fox"}, {"n", n},
                      {"response_format", "url"}}.dump();
  options.headers = {"Authorization: Bearer " + key};
  options.timeout_seconds = 60;
  auto response = HttpRequest(port, "POST", "/v1/images/generations", options);
  std::vector<std::string> paths;
  if (!response.ok() || response->status != 200) {
    ADD_FAILURE() << (response.ok() ? response->body : response.status().ToString());
    return paths;
  }
  const Json answer = Json::parse(response->body, nullptr, false);
  EXPECT_TRUE(answer.contains("data")) << response->body.substr(0, 300);
  for (const Json& item : answer.value("data", Json::array())) {
    const std::string url = item.value("url", "");
    const size_t at = url.find("/v1/images/files/");
    EXPECT_NE(at, std::string::npos) << url;
    if (at != std::string::npos) paths.push_back(url.substr(at));
  }
  EXPECT_EQ(paths.size(), static_cast<size_t>(n));
  return paths;
}

// The status of GET `path` with `authorization` ("" sends no Authorization header).
int Fetch(int port, const std::string& path, const std::string& authorization,
          std::string* content_type = nullptr) {
  HttpOptions options;
  if (!authorization.empty()) options.headers = {"Authorization: " + authorization};
  auto response = HttpRequest(port, "GET", path, options);
  if (!response.ok()) return -1;
  if (content_type != nullptr) *content_type = response->headers["content-type"];
  if (response->status == 200) EXPECT_EQ(response->body.substr(1, 3), "PNG") << path;
  return response->status;
}

TEST(ImageUrlsTest, AUrlIsASignedLinkWhileItsKeyIsValidAndUntilItsTime) {
  const std::string keys = WriteTestFile("url_keys", "sk-one\n");
  std::vector<std::string> flags = kRepository;
  flags.push_back("--api_keys_file=" + keys);
  flags.push_back("--image_url_ttl=8s");
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  const std::vector<std::string> paths = MakeImages(port, "sk-one", 2);
  // The server keeps each image from before its answer: its time is up by made + TTL.
  const auto made = Clock::now();
  ASSERT_EQ(paths.size(), 2u);
  std::string content_type;
  for (const std::string& path : paths) {
    EXPECT_EQ(Fetch(port, path, "Bearer sk-one", &content_type), 200) << path;
    EXPECT_EQ(content_type, "image/png");
    EXPECT_EQ(Fetch(port, path, ""), 200) << "no key: the URL is the credential";
    EXPECT_EQ(Fetch(port, path, "Bearer sk-wrong"), 401) << "a wrong key is refused";
  }
  EXPECT_EQ(Fetch(port, "/v1/images/files/0123456789abcdef0123456789abcdef.png", ""), 404);

  // sk-one revoked, sk-two added: the URLs sk-one made need a key from now on.
  WriteTestFile("url_keys", "sk-two\n");
  (*server)->Signal(SIGHUP);
  bool revoked = false;
  for (int i = 0; i < 50 && !revoked; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    revoked = Fetch(port, paths[0], "") == 401;
  }
  EXPECT_TRUE(revoked);
  EXPECT_EQ(Fetch(port, paths[1], ""), 401);
  EXPECT_EQ(Fetch(port, paths[1], "Bearer sk-one"), 401);
  EXPECT_EQ(Fetch(port, paths[1], "Bearer sk-two"), 200);
  const std::vector<std::string> fresh = MakeImages(port, "sk-two", 1);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(Fetch(port, fresh[0], ""), 200);

  // Past --image_url_ttl from when they were made: gone, for a valid key too.
  std::this_thread::sleep_until(made + std::chrono::milliseconds(8500));
  EXPECT_EQ(Fetch(port, paths[1], "Bearer sk-two"), 404);
}

TEST(ImageUrlsTest, NeedsKeyMakesEveryFetchShowAKey) {
  std::vector<std::string> flags = kRepository;
  flags.push_back("--api_keys_file=" + WriteTestFile("strict_keys", "sk-one\n"));
  flags.push_back("--image_url_needs_key");
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  const std::vector<std::string> paths = MakeImages(port, "sk-one", 1);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(Fetch(port, paths[0], ""), 401);
  EXPECT_EQ(Fetch(port, paths[0], "bearer sk-one"), 200);
}

}  // namespace
}  // namespace mulo::testing
