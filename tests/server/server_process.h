// Runs mulo_server as a child process on free loopback ports for integration tests.
#ifndef MULO_TESTS_SERVER_SERVER_PROCESS_H_
#define MULO_TESTS_SERVER_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "mulo/v1/image_generation.grpc.pb.h"

namespace mulo::testing {

// $TEST_TMPDIR (Bazel's per-test scratch directory), or /tmp outside Bazel.
std::string TestTempDir();
// A loopback port nothing listens on right now (bound, read, released).
int FreeLoopbackPort();
// A whole file's text ("" when it cannot be read).
std::string ReadTextFile(const std::string& path);
// Writes `text` to TestTempDir()/name (replacing it) and returns the path.
std::string WriteTestFile(const std::string& name, const std::string& text);

class ServerProcess {
 public:
  // Starts server/mulo_server (from the test's runfiles) with `flags` plus
  // --host=127.0.0.1 --port=0 --metrics_port=0 --http_port=0, and waits until it prints its
  // ports and /readyz answers 200 (models loaded).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const std::vector<std::string>& flags);
  ~ServerProcess();  // SIGKILL if still running

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  int metrics_port() const { return metrics_port_; }
  // The OpenAI-compatible HTTP API's port (0 when a flag turned it off).
  int http_port() const { return http_port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::unique_ptr<v1::ImageGeneration::Stub> NewStub() const;

  void Signal(int signal);
  // Waits for the process to exit (up to timeout_seconds); returns its exit code, or -1.
  int Wait(double timeout_seconds);
  // The server's stderr so far (request log lines, lifecycle messages).
  std::string Log() const;

  // Sum of the samples of metric `name` in /metrics whose line contains every one of
  // `fragments` (e.g. {"code=\"OK\""}); -1 when there is none.
  double MetricSum(const std::string& name, const std::vector<std::string>& fragments) const;

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = 0;
  std::string log_path_;
};

}  // namespace mulo::testing

#endif  // MULO_TESTS_SERVER_SERVER_PROCESS_H_
