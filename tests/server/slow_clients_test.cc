// Slow and idle clients cannot starve the HTTP API (issue 59, part 2): with 1,000 connections
// dripping a request one byte at a time and 1,000 that send nothing, a legitimate client's
// /v1/models answers within 1 s and its generation completes; the server's threads and memory
// stay bounded; the read deadline closes the drippers although each byte resets any idle
// timer; one address cannot hold more than its cap.
//
// The attacking connections come from many loopback addresses (127.1.x.y: all of 127/8 is
// loopback on Linux), ten per address, so that the per-client cap does not turn them away and
// the front end itself is what is tested.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
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

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A non-blocking TCP connection to 127.0.0.1:port from the loopback address `source`.
int ConnectFrom(const std::string& source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &local.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    close(fd);
    return -1;
  }
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
  connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof(server));  // in progress
  return fd;
}

// Whether the server has closed `fd` (reads and drops whatever it sent).
bool IsClosed(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char buffer[4096];
  const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Threads and resident kilobytes of process `pid`, from /proc.
std::pair<int, int64_t> ThreadsAndRssKb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  int threads = 0;
  int64_t rss = 0;
  while (status >> key) {
    if (key == "Threads:") status >> threads;
    if (key == "VmRSS:") status >> rss;
  }
  return {threads, rss};
}

void RaiseOpenFileLimit() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

TEST(SlowClientsTest, ThousandsOfDrippingAndIdleConnectionsDoNotStarveTheApi) {
  RaiseOpenFileLimit();
  std::vector<std::string> flags = kRepository;
  flags.push_back("--http_request_read_timeout=8s");
  flags.push_back("--http_idle_timeout=20s");
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  const pid_t pid = (*server)->pid();
  ASSERT_GT(pid, 0);
  const auto [threads_before, rss_before] = ThreadsAndRssKb(pid);

  constexpr int kEach = 1000;
  std::vector<int> dripping, idle;
  for (int i = 0; i < 2 * kEach; ++i) {
    const std::string source =
        "127.1." + std::to_string(i / 10 / 250) + "." + std::to_string(i / 10 % 250 + 1);
    const int fd = ConnectFrom(source, port);
    ASSERT_GE(fd, 0) << "connection " << i;
    (i % 2 == 0 ? dripping : idle).push_back(fd);
  }
  const std::string request =
      "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 1000\r\n\r\n{\"model\": \"tiny\", \"prompt\": \"";
  size_t dripped = 0;
  auto drip = [&] {  // one more byte on every dripping connection
    for (int fd : dripping) {
      send(fd, request.data() + dripped % request.size(), 1, MSG_NOSIGNAL);
    }
    ++dripped;
  };
  const auto opened = Clock::now();
  for (int i = 0; i < 3; ++i) {
    drip();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  int open = 0;
  for (int fd : dripping) open += !IsClosed(fd);
  for (int fd : idle) open += !IsClosed(fd);
  std::cout << "[slow] " << open << " of " << 2 * kEach << " attacking connections open after "
            << SecondsSince(opened) << " s" << std::endl;
  EXPECT_GE(open, 2 * kEach - 10);

  // The legitimate client, from 127.0.0.1, meanwhile.
  auto start = Clock::now();
  auto models = HttpRequest(port, "GET", "/v1/models");
  const double models_seconds = SecondsSince(start);
  ASSERT_TRUE(models.ok()) << models.status();
  EXPECT_EQ(models->status, 200);
  EXPECT_LT(models_seconds, 1.0);
  drip();
  HttpOptions options;
  options.body = Json{{"model", "tiny"}, {"prompt", kPrompt}}.dump();
  options.timeout_seconds = 60;
  start = Clock::now();
  auto generated = HttpRequest(port, "POST", "/v1/images/generations", options);
  const double generation_seconds = SecondsSince(start);
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_EQ(generated->status, 200) << generated->body;
  const auto [threads_during, rss_during] = ThreadsAndRssKb(pid);
  std::cout << "[slow] /v1/models " << models_seconds << " s, a generation " << generation_seconds
            << " s; server threads " << threads_before << " -> " << threads_during << ", RSS "
            << rss_before / 1024 << " -> " << rss_during / 1024 << " MiB" << std::endl;
  // Connections hold no thread (a thread per connection would add 2,000).
  EXPECT_LE(threads_during, threads_before + 8);
  EXPECT_LT(rss_during - rss_before, 256 * 1024);

  // The drippers keep every idle timer fresh, yet the read deadline (8 s) closes them.
  while (SecondsSince(opened) < 12) {
    drip();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  int drippers_closed = 0;
  for (int fd : dripping) drippers_closed += IsClosed(fd);
  std::cout << "[slow] after " << SecondsSince(opened) << " s, " << drippers_closed << " of "
            << kEach << " drippers closed by the read deadline" << std::endl;
  EXPECT_EQ(drippers_closed, kEach);
  for (int fd : dripping) close(fd);
  for (int fd : idle) close(fd);
}

TEST(SlowClientsTest, OneAddressHoldsAtMostItsCap) {
  std::vector<std::string> flags = kRepository;
  flags.push_back("--http_max_connections_per_client=20");
  auto server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) fds.push_back(ConnectFrom("127.2.0.1", port));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int closed = 0;
  for (int fd : fds) closed += IsClosed(fd);
  EXPECT_EQ(closed, 20) << "the cap is 20 per address";
  // Another address is served at once.
  const auto start = Clock::now();
  auto models = HttpRequest(port, "GET", "/v1/models");
  ASSERT_TRUE(models.ok()) << models.status();
  EXPECT_EQ(models->status, 200);
  EXPECT_LT(SecondsSince(start), 1.0);
  for (int fd : fds) close(fd);
}

}  // namespace
}  // namespace mulo::testing
