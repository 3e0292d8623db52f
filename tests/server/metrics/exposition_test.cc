// Exact text of the exposition format, escaping, number formatting and process metrics.
#include "server/metrics/exposition.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/process_collector.h"
#include "server/metrics/registry.h"

namespace mulo::server::metrics {
namespace {

using ::testing::ElementsAre;

TEST(ExpositionTest, GoldenTextForSmallRegistry) {
  Registry registry;
  CounterFamily* requests = *registry.AddCounter(
      "mulo_requests_total", "Requests by outcome.", {"model", "method", "code"});
  GaugeFamily* queue = *registry.AddGauge("mulo_queue_depth", "Requests waiting.");
  HistogramFamily* latency = *registry.AddHistogram(
      "mulo_request_latency_seconds", "End-to-end latency.", {"method"}, {0.125, 1, 16});
  // Labelled but never used: no series, so not exported.
  ASSERT_TRUE(registry.AddGauge("mulo_model_loaded", "Loaded models.", {"model"}).ok());

  requests->WithLabels({"synth", "ar", "OK"}).Inc(3);
  requests->WithLabels({"synth", "ar", "CANCELLED"}).Inc();
  queue->WithLabels({}).Set(2.5);
  for (double v : {0.0625, 0.5, 4.0, 64.0}) latency->WithLabels({"ar"}).Observe(v);

  EXPECT_EQ(SerializeText(registry),
            "# HELP mulo_queue_depth Requests waiting.\n"
            "# TYPE mulo_queue_depth gauge\n"
            "mulo_queue_depth 2.5\n"
            "# HELP mulo_request_latency_seconds End-to-end latency.\n"
            "# TYPE mulo_request_latency_seconds histogram\n"
            "mulo_request_latency_seconds_bucket{method=\"ar\",le=\"0.125\"} 1\n"
            "mulo_request_latency_seconds_bucket{method=\"ar\",le=\"1\"} 2\n"
            "mulo_request_latency_seconds_bucket{method=\"ar\",le=\"16\"} 3\n"
            "mulo_request_latency_seconds_bucket{method=\"ar\",le=\"+Inf\"} 4\n"
            "mulo_request_latency_seconds_sum{method=\"ar\"} 68.5625\n"
            "mulo_request_latency_seconds_count{method=\"ar\"} 4\n"
            "# HELP mulo_requests_total Requests by outcome.\n"
            "# TYPE mulo_requests_total counter\n"
            "mulo_requests_total{model=\"synth\",method=\"ar\",code=\"CANCELLED\"} 1\n"
            "mulo_requests_total{model=\"synth\",method=\"ar\",code=\"OK\"} 3\n");
}

TEST(ExpositionTest, UnlabelledFamiliesExportZeroFromTheStart) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("a_total", "A.").ok());
  EXPECT_EQ(SerializeText(registry), "# HELP a_total A.\n# TYPE a_total counter\na_total 0\n");
}

TEST(ExpositionTest, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeHelp("say \"hi\"\\\nbye"), "say \"hi\"\\\\\\nbye");

  Registry registry;
  CounterFamily* family = *registry.AddCounter("e_total", "Line one\nback\\slash.", {"v"});
  family->WithLabels({"q\"uote\\back\nline"}).Inc();
  EXPECT_EQ(SerializeText(registry),
            "# HELP e_total Line one\\nback\\\\slash.\n"
            "# TYPE e_total counter\n"
            "e_total{v=\"q\\\"uote\\\\back\\nline\"} 1\n");
}

TEST(ExpositionTest, FormatsValuesShortestRoundTrip) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(80000), "80000");
  EXPECT_EQ(FormatValue(-2.5), "-2.5");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1e-05), "1e-05");
  EXPECT_EQ(FormatValue(1.5e300), "1.5e+300");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(NAN), "NaN");
  const double third = 1.0 / 3.0;
  EXPECT_EQ(std::strtod(FormatValue(third).c_str(), nullptr), third);
}

TEST(ExpositionTest, ChildrenSortedByLabelValues) {
  Registry registry;
  GaugeFamily* family = *registry.AddGauge("g", "G.", {"a", "b"});
  family->WithLabels({"y", "1"}).Set(1);
  family->WithLabels({"x", "2"}).Set(2);
  family->WithLabels({"x", "10"}).Set(3);
  EXPECT_EQ(SerializeText(registry),
            "# HELP g G.\n# TYPE g gauge\n"
            "g{a=\"x\",b=\"10\"} 3\ng{a=\"x\",b=\"2\"} 2\ng{a=\"y\",b=\"1\"} 1\n");
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path);
  out << content;
  ASSERT_TRUE(out.good()) << path;
}

// A fake procfs with known numbers gives exact values.
TEST(ProcessCollectorTest, ReadsFakeProcfs) {
  const std::string root = absl::StrCat(std::getenv("TEST_TMPDIR"), "/fakeproc");
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/self").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/self/fd").c_str(), 0755), 0);
  for (const char* fd : {"0", "1", "2", "7"}) WriteFile(root + "/self/fd/" + fd, "");
  // The command name holds spaces and parentheses, as a real one may. Fields (proc(5)):
  // 14 utime 250, 15 stime 150, 22 starttime 5000, 23 vsize 104857600, 24 rss 2560.
  WriteFile(root + "/self/stat",
            "4321 (my (odd) proc) S 1 4321 4321 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 4 0 "
            "5000 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0\n");
  WriteFile(root + "/stat", "cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n");
  WriteFile(root + "/self/limits",
            "Limit                     Soft Limit           Hard Limit           Units\n"
            "Max open files            1024                 524288               files\n");

  const double ticks = sysconf(_SC_CLK_TCK);
  const double page = sysconf(_SC_PAGESIZE);
  Registry registry;
  ASSERT_TRUE(registry.AddCollector(std::make_unique<ProcessCollector>(root)).ok());
  EXPECT_EQ(SerializeText(registry),
            absl::StrCat(
                "# HELP process_cpu_seconds_total Total user and system CPU time spent in "
                "seconds.\n# TYPE process_cpu_seconds_total counter\n"
                "process_cpu_seconds_total ", FormatValue(400 / ticks), "\n"
                "# HELP process_max_fds Maximum number of open file descriptors.\n"
                "# TYPE process_max_fds gauge\nprocess_max_fds 1024\n"
                "# HELP process_open_fds Number of open file descriptors.\n"
                "# TYPE process_open_fds gauge\nprocess_open_fds 4\n"
                "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                "# TYPE process_resident_memory_bytes gauge\n"
                "process_resident_memory_bytes ", FormatValue(2560 * page), "\n"
                "# HELP process_start_time_seconds Start time of the process since unix "
                "epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
                "process_start_time_seconds ", FormatValue(1700000000 + 5000 / ticks), "\n"
                "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                "# TYPE process_virtual_memory_bytes gauge\n"
                "process_virtual_memory_bytes 104857600\n"));
}

TEST(ProcessCollectorTest, MissingProcfsGivesNoFamilies) {
  ProcessCollector collector("/nonexistent-proc-root");
  EXPECT_TRUE(collector.Collect().empty());
}

TEST(ProcessCollectorTest, RealProcfsGivesPlausibleValues) {
  ProcessCollector collector;
  std::vector<FamilySnapshot> families = collector.Collect();
  std::vector<std::string> names;
  for (const FamilySnapshot& family : families) {
    names.push_back(family.name);
    ASSERT_EQ(family.metrics.size(), 1u) << family.name;
    const double value = family.metrics[0].value;
    if (family.name == "process_cpu_seconds_total") {
      EXPECT_GE(value, 0) << family.name;
    } else if (family.name == "process_start_time_seconds") {
      const double now = std::time(nullptr);
      EXPECT_GT(value, now - 3600) << "the test process started within the hour";
      EXPECT_LE(value, now + 1);
    } else {
      EXPECT_GT(value, 0) << family.name;
    }
  }
  EXPECT_THAT(names, ElementsAre("process_cpu_seconds_total", "process_resident_memory_bytes",
                                 "process_virtual_memory_bytes", "process_start_time_seconds",
                                 "process_open_fds", "process_max_fds"));
}

}  // namespace
}  // namespace mulo::server::metrics
