// The HTTP API against what a careless or hostile client sends (issue 41): the hostile-request
// suite's cases as JSON, and connections that are slow, idle or too many. Each bad request
// gets a clear 4xx naming the field in OpenAI's error object (or, for an oversized body, 413
// before the body is read); the server keeps serving and its probes stay fast.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
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
using server::metrics::testing::ConnectLoopback;
using server::metrics::testing::HttpGet;
using server::metrics::testing::HttpOptions;
using server::metrics::testing::HttpRequest;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Whether the server closed `fd` within `seconds` (reads and drops what it sends).
bool ClosedWithin(int fd, double seconds) {
  const auto start = Clock::now();
  while (SecondsSince(start) < seconds) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buffer[4096];
      if (recv(fd, buffer, sizeof(buffer), 0) <= 0) return true;
    }
  }
  return false;
}

// The probe and one real generation answer, quickly: the server still serves.
void ExpectStillServing(const ServerProcess& server) {
  const auto start = Clock::now();
  auto ready = HttpGet(server.metrics_port(), "/readyz");
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->status, 200);
  EXPECT_LT(SecondsSince(start), 1.0);
  HttpOptions options;
  options.body = Json{{"model", "tiny"}, {"prompt", kPrompt}}.dump();
  options.timeout_seconds = 60;
  auto generated = HttpRequest(server.http_port(), "POST", "/v1/images/generations", options);
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_EQ(generated->status, 200) << generated->body;
}

TEST(HttpHostileTest, EveryBadBodyIsA4xxNamingItsField) {
  auto server = ServerProcess::Start(kRepository);
  ASSERT_TRUE(server.ok()) << server.status();
  struct Case {
    std::string body;
    int status;
    std::string param;
  };
  const std::string valid = R"("model": "tiny", "prompt": "a red circle")";
  const auto with = [&](const std::string& fields) { return "{" + valid + ", " + fields + "}"; };
  std::string many_tokens = "[";
  for (int i = 0; i < 100000; ++i) many_tokens += (i ? ",7" : "7");
  many_tokens += "]";
  const std::vector<Case> cases = {
      // Extreme sizes.
      {with(R"("n": 1000000000)"), 400, "n"},
      {with(R"("top_k": 4294967295)"), 400, "top_k"},
      {with(R"("seed": 18446744073709551616)"), 400, "seed"},
      {with(R"("partial_images": 4294967295)"), 400, "partial_images"},
      {with(R"("speculative": {"gamma": 4294967295})"), 400, "speculative.gamma"},
      {with(R"("eagle": {"total_tokens": 4294967295})"), 400, "eagle.total_tokens"},
      {with(R"("timeout": 1e300)"), 400, "timeout"},
      {with(R"("cfg_scale": -1e308)"), 400, "cfg_scale"},
      {with(R"("condition_tokens": )" + many_tokens), 400, "condition_tokens"},
      {R"({"model": "tiny", "prompt": ")" + std::string(5000, 'x') + "\"}", 400, "prompt"},
      // NaN and infinities are not JSON.
      {with(R"("temperature": NaN)"), 400, "body"},
      {with(R"("temperature": Infinity)"), 400, "body"},
      {with(R"("temperature": 1e999)"), 400, "body"},
      // Wrong types.
      {with(R"("n": "2")"), 400, "n"},
      {with(R"("n": true)"), 400, "n"},
      {with(R"("stream": 1)"), 400, "stream"},
      {with(R"("temperature": [1])"), 400, "temperature"},
      {with(R"("seed": 1.5)"), 400, "seed"},
      {with(R"("method": 3)"), 400, "method"},
      {with(R"("mulo": [])"), 400, "mulo"},
      {with(R"("mulo": {"tau": {}})"), 400, "mulo"},
      {with(R"("condition_tokens": "1,2")"), 400, "condition_tokens"},
      {R"({"model": ["tiny"], "prompt": "x"})", 400, "model"},
      {R"({"model": "tiny", "prompt": null})", 400, "prompt"},
      // Unknown fields, anywhere.
      {with(R"("promt": "typo")"), 400, "promt"},
      {with(R"("mulo": {"taux": 1})"), 400, "mulo"},
      // Invalid UTF-8, deep nesting, not an object, empty.
      {"{\"model\": \"tiny\", \"prompt\": \"\xc3\x28\"}", 400, "body"},
      {"{\"model\": \"tiny\", \"prompt\": \"\xed\xa0\x80\"}", 400, "body"},
      {std::string(100000, '[') + std::string(100000, ']'), 400, "body"},
      {with(R"("mulo": )" + std::string(50, '{') + std::string(50, '}')), 400, "body"},
      {"[]", 400, "body"},
      {"\"a string\"", 400, "body"},
      {"", 400, "body"},
      {"{", 400, "body"},
      // Unknown model.
      {R"({"model": "../../etc/passwd", "prompt": "x"})", 404, "model"},
  };
  for (const Case& c : cases) {
    HttpOptions options;
    options.body = c.body;
    auto response = HttpRequest((*server)->http_port(), "POST", "/v1/images/generations", options);
    ASSERT_TRUE(response.ok()) << c.body.substr(0, 80) << ": " << response.status();
    EXPECT_EQ(response->status, c.status) << c.body.substr(0, 80) << " -> " << response->body;
    const Json error = Json::parse(response->body, nullptr, false);
    ASSERT_FALSE(error.is_discarded()) << response->body;
    EXPECT_EQ(error["error"]["param"], c.param) << c.body.substr(0, 80) << " -> " << response->body;
    EXPECT_LT(error["error"]["message"].get<std::string>().size(), 600u);
  }
  // 10 MB: refused from its Content-Length, before the body is read.
  HttpOptions huge;
  huge.body = std::string(10 << 20, ' ');
  auto refused = HttpRequest((*server)->http_port(), "POST", "/v1/images/generations", huge);
  if (refused.ok()) {
    EXPECT_EQ(refused->status, 413);
  }  // else the server closed the connection while the body was being sent
  EXPECT_GE((*server)->MetricSum("mulo_requests_total", {"protocol=\"http\""}),
            static_cast<double>(cases.size()));
  ExpectStillServing(**server);
}

TEST(HttpHostileTest, SlowIdleAndTooManyConnectionsAreClosedAndProbesStayFast) {
  std::vector<std::string> flags = kRepository;
  flags.push_back("--http_idle_timeout=1s");
  flags.push_back("--http_max_connections=16");
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();

  // Idle: connected, never sends; slow: half a request line, then nothing.
  std::vector<int> sockets;
  for (int i = 0; i < 8; ++i) sockets.push_back(ConnectLoopback(port));
  for (int i = 0; i < 8; ++i) {
    const int fd = ConnectLoopback(port);
    const std::string partial = "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Le";
    send(fd, partial.data(), partial.size(), MSG_NOSIGNAL);
    sockets.push_back(fd);
  }
  // A body announced and never sent.
  const int stalled = ConnectLoopback(port);
  const std::string headers =
      "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mo";
  send(stalled, headers.data(), headers.size(), MSG_NOSIGNAL);
  sockets.push_back(stalled);
  // Past the limit: further connections are turned away (closed), not queued forever.
  std::vector<int> extra;
  for (int i = 0; i < 8; ++i) extra.push_back(ConnectLoopback(port));
  int turned_away = 0;
  for (int fd : extra) turned_away += fd < 0 || ClosedWithin(fd, 0.5);
  EXPECT_GE(turned_away, 1);

  // Probes on the metrics port answer at once meanwhile.
  const auto start = Clock::now();
  auto ready = HttpGet((*server)->metrics_port(), "/readyz");
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->status, 200);
  EXPECT_LT(SecondsSince(start), 1.0);

  // The idle, slow and stalled ones are closed by the idle timeout.
  int closed = 0;
  for (int fd : sockets) closed += ClosedWithin(fd, 5.0);
  EXPECT_EQ(closed, static_cast<int>(sockets.size()));
  for (int fd : sockets) close(fd);
  for (int fd : extra) {
    if (fd >= 0) close(fd);
  }
  ExpectStillServing(**server);
}

}  // namespace
}  // namespace mulo::testing
