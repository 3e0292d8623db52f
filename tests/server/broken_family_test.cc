// A repository with a broken family (issue 59, part 5): the server serves the others, logs the
// failure with its reason and the folder without a family.json it skipped, and answers requests
// for the broken family with UNAVAILABLE (HTTP 503) naming why; --require_all_families makes the
// failure fatal. ListModels says what `auto` runs on a family without a calibration table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/server/grpc_calls.h"
#include "tests/server/metrics/http_client.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using server::metrics::testing::HttpOptions;
using server::metrics::testing::HttpRequest;

// tiny (a link to tests/data/repository/tiny), broken (its family.json names a missing
// target) and half (a folder a failed conversion left, no family.json).
std::string MakeRepository() {
  const std::string root = TestTempDir() + "/broken_repository";
  fs::remove_all(root);
  fs::create_directories(root + "/broken");
  fs::create_directories(root + "/half/target");
  fs::create_directory_symlink(fs::absolute("tests/data/repository/tiny"), root + "/tiny");
  std::ofstream(root + "/broken/family.json")
      << R"({"name": "broken", "components": {"target": "nowhere", "vq": "vq"}})";
  return root;
}

TEST(BrokenFamilyTest, TheOthersAreServedAndTheBrokenOneSaysWhy) {
  const std::string root = MakeRepository();
  auto server = ServerProcess::Start({"--model_repository=" + root});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string log = (*server)->Log();
  EXPECT_NE(log.find("family broken not loaded"), std::string::npos) << log;
  EXPECT_NE(log.find("nowhere"), std::string::npos) << log;
  EXPECT_NE(log.find("skipped " + root + "/half: no family.json"), std::string::npos) << log;

  auto stub = (*server)->NewStub();
  v1::GenerateRequest request = ValidRequest();
  request.set_model("broken");
  const StreamResult broken = RunStream(*stub, request);
  EXPECT_EQ(broken.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(broken.status.error_message().find("did not load"), std::string::npos)
      << broken.status.error_message();
  EXPECT_EQ(RunStream(*stub, ValidRequest()).status.error_code(), grpc::StatusCode::OK);

  HttpOptions options;
  options.body = Json{{"model", "broken"}, {"prompt", kPrompt}}.dump();
  auto http = HttpRequest((*server)->http_port(), "POST", "/v1/images/generations", options);
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->status, 503) << http->body;
  EXPECT_NE(http->body.find("nowhere"), std::string::npos) << http->body;

  // The listing holds the family that loaded, with what auto runs there and why.
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub->ListModels(&context, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  EXPECT_EQ(models.models(0).name(), "tiny");
  EXPECT_NE(models.models(0).auto_method().find("has no cpu calibration"), std::string::npos)
      << models.models(0).auto_method();
  auto listed = HttpRequest((*server)->http_port(), "GET", "/v1/models");
  ASSERT_TRUE(listed.ok());
  EXPECT_NE(Json::parse(listed->body)["data"][0]["mulo"]["auto_method"].get<std::string>().find(
                "ran ar"),
            std::string::npos);
  // And a request for auto says it in its own response.
  options.body = Json{{"model", "tiny"}, {"prompt", kPrompt}, {"method", "auto"}}.dump();
  auto ran = HttpRequest((*server)->http_port(), "POST", "/v1/images/generations", options);
  ASSERT_TRUE(ran.ok());
  ASSERT_EQ(ran->status, 200) << ran->body;
  const Json stats = Json::parse(ran->body)["mulo"]["images"][0];
  EXPECT_EQ(stats.value("method", ""), "ar");
  EXPECT_NE(stats.value("method_choice", "").find("has no cpu calibration"), std::string::npos)
      << stats.dump();
}

TEST(BrokenFamilyTest, RequireAllFamiliesMakesTheFailureFatal) {
  const std::string root = MakeRepository();
  auto server = ServerProcess::Start({"--model_repository=" + root, "--require_all_families"});
  EXPECT_FALSE(server.ok());
}

}  // namespace
}  // namespace mulo::testing
