// The HTTP endpoint over loopback: /metrics, /healthz, /readyz, 404/405, bind errors.
#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/exposition.h"
#include "server/metrics/registry.h"
#include "tests/server/metrics/http_client.h"

namespace mulo::server::metrics {
namespace {

using ::testing::HasSubstr;
using testing::HttpGet;
using testing::HttpRequest;
using testing::HttpResponse;

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    requests_ = *registry_.AddCounter("mulo_requests_total", "Requests.", {"code"});
    server_ = std::make_unique<MetricsHttpServer>(&registry_, [this] { return ready_.load(); });
    // Port 0: the kernel picks a free port, so parallel tests never collide.
    ASSERT_TRUE(server_->Start("127.0.0.1:0").ok());
    ASSERT_GT(server_->port(), 0);
  }

  HttpResponse Get(const std::string& path) {
    absl::StatusOr<HttpResponse> response = HttpGet(server_->port(), path);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : HttpResponse{};
  }

  Registry registry_;
  CounterFamily* requests_ = nullptr;
  std::atomic<bool> ready_{true};
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(MetricsHttpServerTest, MetricsServesCurrentExposition) {
  requests_->WithLabels({"OK"}).Inc(5);
  HttpResponse response = Get("/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response.body, SerializeText(registry_));
  EXPECT_THAT(response.body, HasSubstr("mulo_requests_total{code=\"OK\"} 5\n"));
  EXPECT_EQ(response.headers["content-length"], std::to_string(response.body.size()));

  requests_->WithLabels({"OK"}).Inc();
  EXPECT_THAT(Get("/metrics").body, HasSubstr("mulo_requests_total{code=\"OK\"} 6\n"));
}

TEST_F(MetricsHttpServerTest, HealthzIsAlwaysOk) {
  ready_ = false;  // Liveness does not depend on readiness.
  HttpResponse response = Get("/healthz");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "ok\n");
}

TEST_F(MetricsHttpServerTest, ReadyzFollowsTheReadinessCheck) {
  HttpResponse ready = Get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ready\n");

  ready_ = false;
  HttpResponse not_ready = Get("/readyz");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_EQ(not_ready.body, "not ready\n");

  ready_ = true;
  EXPECT_EQ(Get("/readyz").status, 200);
}

TEST_F(MetricsHttpServerTest, UnknownPathsAre404) {
  for (const char* path : {"/", "/nope", "/metrics/extra", "/metricsx", "/healthz/"}) {
    HttpResponse response = Get(path);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_EQ(response.body, "not found\n") << path;
  }
  // The query string is not part of the path.
  EXPECT_EQ(Get("/metrics?x=1").status, 200);
}

TEST_F(MetricsHttpServerTest, HeadHasNoBodyAndOtherMethodsAre405) {
  absl::StatusOr<HttpResponse> head = HttpRequest(server_->port(), "HEAD", "/healthz");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");

  absl::StatusOr<HttpResponse> post = HttpRequest(server_->port(), "POST", "/metrics");
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->headers["allow"], "GET, HEAD");
}

TEST_F(MetricsHttpServerTest, SecondServerOnSamePortFailsClearly) {
  MetricsHttpServer second(&registry_, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", server_->port());
  absl::Status status = second.Start(address);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr(address));
  EXPECT_THAT(status.message(), HasSubstr("Address already in use"));
  EXPECT_EQ(second.port(), 0);
  // The first server is unaffected.
  EXPECT_EQ(Get("/healthz").status, 200);
}

// A TCP connection to 127.0.0.1:port that sends nothing (or `partial`, a request cut short)
// and stays open until destroyed; -1 when it cannot connect.
class IdleConnection {
 public:
  IdleConnection(int port, const std::string& partial) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_port = htons(static_cast<uint16_t>(port));
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && connect(fd_, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
      close(fd_);
      fd_ = -1;
    }
    if (fd_ >= 0 && !partial.empty()) send(fd_, partial.data(), partial.size(), MSG_NOSIGNAL);
  }
  ~IdleConnection() {
    if (fd_ >= 0) close(fd_);
  }
  IdleConnection(const IdleConnection&) = delete;
  IdleConnection& operator=(const IdleConnection&) = delete;
  bool connected() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Idle connections (a balancer's pre-opened sockets, a stuck scraper halfway through its
// request line) must never keep a probe waiting: with 64 of them open, every probe and scrape
// still answers at once.
TEST_F(MetricsHttpServerTest, ProbesAnswerPromptlyWhileManyConnectionsIdle) {
  std::vector<std::unique_ptr<IdleConnection>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<IdleConnection>(server_->port(),
                                                    i % 2 == 0 ? "" : "GET /metr"));
    ASSERT_TRUE(idle.back()->connected()) << i;
  }
  for (int round = 0; round < 3; ++round) {
    for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
      const auto start = std::chrono::steady_clock::now();
      EXPECT_EQ(Get(path).status, 200) << path;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // Kubernetes' default probe timeout is 1 s; a blocked endpoint took 10 s.
      EXPECT_LT(seconds, 1.0) << path << " took " << seconds << " s behind 64 idle connections";
    }
  }
}

TEST_F(MetricsHttpServerTest, StartTwiceFailsAndStopIsIdempotent) {
  EXPECT_EQ(server_->Start("127.0.0.1:0").code(), absl::StatusCode::kFailedPrecondition);
  const int port = server_->port();
  server_->Stop();
  server_->Stop();
  EXPECT_EQ(server_->port(), 0);
  EXPECT_FALSE(HttpGet(port, "/healthz").ok()) << "nothing listens after Stop";
  // Restart works.
  ASSERT_TRUE(server_->Start("127.0.0.1:0").ok());
  EXPECT_EQ(Get("/healthz").status, 200);
}

TEST(MetricsHttpServerAddressTest, RejectsMalformedAddresses) {
  Registry registry;
  for (const char* address : {"", "abc", "127.0.0.1:", ":80", "127.0.0.1:65536",
                              "127.0.0.1:-1", "80,81", "127.0.0.1:80s", "[::1]:80",
                              "localhost:80", "1.2.3:80"}) {
    MetricsHttpServer server(&registry, nullptr);
    EXPECT_EQ(server.Start(address).code(), absl::StatusCode::kInvalidArgument) << address;
  }
}

TEST(MetricsHttpServerAddressTest, EmptyReadinessCheckMeansReady) {
  Registry registry;
  MetricsHttpServer server(&registry, nullptr);
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  absl::StatusOr<HttpResponse> response = HttpGet(server.port(), "/readyz");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
}

// Several servers at once, started and destroyed from different threads, exercise the
// library state libmicrohttpd keeps per process.
TEST(MetricsHttpServerAddressTest, ConcurrentServers) {
  Registry registry;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        MetricsHttpServer server(&registry, nullptr);
        if (!server.Start("127.0.0.1:0").ok()) continue;
        absl::StatusOr<HttpResponse> response = HttpGet(server.port(), "/healthz");
        if (response.ok() && response->status == 200) ++ok;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 12);
}

}  // namespace
}  // namespace mulo::server::metrics
