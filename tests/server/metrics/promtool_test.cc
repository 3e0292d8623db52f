// Checks our exposition with the real Prometheus tooling: `promtool check metrics` parses
// the text and lints it (counter names end in _total, base units, help present, ...).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/metrics/exposition.h"
#include "server/metrics/process_collector.h"
#include "server/metrics/registry.h"

namespace mulo::server::metrics {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr.
};

// Runs `promtool check metrics < file` and captures its verdict.
CommandResult CheckMetrics(const std::string& exposition, const std::string& name) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name, ".prom");
  {
    std::ofstream out(path);
    out << exposition;
  }
  CommandResult result;
  FILE* pipe =
      popen(absl::StrCat(kPromtool, " check metrics < '", path, "' 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class PromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Not a skip: without promtool this suite would prove nothing.
    ASSERT_EQ(access(kPromtool, X_OK), 0)
        << kPromtool << " not found: run tools/setup.sh (installs the Debian package "
        << "prometheus)";
  }
};

TEST_F(PromtoolTest, ExpositionOfEveryMetricTypeIsLintClean) {
  Registry registry;
  CounterFamily* requests = *registry.AddCounter(
      "mulo_requests_total", "Requests by model, method and gRPC code.",
      {"model", "method", "code"});
  CounterFamily* tokens =
      *registry.AddCounter("mulo_generated_tokens_total", "Image tokens generated.");
  GaugeFamily* loaded = *registry.AddGauge("mulo_model_loaded",
                                           "1 while the model is loaded.\nSecond \\ line.",
                                           {"model"});
  GaugeFamily* queue = *registry.AddGauge("mulo_queue_depth", "Requests waiting to run.");
  HistogramFamily* latency = *registry.AddHistogram(
      "mulo_request_duration_seconds", "End-to-end request latency.", {"method"},
      {0.005, 0.01, 0.1, 1, 10, 60});
  HistogramFamily* accepted = *registry.AddHistogram(
      "mulo_spec_accepted_length", "Tokens accepted per verification step.", {},
      {1, 2, 4, 8, 16});
  ASSERT_TRUE(registry.AddCollector(std::make_unique<ProcessCollector>()).ok());

  requests->WithLabels({"synth", "ar", "OK"}).Inc(12);
  // Values that need escaping: quote, backslash, newline.
  requests->WithLabels({"we\"ird\\model\nname", "mulo_sd", "CANCELLED"}).Inc();
  tokens->WithLabels({}).Inc(1024);
  loaded->WithLabels({"synth"}).Set(1);
  loaded->WithLabels({"C:\\models\\\"x\""}).Set(0);
  queue->WithLabels({}).Set(3);
  for (double v : {0.001, 0.02, 0.5, 2.0, 100.0}) latency->WithLabels({"ar"}).Observe(v);
  for (double v : {1.0, 3.0, 3.0, 16.0}) accepted->WithLabels({}).Observe(v);

  const std::string text = SerializeText(registry);
  const CommandResult result = CheckMetrics(text, "all_types");
  std::printf("promtool check metrics: exit %d, output: \"%s\"\n", result.exit_code,
              result.output.c_str());
  EXPECT_EQ(result.exit_code, 0) << result.output << "\n--- input ---\n" << text;
  EXPECT_EQ(result.output, "") << "\n--- input ---\n" << text;
  // The process metrics really were part of the checked text.
  EXPECT_NE(text.find("process_start_time_seconds "), std::string::npos);
  EXPECT_NE(text.find("process_open_fds "), std::string::npos);
}

// Guards against a vacuous pass (e.g. promtool reading nothing): a name the linter must
// flag is flagged.
TEST_F(PromtoolTest, PromtoolFlagsCounterWithoutTotalSuffix) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("mulo_requests", "Badly named counter.").ok());
  const CommandResult result = CheckMetrics(SerializeText(registry), "bad_name");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("_total"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace mulo::server::metrics
