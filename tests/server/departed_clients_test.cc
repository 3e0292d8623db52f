// Departed clients leave the queue at once (issue 59, part 3): a request whose client has
// gone frees its queue slot wherever it waits, even behind live requests, so the next live
// calls are admitted instead of being refused (UNAVAILABLE, 429).
//
// One worker runs an 8-image HTTP request (one image running, seven queued, live); 15
// requests queue behind them and their clients leave (gRPC cancels; HTTP clients hang up);
// the next 15 live calls are admitted at once and complete. Before the fix the departed sat
// behind the seven live images until each reached the front, about a second here.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <chrono>
#include <memory>
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
using server::metrics::testing::HttpOptions;
using server::metrics::testing::HttpRequest;

constexpr int kDeparting = 15;

std::vector<std::string> Flags() {
  std::vector<std::string> flags = kRepository;
  // 1 running + 7 live queued + 15 departing fill the queue of 22.
  for (const char* flag : {"--workers=1", "--max_batch=1", "--max_queue=22"}) {
    flags.push_back(flag);
  }
  return flags;
}

double QueueDepth(const ServerProcess& server) {
  return server.MetricSum("mulo_queue_depth", {});
}

// Waits until the queue holds `depth` requests (up to 10 s).
bool WaitForQueue(const ServerProcess& server, double depth) {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < give_up) {
    if (QueueDepth(server) >= depth) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// The 8-image request that keeps the worker busy, on its own thread.
std::thread Busy(const ServerProcess& server, int* status) {
  return std::thread([&server, status] {
    HttpOptions options;
    options.body = Json{{"model", "tiny"}, {"prompt", kPrompt}, {"n", 8}}.dump();
    options.timeout_seconds = 120;
    auto r = HttpRequest(server.http_port(), "POST", "/v1/images/generations", options);
    *status = r.ok() ? r->status : -1;
  });
}

// The departed leave the queue within 300 ms of their clients (the seven live images stay
// queued, of which the worker takes about one per 0.13 s); then kDeparting live gRPC calls
// started together are every one admitted and complete.
void ExpectTheNextCallsAdmitted(const ServerProcess& server, Clock::time_point left) {
  double depth = QueueDepth(server);
  while (depth > 7 && Clock::now() - left < std::chrono::milliseconds(300)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    depth = QueueDepth(server);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - left).count();
  std::cout << "[departed] queue " << depth << " " << seconds << " s after the clients left"
            << std::endl;
  EXPECT_LE(depth, 7) << "the departed still hold their slots";
  std::vector<grpc::StatusCode> codes(kDeparting, grpc::StatusCode::UNKNOWN);
  std::vector<std::thread> calls;
  const auto start = Clock::now();
  for (int i = 0; i < kDeparting; ++i) {
    calls.emplace_back([&server, &codes, i] {
      auto stub = server.NewStub();
      codes[i] = RunStream(*stub, ValidRequest(100 + i), 120).status.error_code();
    });
  }
  for (auto& t : calls) t.join();
  int ok = 0;
  for (auto code : codes) ok += code == grpc::StatusCode::OK;
  EXPECT_EQ(ok, kDeparting) << "live calls refused while departed ones held the queue";
  std::cout << "[departed] " << ok << " of " << kDeparting << " next calls admitted and done in "
            << std::chrono::duration<double>(Clock::now() - start).count() << " s" << std::endl;
}

TEST(DepartedClientsTest, GrpcClientsThatCancelFreeTheirSlotsAtOnce) {
  auto server = ServerProcess::Start(Flags());
  ASSERT_TRUE(server.ok()) << server.status();
  int busy_status = 0;
  std::thread busy = Busy(**server, &busy_status);
  ASSERT_TRUE(WaitForQueue(**server, 7));
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> departing;
  for (int i = 0; i < kDeparting; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    departing.emplace_back([&server, context = contexts.back().get(), i] {
      auto stub = (*server)->NewStub();
      auto reader = stub->Generate(context, ValidRequest(200 + i));
      v1::GenerateResponse response;
      while (reader->Read(&response)) {
      }
      reader->Finish();
    });
  }
  ASSERT_TRUE(WaitForQueue(**server, 7 + kDeparting)) << QueueDepth(**server);
  const auto left = Clock::now();
  for (auto& context : contexts) context->TryCancel();
  for (auto& t : departing) t.join();
  ExpectTheNextCallsAdmitted(**server, left);
  busy.join();
  EXPECT_EQ(busy_status, 200);
  EXPECT_EQ((*server)->MetricSum("mulo_requests_total", {"code=\"CANCELLED\""}), kDeparting);
}

TEST(DepartedClientsTest, HttpClientsThatHangUpFreeTheirSlotsAtOnce) {
  auto server = ServerProcess::Start(Flags());
  ASSERT_TRUE(server.ok()) << server.status();
  int busy_status = 0;
  std::thread busy = Busy(**server, &busy_status);
  ASSERT_TRUE(WaitForQueue(**server, 7));
  std::vector<int> sockets;
  for (int i = 0; i < kDeparting; ++i) {
    const std::string body = Json{{"model", "tiny"}, {"prompt", kPrompt}, {"seed", i}}.dump();
    const std::string request = "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n"
                                "Content-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    const int fd = ConnectLoopback((*server)->http_port(), 5);
    ASSERT_GE(fd, 0);
    send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    sockets.push_back(fd);
  }
  ASSERT_TRUE(WaitForQueue(**server, 7 + kDeparting)) << QueueDepth(**server);
  const auto left = Clock::now();
  for (int fd : sockets) close(fd);  // the clients leave
  ExpectTheNextCallsAdmitted(**server, left);
  busy.join();
  EXPECT_EQ(busy_status, 200);
}

}  // namespace
}  // namespace mulo::testing
