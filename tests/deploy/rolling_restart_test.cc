// A rolling restart behind a real L7 balancer loses nothing: two mulo_server replicas behind
// Debian's nginx running the shipped deploy/nginx/mulo-grpc.conf.template, a steady
// closed-loop load through clients with the shipped retry policy (client/retry_policy.h),
// SIGTERM to one replica, the replica back on its port, then the same for the other. Every
// request must succeed, and each replica process must have served some. Loopback only.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_replace.h"
#include "client/retry_policy.h"
#include "tests/server/grpc_calls.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {


// Whether something accepts connections on the loopback port.
bool Accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return ok;
}

// nginx in the foreground with the shipped snippet, rendered for two local replicas.
class Nginx {
 public:
  static std::unique_ptr<Nginx> Start(int replica_1, int replica_2) {
    auto nginx = std::unique_ptr<Nginx>(new Nginx());
    const std::string dir = TestTempDir();
    nginx->port_ = FreeLoopbackPort();
    const std::string snippet = absl::StrReplaceAll(
        ReadTextFile("deploy/nginx/mulo-grpc.conf.template"),
        {{"${MULO_LISTEN}", absl::StrCat("127.0.0.1:", nginx->port_)},
         {"${MULO_REPLICA_1}", absl::StrCat("127.0.0.1:", replica_1)},
         {"${MULO_REPLICA_2}", absl::StrCat("127.0.0.1:", replica_2)}});
    std::ofstream(dir + "/mulo-grpc.conf") << snippet;
    nginx->error_log_ = dir + "/nginx-error.log";
    std::ofstream(dir + "/nginx.conf") << absl::StrCat(
        "daemon off;\nworker_processes 1;\npid ", dir, "/nginx.pid;\nerror_log ",
        nginx->error_log_, " info;\nevents { worker_connections 512; }\nhttp {\n  access_log off;\n",
        "  client_body_temp_path ", dir, "/body;\n  proxy_temp_path ", dir, "/proxy;\n",
        "  fastcgi_temp_path ", dir, "/fastcgi;\n  uwsgi_temp_path ", dir, "/uwsgi;\n",
        "  scgi_temp_path ", dir, "/scgi;\n  include ", dir, "/mulo-grpc.conf;\n}\n");
    nginx->pid_ = fork();
    if (nginx->pid_ == 0) {
      const std::string conf = dir + "/nginx.conf";
      execl("/usr/sbin/nginx", "nginx", "-p", dir.c_str(), "-c", conf.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100 && !Accepts(nginx->port_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return nginx;
  }
  ~Nginx() {
    if (pid_ > 0) {
      kill(pid_, SIGQUIT);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  std::string ErrorLog() const { return ReadTextFile(error_log_); }

 private:
  Nginx() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string error_log_;
};

int CountOk(const std::string& log) {
  int count = 0;
  for (size_t at = log.find("status=OK"); at != std::string::npos; at = log.find("status=OK", at + 1)) {
    ++count;
  }
  return count;
}

TEST(RollingRestartTest, ZeroFailedRequestsThroughTwoRestartsBehindNginx) {
  ASSERT_EQ(access("/usr/sbin/nginx", X_OK), 0) << "nginx missing: run tools/setup.sh";
  const std::vector<std::string> flags = {kRepository[0], "--drain_timeout=30s"};
  auto a = ServerProcess::Start(flags);
  auto b = ServerProcess::Start(flags);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  const int port_a = (*a)->port(), port_b = (*b)->port();
  auto nginx = Nginx::Start(port_a, port_b);
  ASSERT_TRUE(Accepts(nginx->port())) << nginx->ErrorLog();

  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(client::RetryServiceConfig(5));
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", nginx->port()),
                                           grpc::InsecureChannelCredentials(), args);
  const auto start = std::chrono::steady_clock::now();
  std::atomic<bool> stop{false};
  std::atomic<int> succeeded{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      auto stub = v1::ImageGeneration::NewStub(channel);
      for (uint64_t seed = 1000 * c; !stop; ++seed) {
        const StreamResult result = RunStream(*stub, ValidRequest(seed), 60);
        if (result.status.ok() && result.image.has_value()) {
          ++succeeded;
        } else {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(absl::StrCat(
              result.status.error_code(), " ", result.status.error_message(), " at ",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              " s, after ", result.rows.size(), " rows"));
        }
      }
    });
  }
  std::vector<std::string> logs;
  // Restarts one replica on its port: SIGTERM (drain, exit 0), then a new process.
  auto restart = [&](std::unique_ptr<ServerProcess>& replica, int port) {
    replica->Signal(SIGTERM);
    EXPECT_EQ(replica->Wait(60), 0) << replica->Log();
    logs.push_back(replica->Log());
    std::vector<std::string> same_port = flags;
    same_port.push_back(absl::StrCat("--port=", port));
    auto back = ServerProcess::Start(same_port);
    ASSERT_TRUE(back.ok()) << back.status();
    replica = *std::move(back);
  };
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int before = succeeded;
  restart(*a, port_a);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  restart(*b, port_b);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  stop = true;
  for (std::thread& t : clients) t.join();
  logs.push_back((*a)->Log());
  logs.push_back((*b)->Log());

  std::printf("%d requests succeeded, %zu failed, over two restarts\n", succeeded.load(),
              failures.size());
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed: "
                                << absl::StrJoin(failures, "; ") << "\n"
                                << nginx->ErrorLog();
  if (!failures.empty()) {
    for (const std::string& log : logs) {
      for (absl::string_view line : absl::StrSplit(log, '\n')) {
        if (!absl::StrContains(line, "status=OK")) std::printf("%s\n", std::string(line).c_str());
      }
    }
  }
  EXPECT_GT(before, 0);
  EXPECT_GT(succeeded, 20);
  // Every replica process served: the first two before their restart, the new ones after.
  for (size_t i = 0; i < logs.size(); ++i) EXPECT_GT(CountOk(logs[i]), 0) << "process " << i;
}

}  // namespace
}  // namespace mulo::testing
