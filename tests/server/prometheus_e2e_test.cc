// Metrics against the real tools: the server's /metrics passes `promtool check metrics`, and a
// real Prometheus scraping the server on loopback sees mulo_requests_total rise by exactly the
// number of requests sent.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/server/metrics/http_client.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

using server::metrics::testing::HttpGet;

bool GenerateOnce(const ServerProcess& server, uint64_t seed) {
  auto stub = server.NewStub();
  v1::GenerateRequest request;
  request.set_model("tiny");
  request.set_prompt("a large green square in the center on a white background");
  request.mutable_sampling()->set_seed(seed);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
  }
  return reader->Finish().ok();
}

// Runs a command with its stdin from `input_path`; returns (exit code, combined output).
std::pair<int, std::string> RunWithInput(const std::string& command,
                                         const std::string& input_path) {
  const std::string out_path = TestTempDir() + "/command_output.txt";
  const int rc = std::system((command + " < " + input_path + " > " + out_path + " 2>&1").c_str());
  std::ifstream in(out_path);
  std::string output((std::istreambuf_iterator<char>(in)), {});
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, output};
}

TEST(PrometheusEndToEndTest, ExpositionPassesPromtool) {
  ASSERT_EQ(access("/usr/bin/promtool", X_OK), 0)
      << "promtool is missing: run tools/setup.sh (Debian package prometheus)";
  auto server = ServerProcess::Start({"--model_repository=tests/data/repository"});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(GenerateOnce(**server, 1));  // every family has samples now
  auto metrics = HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  ASSERT_EQ(metrics->status, 200);
  for (const char* family :
       {"mulo_requests_total", "mulo_generated_tokens_total", "mulo_target_forward_passes_total",
        "mulo_request_duration_seconds", "mulo_queue_duration_seconds",
        "mulo_time_to_first_row_seconds", "mulo_phase_duration_seconds", "mulo_queue_depth",
        "mulo_requests_running", "mulo_model_loaded", "mulo_model_weight_bytes",
        "mulo_kv_cache_slots", "mulo_kv_cache_used_slots", "mulo_kv_cache_usage_ratio",
        "mulo_kv_cache_bytes", "mulo_kv_cache_overflows_total",
        "process_resident_memory_bytes"}) {
    EXPECT_NE(metrics->body.find(std::string("# TYPE ") + family), std::string::npos) << family;
  }
  // The tiny family's weights plus its neighbour table (~0.5 MB; exact sum: model_set_test).
  EXPECT_GT((*server)->MetricSum("mulo_model_weight_bytes", {"model=\"tiny\"", "device=\"cpu\""}),
            1e5);
  const std::string path = TestTempDir() + "/metrics.txt";
  std::ofstream(path) << metrics->body;
  auto [rc, output] = RunWithInput("/usr/bin/promtool check metrics", path);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "") << "promtool lint findings:\n" << output;
}

TEST(PrometheusEndToEndTest, PrometheusSeesEveryRequest) {
  ASSERT_EQ(access("/usr/bin/prometheus", X_OK), 0)
      << "prometheus is missing: run tools/setup.sh (Debian package prometheus)";
  auto server = ServerProcess::Start({"--model_repository=tests/data/repository"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dir = TestTempDir() + "/prometheus";
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  ASSERT_TRUE(std::filesystem::create_directories(dir, error)) << dir << ": " << error.message();
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: mulo\n"
      << "    static_configs:\n      - targets: ['127.0.0.1:" << (*server)->metrics_port()
      << "']\n";
  const int port = FreeLoopbackPort();
  const pid_t prometheus = fork();
  ASSERT_GE(prometheus, 0);
  if (prometheus == 0) {
    const std::string log = dir + "/prometheus.log";
    // In the child: without its log the child exits 127 and the parent's wait for
    // Prometheus to answer fails the test.
    if (std::freopen(log.c_str(), "w", stdout) == nullptr ||
        std::freopen(log.c_str(), "a", stderr) == nullptr) {
      _exit(127);
    }
    const std::string config = "--config.file=" + dir + "/prometheus.yml";
    const std::string storage = "--storage.tsdb.path=" + dir + "/data";
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port);
    execl("/usr/bin/prometheus", "prometheus", config.c_str(), storage.c_str(), listen.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  auto query = [&](const std::string& expr) -> double {  // -1 when Prometheus has no value
    auto response = HttpGet(port, "/api/v1/query?query=" + expr);
    if (!response.ok() || response->status != 200) return -1;
    auto doc = nlohmann::json::parse(response->body, nullptr, false);
    if (doc.is_discarded() || doc["data"]["result"].empty()) return -1;
    return std::stod(doc["data"]["result"][0]["value"][1].get<std::string>());
  };
  auto wait_for = [&](const std::string& expr, double want) {
    double got = -1;
    for (int i = 0; i < 300 && got != want; ++i) {  // up to 30 s
      got = query(expr);
      if (got != want) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return got;
  };
  // The target is up and scraped before anything is sent.
  EXPECT_EQ(wait_for("up%7Bjob%3D%22mulo%22%7D", 1), 1);
  constexpr int kRequests = 5;
  for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(GenerateOnce(**server, 100 + i));
  EXPECT_EQ(wait_for("sum(mulo_requests_total)", kRequests), kRequests);
  EXPECT_EQ(wait_for("sum(mulo_requests_total%7Bcode%3D%22OK%22%7D)", kRequests), kRequests);
  kill(prometheus, SIGTERM);
  waitpid(prometheus, nullptr, 0);
}

}  // namespace
}  // namespace mulo::testing
