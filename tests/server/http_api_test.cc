// The OpenAI-compatible HTTP API of a mulo_server process, over plain sockets: images and
// their tokens (equal to gRPC's for the same request), the stream's events in order, errors
// naming their field with OpenAI's error object, and a client that disconnects cancelling its
// generation.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/server/grpc_calls.h"
#include "tests/server/metrics/http_client.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

using Json = nlohmann::json;
using server::metrics::testing::HttpOptions;
using server::metrics::testing::HttpRequest;
using server::metrics::testing::HttpResponse;

HttpResponse Post(const ServerProcess& server, const Json& body, bool http10 = false,
                  std::vector<std::string> headers = {}) {
  HttpOptions options;
  options.body = body.dump();
  options.http10 = http10;
  options.headers = std::move(headers);
  options.timeout_seconds = 60;
  auto response = HttpRequest(server.http_port(), "POST", "/v1/images/generations", options);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? *response : HttpResponse();
}

Json Body(const std::string& prompt = kPrompt) {
  return {{"model", "tiny"}, {"prompt", prompt}, {"seed", 5}};
}

cv::Mat DecodeB64(const std::string& b64) {
  std::string bytes;
  if (!absl::Base64Unescape(b64, &bytes)) return cv::Mat();
  return cv::imdecode(std::vector<uint8_t>(bytes.begin(), bytes.end()), cv::IMREAD_COLOR);
}

std::vector<uint32_t> Tokens(const Json& stats) {
  return stats["image_tokens"].get<std::vector<uint32_t>>();
}

// "event: T\ndata: J\n\n" blocks, in order.
std::vector<std::pair<std::string, Json>> Events(const std::string& body) {
  std::vector<std::pair<std::string, Json>> events;
  for (absl::string_view block : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    std::string type;
    Json data;
    for (absl::string_view line : absl::StrSplit(block, '\n')) {
      if (absl::ConsumePrefix(&line, "event: ")) type = std::string(line);
      if (absl::ConsumePrefix(&line, "data: ")) data = Json::parse(line);
    }
    events.emplace_back(type, data);
  }
  return events;
}

TEST(HttpApiTest, ModelsAreListedInOpenAisFormat) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  auto list = server::metrics::testing::HttpGet((*server)->http_port(), "/v1/models");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->status, 200);
  const Json json = Json::parse(list->body);
  EXPECT_EQ(json["object"], "list");
  ASSERT_EQ(json["data"].size(), 1u);
  EXPECT_EQ(json["data"][0]["id"], "tiny");
  EXPECT_EQ(json["data"][0]["object"], "model");
  EXPECT_EQ(json["data"][0]["mulo"]["grid_size"], 32);
  auto one = server::metrics::testing::HttpGet((*server)->http_port(), "/v1/models/tiny");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(Json::parse(one->body)["mulo"]["size"], json["data"][0]["mulo"]["size"]);
  auto missing = server::metrics::testing::HttpGet((*server)->http_port(), "/v1/models/nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Json::parse(missing->body)["error"]["param"], "model");
}

TEST(HttpApiTest, NImagesAreDecodablePngsWithGrpcsTokensForSeedPlusI) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  Json body = Body();
  body["n"] = 2;
  body["method"] = "speculative";
  body["commit_map"] = true;
  const HttpResponse response = Post(**server, body);
  ASSERT_EQ(response.status, 200) << response.body;
  const Json json = Json::parse(response.body);
  ASSERT_EQ(json["data"].size(), 2u);
  const std::string size = json["size"];
  auto stub = (*server)->NewStub();
  int64_t accepted = 0, steps = 0;
  for (int i = 0; i < 2; ++i) {
    // The acceptance map, asked for: a byte per token, its kept drafts (codes >= 2) the stats'.
    const Json& stats = json["mulo"]["images"][i];
    std::string map;
    ASSERT_TRUE(absl::Base64Unescape(stats["commit_map"].get<std::string>(), &map));
    ASSERT_EQ(map.size(), 32u * 32u);
    EXPECT_EQ(std::count_if(map.begin(), map.end(), [](char c) { return uint8_t(c) >= 2; }),
              stats["accepted_tokens"].get<int64_t>());
    accepted += stats["accepted_tokens"].get<int64_t>();
    steps += stats["iterations"].get<int64_t>();
  }
  for (int i = 0; i < 2; ++i) {
    const cv::Mat image = DecodeB64(json["data"][i]["b64_json"]);
    ASSERT_FALSE(image.empty());
    EXPECT_EQ(absl::StrCat(image.cols, "x", image.rows), size);
    v1::GenerateRequest request = ValidRequest(5 + i);
    request.mutable_speculative();
    const StreamResult grpc = RunStream(*stub, request);
    ASSERT_TRUE(grpc.status.ok()) << grpc.status.error_message();
    EXPECT_EQ(Tokens(json["mulo"]["images"][i]), ImageTokens(grpc)) << "image " << i;
    EXPECT_TRUE(grpc.image->stats().commit_map().empty()) << "gRPC did not ask for the map";
    accepted += grpc.image->stats().accepted_tokens();
    steps += grpc.image->stats().iterations();
  }
  // The live panel's figures: nothing running or queued, four speculative images whose mean
  // accepted length is their accepted drafts over their steps. A worker releases its job and
  // the service records it just after the client has read the end of its stream: wait for it.
  Json figures;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto live = server::metrics::testing::HttpGet((*server)->http_port(), "/v1/live");
    ASSERT_TRUE(live.ok());
    ASSERT_EQ(live->status, 200) << live->body;
    figures = Json::parse(live->body);
    if (figures["running"] == 0 && figures["methods"].size() == 1 &&
        figures["methods"][0]["images"] == 4) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(figures["running"], 0);
  EXPECT_EQ(figures["queued"], 0);
  EXPECT_GT(figures["images_per_second"].get<double>(), 0.0);
  ASSERT_EQ(figures["methods"].size(), 1u);
  EXPECT_EQ(figures["methods"][0]["method"], "speculative");
  EXPECT_EQ(figures["methods"][0]["images"], 4);
  ASSERT_GT(steps, 0);
  EXPECT_DOUBLE_EQ(figures["methods"][0]["mean_accepted_length"].get<double>(),
                   static_cast<double>(accepted) / steps);
  EXPECT_EQ(json["mulo"]["method"], "speculative");
  EXPECT_EQ(json["usage"]["output_tokens"], 2 * 32 * 32);
  EXPECT_EQ((*server)->MetricSum("mulo_requests_total", {"protocol=\"http\"", "code=\"OK\""}), 2);
  EXPECT_EQ((*server)->MetricSum("mulo_requests_total", {"protocol=\"grpc\"", "code=\"OK\""}), 2);
}

TEST(HttpApiTest, AStreamSendsItsPartialImagesThenTheCompletedImage) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  Json body = Body();
  body["stream"] = true;
  body["partial_images"] = 2;
  const HttpResponse response = Post(**server, body, /*http10=*/true);
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.headers.at("content-type"), "text/event-stream");
  const auto events = Events(response.body);
  ASSERT_EQ(events.size(), 3u) << response.body;  // ar commits row by row: every partial
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(events[i].first, "image_generation.partial_image");
    EXPECT_EQ(events[i].second["type"], "image_generation.partial_image");
    EXPECT_EQ(events[i].second["partial_image_index"], i);
    const cv::Mat partial = DecodeB64(events[i].second["b64_json"]);
    ASSERT_FALSE(partial.empty());
    // Full-size, as OpenAI's: the rows still to come are mid grey, the committed ones are not.
    EXPECT_EQ(absl::StrCat(partial.cols, "x", partial.rows), events[i].second["size"]);
    const cv::Vec3b bottom = partial.at<cv::Vec3b>(partial.rows - 1, partial.cols / 2);
    EXPECT_EQ(bottom, cv::Vec3b(128, 128, 128));
  }
  const Json& completed = events[2].second;
  EXPECT_EQ(events[2].first, "image_generation.completed");
  EXPECT_EQ(completed["usage"]["output_tokens"], 32 * 32);
  // The same request unstreamed draws the same tokens.
  const Json plain = Json::parse(Post(**server, Body()).body);
  EXPECT_EQ(Tokens(completed["mulo"]["images"][0]), Tokens(plain["mulo"]["images"][0]));
}

TEST(HttpApiTest, ErrorsAreOpenAiErrorObjectsNamingTheField) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  struct Case {
    Json change;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"temperature", "hot"}}, 400, "temperature"},
      {{{"temperature", 500}}, 400, "temperature"},
      {{{"top_k", -1}}, 400, "top_k"},
      {{{"n", 11}}, 400, "n"},
      {{{"n", 1.5}}, 400, "n"},
      {{{"response_format", "uri"}}, 400, "response_format"},
      {{{"output_format", "gif"}}, 400, "output_format"},
      {{{"background", "transparent"}}, 400, "background"},
      {{{"partial_images", 4}}, 400, "partial_images"},
      {{{"size", "4097x1024"}}, 400, "size"},
      {{{"method", "warp"}}, 400, "method"},
      {{{"mulo", {{"taux", 1}}}}, 400, "mulo"},
      {{{"stream", true}, {"n", 2}}, 400, "n"},
      {{{"bogus", 1}}, 400, "bogus"},
      {{{"model", "nope"}}, 404, "model"},
  };
  for (const Case& c : cases) {
    Json body = Body();
    for (const auto& [key, value] : c.change.items()) body[key] = value;
    const HttpResponse response = Post(**server, body);
    EXPECT_EQ(response.status, c.status) << c.change.dump() << " -> " << response.body;
    const Json error = Json::parse(response.body)["error"];
    EXPECT_EQ(error["param"], c.param) << c.change.dump();
    EXPECT_TRUE(error["message"].is_string());
    EXPECT_TRUE(error["type"].is_string());
  }
  // The same validation as gRPC's: the same message.
  Json body = Body();
  body["temperature"] = 500;
  v1::GenerateRequest request = ValidRequest();
  request.mutable_sampling()->set_temperature(500);
  auto stub = (*server)->NewStub();
  EXPECT_EQ(Json::parse(Post(**server, body).body)["error"]["message"],
            RunStream(*stub, request).status.error_message());
  // Not JSON, too deep, too large.
  HttpOptions options;
  options.body = "{\"model\": ";
  EXPECT_EQ(HttpRequest((*server)->http_port(), "POST", "/v1/images/generations", options)->status,
            400);
  options.body = std::string(40, '[') + std::string(40, ']');
  EXPECT_EQ(HttpRequest((*server)->http_port(), "POST", "/v1/images/generations", options)->status,
            400);
  options.body = std::string(2 << 20, ' ');
  EXPECT_EQ(HttpRequest((*server)->http_port(), "POST", "/v1/images/generations", options)->status,
            413);
  // A deadline the decoding cannot meet.
  body = Body();
  body["timeout"] = 0.001;
  EXPECT_EQ(Post(**server, body).status, 504);
  EXPECT_GE((*server)->MetricSum("mulo_requests_total",
                                 {"protocol=\"http\"", "code=\"INVALID_ARGUMENT\""}),
            cases.size() - 1);
}

TEST(HttpApiTest, AClientThatDisconnectsCancelsItsGeneration) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = server::metrics::testing::ConnectLoopback((*server)->http_port());
  ASSERT_GE(fd, 0);
  Json body = Body();
  body["n"] = 8;  // minutes of work on this machine, unless cancelled
  const std::string text = body.dump();
  const std::string request =
      absl::StrCat("POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Type: "
                   "application/json\r\nContent-Length: ",
                   text.size(), "\r\n\r\n", text);
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  close(fd);
  double cancelled = 0;
  for (int i = 0; i < 100 && cancelled < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancelled = (*server)->MetricSum("mulo_requests_total",
                                     {"protocol=\"http\"", "code=\"CANCELLED\""});
  }
  EXPECT_EQ(cancelled, 8);
  // No OK series at all (MetricSum is -1 when no series matches).
  EXPECT_LE((*server)->MetricSum("mulo_requests_total", {"protocol=\"http\"", "code=\"OK\""}), 0);
  // And it keeps serving.
  EXPECT_EQ(Post(**server, Body()).status, 200);
}

TEST(HttpApiTest, WithKeysBothFrontEndsNeedABearerKeyAndSighupReloadsThem) {
  const std::string keys = std::string(getenv("TEST_TMPDIR")) + "/api_keys";
  std::ofstream(keys) << "sk-first\n";
  std::vector<std::string> flags = kRepository;
  flags.push_back("--api_keys_file=" + keys);
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const auto post = [&](const std::string& key) {
    return Post(**server, Body(), false,
                key.empty() ? std::vector<std::string>{}
                            : std::vector<std::string>{"Authorization: Bearer " + key});
  };
  HttpResponse none = post("");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(Json::parse(none.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(post("sk-wrong").status, 401);
  EXPECT_EQ(post("sk-first").status, 200);
  HttpOptions models;
  EXPECT_EQ(HttpRequest((*server)->http_port(), "GET", "/v1/models", models)->status, 401);
  // Probes, metrics and the page stay open.
  EXPECT_EQ(server::metrics::testing::HttpGet((*server)->metrics_port(), "/readyz")->status, 200);
  EXPECT_EQ(server::metrics::testing::HttpGet((*server)->http_port(), "/")->status, 200);

  auto stub = (*server)->NewStub();
  const auto grpc_status = [&](const std::string& key) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!key.empty()) context.AddMetadata("authorization", "Bearer " + key);
    auto reader = stub->Generate(&context, ValidRequest());
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish().error_code();
  };
  EXPECT_EQ(grpc_status(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(grpc_status("sk-wrong"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(grpc_status("sk-first"), grpc::StatusCode::OK);
  grpc::ClientContext list_context;
  v1::ListModelsResponse list;
  EXPECT_EQ(stub->ListModels(&list_context, v1::ListModelsRequest(), &list).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Health(**server), grpc::health::v1::HealthCheckResponse::SERVING);

  // SIGHUP reloads the file: the old key stops working, the new one works on both.
  std::ofstream(keys) << "sk-second\n";
  (*server)->Signal(SIGHUP);
  bool reloaded = false;
  for (int i = 0; i < 50 && !reloaded; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reloaded = post("sk-second").status == 200;
  }
  EXPECT_TRUE(reloaded);
  EXPECT_EQ(post("sk-first").status, 401);
  EXPECT_EQ(grpc_status("sk-second"), grpc::StatusCode::OK);
  // At least 3 HTTP posts and 2 gRPC Generates (a post racing the reload adds one).
  EXPECT_GE((*server)->MetricSum("mulo_requests_total", {"code=\"UNAUTHENTICATED\""}), 5);
  // Keys never reach the log.
  const std::string log = (*server)->Log();
  EXPECT_EQ(log.find("sk-first"), std::string::npos);
  EXPECT_EQ(log.find("sk-second"), std::string::npos);
  EXPECT_NE(log.find("reloaded 1 API keys"), std::string::npos);
}

TEST(HttpApiTest, AFullQueueIs429WithRetryAfter) {
  std::vector<std::string> flags = kRepository;
  for (const char* flag : {"--workers=1", "--max_batch=1", "--max_queue=1"}) flags.push_back(flag);
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  // Three images on one worker with room for one more in the queue: the third is refused, and
  // with it the request (its first two are cancelled).
  Json body = Body();
  body["n"] = 3;
  HttpResponse full = Post(**server, body);
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(full.headers["retry-after"], "1");
  EXPECT_EQ(Json::parse(full.body)["error"]["type"], "rate_limit_error");
}

TEST(HttpApiTest, ADrainingServerAnswers503WithRetryAfterAndFinishesWhatRuns) {
  std::vector<std::string> flags = kRepository;
  for (const char* flag : {"--workers=1", "--max_batch=1", "--max_queue=8", "--drain_timeout=60s"}) {
    flags.push_back(flag);
  }
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  HttpResponse in_flight;
  std::thread slow([&] {
    Json eight = Body();
    eight["n"] = 8;  // one after another on the one worker: seconds of work
    in_flight = Post(**server, eight);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  (*server)->Signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  HttpResponse draining = Post(**server, Body());
  slow.join();
  EXPECT_EQ(draining.status, 503) << draining.body;
  EXPECT_EQ(draining.headers["retry-after"], "5");
  EXPECT_EQ(in_flight.status, 200) << in_flight.body;
  EXPECT_EQ(Json::parse(in_flight.body)["data"].size(), 8u);
}

}  // namespace
}  // namespace mulo::testing
