#include "tests/server/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/server/metrics/http_client.h"

namespace mulo::testing {
std::string TestTempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

std::string WriteTestFile(const std::string& name, const std::string& text) {
  const std::string path = TestTempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& flags) {
  static int counter = 0;
  auto process = std::unique_ptr<ServerProcess>(new ServerProcess());
  process->log_path_ = absl::StrCat(TestTempDir(), "/mulo_server_", getpid(), "_", counter++, ".log");
  int out_pipe[2];
  if (pipe(out_pipe) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> args = {"server/mulo_server", "--host=127.0.0.1", "--port=0",
                                   "--metrics_port=0", "--http_port=0"};
  args.insert(args.end(), flags.begin(), flags.end());
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // A test that dies (a crash, a signal) takes its server with it instead of leaving it
    // listening.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_pipe[1], STDOUT_FILENO);
    const int log = open(process->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, STDERR_FILENO);
    close(out_pipe[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  process->pid_ = pid;
  close(out_pipe[1]);
  FILE* out = fdopen(out_pipe[0], "r");
  char line[256] = "";
  // "mulo_server HTTP API on port N" comes first unless a flag turned the HTTP API off.
  if (fgets(line, sizeof(line), out) != nullptr &&
      sscanf(line, "mulo_server HTTP API on port %d", &process->http_port_) == 1 &&
      fgets(line, sizeof(line), out) == nullptr) {
    line[0] = '\0';
  }
  if (sscanf(line, "mulo_server listening on port %d (metrics on port %d)", &process->port_,
             &process->metrics_port_) != 2) {
    fclose(out);
    return absl::InternalError(absl::StrCat("server did not start: ", process->Log()));
  }
  fclose(out);
  for (int i = 0; i < 600; ++i) {  // up to 60 s for the models to load
    auto ready = server::metrics::testing::HttpGet(process->metrics_port_, "/readyz");
    if (ready.ok() && ready->status == 200) return process;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      process->pid_ = -1;
      return absl::InternalError(absl::StrCat("server exited while loading: ", process->Log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError("server never became ready");
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::unique_ptr<v1::ImageGeneration::Stub> ServerProcess::NewStub() const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  return v1::ImageGeneration::NewStub(
      grpc::CreateCustomChannel(address(), grpc::InsecureChannelCredentials(), args));
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int ServerProcess::Wait(double timeout_seconds) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  while (pid_ > 0 && std::chrono::steady_clock::now() < end) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string ServerProcess::Log() const { return ReadTextFile(log_path_); }

double ServerProcess::MetricSum(const std::string& name,
                                const std::vector<std::string>& fragments) const {
  auto response = server::metrics::testing::HttpGet(metrics_port_, "/metrics");
  if (!response.ok() || response->status != 200) return -1;
  double sum = 0;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(response->body, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    if (!absl::StartsWith(line, name) ||
        (line.size() > name.size() && line[name.size()] != '{' && line[name.size()] != ' ')) {
      continue;
    }
    bool all = true;
    for (const auto& f : fragments) all = all && absl::StrContains(line, f);
    if (!all) continue;
    sum += std::strtod(std::string(line.substr(line.rfind(' ') + 1)).c_str(), nullptr);
    found = true;
  }
  return found ? sum : -1;
}

}  // namespace mulo::testing
