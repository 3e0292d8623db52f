// Registry semantics: metric values, label children, name validation, histogram buckets,
// collectors, and exact totals under concurrent use.
#include "server/metrics/registry.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/exposition.h"
#include "server/metrics/names.h"

namespace mulo::server::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CounterTest, IncrementsAndIgnoresNegativeAndNan) {
  Counter counter;
  EXPECT_EQ(counter.Value(), 0.0);
  counter.Inc();
  counter.Inc(2.5);
  counter.Inc(0.0);
  counter.Inc(-1.0);  // Ignored: counters never go down.
  counter.Inc(NAN);   // Ignored.
  EXPECT_EQ(counter.Value(), 3.5);
}

TEST(GaugeTest, SetIncDec) {
  Gauge gauge;
  gauge.Set(10);
  gauge.Inc();
  gauge.Inc(4.5);
  gauge.Dec();
  gauge.Dec(20);
  EXPECT_EQ(gauge.Value(), -5.5);
  gauge.Set(-0.25);
  EXPECT_EQ(gauge.Value(), -0.25);
}

TEST(HistogramTest, BucketsAreCumulativeAndInclusive) {
  Histogram histogram({1.0, 2.0, 4.0});
  for (double v : {0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 4.5, 100.0}) histogram.Observe(v);
  MetricSnapshot snapshot;
  histogram.CollectInto(&snapshot);
  // le="1": 0.5, 1 | le="2": +1.5, 2 | le="4": +3, 4 | +Inf: +4.5, 100.
  EXPECT_THAT(snapshot.cumulative_counts, ElementsAre(2, 4, 6));
  EXPECT_EQ(snapshot.count, 8u);
  EXPECT_EQ(snapshot.sum, 116.5);
}

TEST(HistogramTest, NanGoesToInfBucketOnly) {
  Histogram histogram({1.0});
  histogram.Observe(NAN);
  histogram.Observe(-3.0);
  MetricSnapshot snapshot;
  histogram.CollectInto(&snapshot);
  EXPECT_THAT(snapshot.cumulative_counts, ElementsAre(1));
  EXPECT_EQ(snapshot.count, 2u);
  EXPECT_TRUE(std::isnan(snapshot.sum));
}

TEST(HistogramTest, NoFiniteBucketsCountsInInf) {
  Registry registry;
  absl::StatusOr<HistogramFamily*> family =
      registry.AddHistogram("x_seconds", "X.", {}, {INFINITY});  // Trailing +Inf dropped.
  ASSERT_TRUE(family.ok()) << family.status();
  (*family)->WithLabels({}).Observe(7);
  EXPECT_EQ(SerializeText(registry),
            "# HELP x_seconds X.\n# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"+Inf\"} 1\nx_seconds_sum 7\nx_seconds_count 1\n");
}

TEST(FamilyTest, WithLabelsReturnsStableChildPerLabelTuple) {
  Registry registry;
  absl::StatusOr<CounterFamily*> family =
      registry.AddCounter("mulo_requests_total", "Requests.", {"model", "method", "code"});
  ASSERT_TRUE(family.ok()) << family.status();
  Counter& ok = (*family)->WithLabels({"synth", "ar", "OK"});
  Counter& cancelled = (*family)->WithLabels({"synth", "ar", "CANCELLED"});
  EXPECT_NE(&ok, &cancelled);
  // Many more children must not move the first ones.
  for (int i = 0; i < 1000; ++i) (*family)->WithLabels({"m", "x", std::to_string(i)}).Inc();
  EXPECT_EQ(&ok, &(*family)->WithLabels({"synth", "ar", "OK"}));
  ok.Inc(2);
  EXPECT_EQ((*family)->WithLabels({"synth", "ar", "OK"}).Value(), 2);
  EXPECT_EQ(cancelled.Value(), 0);
}

TEST(FamilyDeathTest, WrongNumberOfLabelValuesAborts) {
  Registry registry;
  CounterFamily* family = *registry.AddCounter("a_total", "A.", {"model", "code"});
  EXPECT_DEATH(family->WithLabels({"synth"}),
               "a_total: WithLabels got 1 label values, the family has 2 label names");
}

TEST(NamesTest, MetricNames) {
  for (const char* name : {"a", "_a", ":a", "mulo_requests_total", "a:b_c9", "A"}) {
    EXPECT_TRUE(IsValidMetricName(name)) << name;
  }
  for (const char* name : {"", "9a", "a-b", "a.b", "a b", "é", "a\n"}) {
    EXPECT_FALSE(IsValidMetricName(name)) << name;
  }
}

TEST(NamesTest, LabelNames) {
  for (const char* name : {"a", "_a", "model", "le", "a_9", "_"}) {
    EXPECT_TRUE(IsValidLabelName(name)) << name;
  }
  for (const char* name : {"", "__a", "__", "9a", "a:b", "a-b", "a b"}) {
    EXPECT_FALSE(IsValidLabelName(name)) << name;
  }
}

TEST(RegistryTest, RejectsInvalidNames) {
  Registry registry;
  EXPECT_EQ(registry.AddCounter("bad-name_total", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status reserved = registry.AddGauge("g", "x", {"__reserved"}).status();
  EXPECT_EQ(reserved.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(reserved.message(), HasSubstr("__reserved"));
  EXPECT_EQ(registry.AddGauge("g", "x", {"a", "a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("h_seconds", "x", {"le"}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A failed registration reserves nothing.
  EXPECT_TRUE(registry.AddGauge("g", "x", {"a"}).ok());
}

TEST(RegistryTest, RejectsBadBuckets) {
  Registry registry;
  for (std::vector<double> bounds : std::vector<std::vector<double>>{
           {1, 1}, {2, 1}, {NAN}, {-INFINITY, 1}, {1, INFINITY, 2}}) {
    EXPECT_EQ(registry.AddHistogram("h_seconds", "x", {}, bounds).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(registry.AddHistogram("h_seconds", "x", {}, {-1, 0, 0.5}).ok());
}

TEST(RegistryTest, RejectsDuplicateAndCollidingSampleNames) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("a_total", "A.").ok());
  EXPECT_EQ(registry.AddGauge("a_total", "A.").status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.AddHistogram("lat_seconds", "L.", {}, {1}).ok());
  EXPECT_EQ(registry.AddCounter("lat_seconds_count", "C.").status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.AddGauge("q_sum", "Q.").ok());
  EXPECT_EQ(registry.AddHistogram("q", "Q.", {}, {1}).status().code(),
            absl::StatusCode::kAlreadyExists);
}

// Returns a fixed set of families, one of them undescribed and one child malformed.
class FakeCollector : public Collector {
 public:
  std::vector<std::string> Describe() const override { return {"fake_info", "a_gauge"}; }
  std::vector<FamilySnapshot> Collect() const override {
    FamilySnapshot info;
    info.name = "fake_info";
    info.help = "Fake.";
    info.label_names = {"k"};
    info.metrics.resize(3);
    info.metrics[0].label_values = {"z"};
    info.metrics[1].label_values = {"a"};
    info.metrics[2].label_values = {"too", "many"};  // Dropped.
    FamilySnapshot undescribed;
    undescribed.name = "undescribed";
    undescribed.metrics.resize(1);
    return {info, undescribed};
  }
};

TEST(RegistryTest, CollectorsAreMergedSortedAndChecked) {
  Registry registry;
  ASSERT_TRUE(registry.AddGauge("z_gauge", "Z.").ok());
  ASSERT_TRUE(registry.AddGauge("b_gauge", "B.").ok());
  // Its names collide with nothing yet, but "a_gauge" blocks later registrations.
  ASSERT_TRUE(registry.AddCollector(std::make_unique<FakeCollector>()).ok());
  EXPECT_EQ(registry.AddGauge("a_gauge", "A.").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCollector(std::make_unique<FakeCollector>()).code(),
            absl::StatusCode::kAlreadyExists);

  std::vector<FamilySnapshot> families = registry.Collect();
  std::vector<std::string> names;
  for (const FamilySnapshot& family : families) names.push_back(family.name);
  EXPECT_THAT(names, ElementsAre("b_gauge", "fake_info", "z_gauge"));
  ASSERT_EQ(families[1].metrics.size(), 2u);
  EXPECT_THAT(families[1].metrics[0].label_values, ElementsAre("a"));
  EXPECT_THAT(families[1].metrics[1].label_values, ElementsAre("z"));
}

// 8 threads x 10000 updates on shared children, created concurrently, while another
// thread scrapes: every total must be exact.
TEST(RegistryTest, ConcurrentUpdatesGiveExactTotals) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 10000;
  Registry registry;
  CounterFamily* counters = *registry.AddCounter("c_total", "C.", {"shard"});
  GaugeFamily* gauges = *registry.AddGauge("g", "G.");
  HistogramFamily* histograms = *registry.AddHistogram("h_seconds", "H.", {"shard"}, {0.5});

  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) SerializeText(registry);
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        // Four shards shared by all threads: children are created under contention.
        const std::string shard = std::to_string((t + i) % 4);
        counters->WithLabels({shard}).Inc();
        gauges->WithLabels({}).Inc(t % 2 == 0 ? 2.0 : -1.0);
        histograms->WithLabels({shard}).Observe(i % 2 == 0 ? 0.25 : 1.0);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  scraper.join();

  double counter_total = 0;
  uint64_t count_total = 0, low_total = 0;
  double sum_total = 0;
  for (int shard = 0; shard < 4; ++shard) {
    const std::string label = std::to_string(shard);
    counter_total += counters->WithLabels({label}).Value();
    MetricSnapshot snapshot;
    histograms->WithLabels({label}).CollectInto(&snapshot);
    count_total += snapshot.count;
    low_total += snapshot.cumulative_counts[0];
    sum_total += snapshot.sum;
  }
  EXPECT_EQ(counter_total, kThreads * kIterations);
  EXPECT_EQ(gauges->WithLabels({}).Value(), (kThreads / 2) * kIterations * (2.0 - 1.0));
  EXPECT_EQ(count_total, uint64_t{kThreads * kIterations});
  EXPECT_EQ(low_total, uint64_t{kThreads * kIterations / 2});
  EXPECT_EQ(sum_total, kThreads * kIterations / 2 * (0.25 + 1.0));
}

}  // namespace
}  // namespace mulo::server::metrics
