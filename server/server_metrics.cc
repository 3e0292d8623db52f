#include "server/server_metrics.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "engine/decode/method_registry.h"
#include "server/metrics/process_collector.h"

namespace mulo::server {
namespace {

// Registration only fails on a malformed or duplicate name, i.e. a bug in this file.
template <typename T>
T* OrDie(absl::StatusOr<T*> family) {
  if (!family.ok()) {
    std::fprintf(stderr, "metrics: %s\n", family.status().ToString().c_str());
    std::abort();
  }
  return *family;
}

// Queue depth and running requests, read from the scheduler when Prometheus scrapes, so the
// gauges are exact at scrape time instead of lagging behind the last request event.
class QueueCollector : public metrics::Collector {
 public:
  explicit QueueCollector(std::function<std::pair<int, int>()> probe) : probe_(std::move(probe)) {}
  std::vector<std::string> Describe() const override {
    return {"mulo_queue_depth", "mulo_requests_running"};
  }
  std::vector<metrics::FamilySnapshot> Collect() const override {
    const auto [depth, running] = probe_();
    metrics::FamilySnapshot queue{"mulo_queue_depth",
                                  "Requests waiting for a worker.",
                                  metrics::MetricType::kGauge,
                                  {},
                                  {},
                                  {}};
    queue.metrics.push_back(metrics::MetricSnapshot{{}, static_cast<double>(depth)});
    metrics::FamilySnapshot run{"mulo_requests_running",
                                "Requests being decoded.",
                                metrics::MetricType::kGauge,
                                {},
                                {},
                                {}};
    run.metrics.push_back(metrics::MetricSnapshot{{}, static_cast<double>(running)});
    return {queue, run};
  }

 private:
  std::function<std::pair<int, int>()> probe_;
};

// The workers' KV-cache pools, read when Prometheus scrapes.
class KvPoolCollector : public metrics::Collector {
 public:
  explicit KvPoolCollector(std::function<std::vector<ServerMetrics::KvPoolReading>()> probe)
      : probe_(std::move(probe)) {}
  std::vector<std::string> Describe() const override {
    return {"mulo_kv_cache_slots", "mulo_kv_cache_used_slots", "mulo_kv_cache_usage_ratio",
            "mulo_kv_cache_bytes", "mulo_kv_cache_overflows_total"};
  }
  std::vector<metrics::FamilySnapshot> Collect() const override {
    const std::vector<std::string> labels = {"model", "component", "worker"};
    auto family = [&](const char* name, const char* help, metrics::MetricType type) {
      return metrics::FamilySnapshot{name, help, type, labels, {}, {}};
    };
    std::vector<metrics::FamilySnapshot> out = {
        family("mulo_kv_cache_slots",
               "KV-cache slots (one guidance stream each) a worker's pool holds, allocated at "
               "load.",
               metrics::MetricType::kGauge),
        family("mulo_kv_cache_used_slots", "KV-cache slots reserved by running requests.",
               metrics::MetricType::kGauge),
        family("mulo_kv_cache_usage_ratio",
               "Reserved over allocated KV-cache slots: at 1 new requests wait in the queue.",
               metrics::MetricType::kGauge),
        family("mulo_kv_cache_bytes", "Device memory a worker's KV-cache pool takes.",
               metrics::MetricType::kGauge),
        family("mulo_kv_cache_overflows_total",
               "Caches that outgrew their slots and moved to memory of their own (slower).",
               metrics::MetricType::kCounter)};
    for (const ServerMetrics::KvPoolReading& r : probe_()) {
      const std::vector<std::string> values = {r.model, r.component, std::to_string(r.worker)};
      const double ratio = r.slots > 0 ? static_cast<double>(r.used) / r.slots : 0.0;
      const double numbers[] = {static_cast<double>(r.slots), static_cast<double>(r.used), ratio,
                                static_cast<double>(r.bytes), static_cast<double>(r.overflows)};
      for (size_t i = 0; i < out.size(); ++i) {
        out[i].metrics.push_back(metrics::MetricSnapshot{values, numbers[i]});
      }
    }
    return out;
  }

 private:
  std::function<std::vector<ServerMetrics::KvPoolReading>()> probe_;
};

}  // namespace

ServerMetrics::ServerMetrics() {
  AddRequestSeries();
  AddSpeculativeSeries();
  AddLatencySeries();
  AddBatchAndModelSeries();
  if (auto st = registry_.AddCollector(std::make_unique<metrics::ProcessCollector>()); !st.ok()) {
    std::fprintf(stderr, "metrics: %s\n", st.ToString().c_str());
    std::abort();
  }
}

void ServerMetrics::AddRequestSeries() {
  const std::vector<std::string> mm = {"model", "method"};
  requests_ = OrDie(registry_.AddCounter(
      "mulo_requests_total",
      "Generate requests by final status code (gRPC's names, for HTTP too) and front end.",
      {"model", "method", "code", "protocol"}));
  generated_tokens_ =
      OrDie(registry_.AddCounter("mulo_generated_tokens_total", "Image tokens generated.", mm));
  target_forwards_ = OrDie(registry_.AddCounter("mulo_target_forward_passes_total",
                                                "Forward passes of the target model.", mm));
  draft_forwards_ = OrDie(
      registry_.AddCounter("mulo_draft_forward_passes_total", "Forward passes of drafters.", mm));
}

void ServerMetrics::AddSpeculativeSeries() {
  const std::vector<std::string> mm = {"model", "method"};
  drafted_ = OrDie(
      registry_.AddCounter("mulo_spec_drafted_tokens_total", "Tokens proposed by drafters.", mm));
  accepted_ = OrDie(registry_.AddCounter("mulo_spec_accepted_tokens_total",
                                         "Drafted tokens accepted by the target.", mm));
  resampled_ = OrDie(registry_.AddCounter("mulo_spec_resampled_tokens_total",
                                          "Tokens re-sampled by the target after rejection.", mm));
  relaxed_accepted_ = OrDie(registry_.AddCounter(
      "mulo_spec_relaxed_accepted_tokens_total",
      "Accepted drafts that only the relaxation (latent pooling) kept.", mm));
  pooled_drafts_ = OrDie(registry_.AddCounter(
      "mulo_spec_pooled_drafts_total",
      "Drafts judged with a pooled set (a relaxed method's latent neighbours or group).", mm));
  pooled_neighbors_ = OrDie(registry_.AddCounter(
      "mulo_spec_pooled_neighbors_total",
      "Tokens pooled with the drafts (|A| - 1 or |G| - 1 summed; over "
      "mulo_spec_pooled_drafts_total: the mean pooled set size).", mm));
  iterations_ = OrDie(registry_.AddCounter(
      "mulo_decode_iterations_total",
      "Decoding rounds after the prefill: draft-and-verify steps, or parallel decoding steps "
      "(mulo_spec_accepted_tokens_total over it: accepted drafts per round).",
      mm));
  tree_depth_ = OrDie(registry_.AddCounter(
      "mulo_spec_tree_depth_total",
      "Depths of the drafted trees, summed (over mulo_decode_iterations_total: the mean; "
      "adaptive trees vary it).",
      mm));
  tree_width_ = OrDie(registry_.AddCounter(
      "mulo_spec_tree_width_total",
      "Widths (top-k) of the drafted dynamic trees, summed (over mulo_decode_iterations_total: "
      "the mean).", mm));
  expansion_resampled_ = OrDie(registry_.AddCounter(
      "mulo_spec_expansion_resampled_tokens_total",
      "Accepted drafts re-sampled because they neighbour a rejection (a method's refinement).",
      mm));
  prefix_tokens_ = OrDie(registry_.AddCounter(
      "mulo_draft_prefix_tokens_total",
      "Drafter prefix tokens by source: own draws or re-derived by a down-sampler.",
      {"model", "method", "source"}));
  accepted_per_position_ = OrDie(
      registry_.AddCounter("mulo_spec_accepted_tokens_per_position_total",
                           "Drafted tokens accepted at each draft depth (chain and tree methods).",
                           {"model", "method", "position"}));
}

void ServerMetrics::AddLatencySeries() {
  const std::vector<std::string> mm = {"model", "method"};
  request_duration_ = OrDie(registry_.AddHistogram(
      "mulo_request_duration_seconds", "Time from arrival to the final status.", mm,
      {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300}));
  queue_duration_ = OrDie(
      registry_.AddHistogram("mulo_queue_duration_seconds", "Time requests waited for a worker.",
                             {"model"}, {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60}));
  first_row_ = OrDie(registry_.AddHistogram(
      "mulo_time_to_first_row_seconds", "Time from arrival to the first committed row.", mm,
      {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}));
  phase_duration_ = OrDie(registry_.AddHistogram(
      "mulo_phase_duration_seconds",
      "Time per request spent in each decoding phase (draft, verify, resample, ...).",
      {"model", "method", "phase"}, {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60}));
}

void ServerMetrics::AddBatchAndModelSeries() {
  batch_size_ = OrDie(registry_.AddHistogram(
      "mulo_batch_size",
      "Requests whose calls one batched forward carried, by component (transformer, "
      "eagle_head, resampler, sampler: the batched token draw).",
      {"component"}, {1, 2, 3, 4, 6, 8, 12, 16, 24, 32}));
  batch_rows_ = OrDie(registry_.AddHistogram(
      "mulo_batch_tokens",
      "Token rows (guidance streams x new positions; a resampler's output grid positions; "
      "the sampler's tokens drawn) per batched forward, by component.",
      {"component"}, {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}));
  model_loaded_ = OrDie(registry_.AddGauge(
      "mulo_model_loaded", "1 when the model family is loaded and served.", {"model"}));
  model_weight_bytes_ = OrDie(registry_.AddGauge(
      "mulo_model_weight_bytes",
      "Bytes the model family's resident weights (all components, compute dtype) and latent "
      "neighbour table take on the device.",
      {"model", "device"}));
}

void ServerMetrics::WatchQueue(std::function<std::pair<int, int>()> probe) {
  if (auto st = registry_.AddCollector(std::make_unique<QueueCollector>(std::move(probe)));
      !st.ok()) {
    std::fprintf(stderr, "metrics: %s\n", st.ToString().c_str());
    std::abort();
  }
}

void ServerMetrics::WatchKvPools(std::function<std::vector<KvPoolReading>()> probe) {
  if (auto st = registry_.AddCollector(std::make_unique<KvPoolCollector>(std::move(probe)));
      !st.ok()) {
    std::fprintf(stderr, "metrics: %s\n", st.ToString().c_str());
    std::abort();
  }
}

absl::StatusOr<int> ServerMetrics::StartHttp(const std::string& host, int port,
                                             metrics::MetricsHttpServer::ReadinessCheck is_ready) {
  http_ = std::make_unique<metrics::MetricsHttpServer>(&registry_, std::move(is_ready));
  if (absl::Status st = http_->Start(absl::StrCat(host, ":", port)); !st.ok()) return st;
  return http_->port();
}

void ServerMetrics::RecordBatch(const std::string& component, int64_t requests, int64_t rows) {
  batch_size_->WithLabels({component}).Observe(static_cast<double>(requests));
  batch_rows_->WithLabels({component}).Observe(static_cast<double>(rows));
}

void ServerMetrics::SetModelLoaded(const std::string& model, bool loaded) {
  {
    absl::MutexLock lock(&models_mu_);
    known_models_.insert(model);
  }
  model_loaded_->WithLabels({model}).Set(loaded ? 1.0 : 0.0);
}

void ServerMetrics::SetModelWeightBytes(const std::string& model, const std::string& device,
                                        int64_t bytes) {
  model_weight_bytes_->WithLabels({model, device}).Set(static_cast<double>(bytes));
}

std::string ServerMetrics::ModelLabel(const std::string& model) const {
  absl::MutexLock lock(&models_mu_);
  return known_models_.count(model) > 0 ? model : "unknown";
}

void ServerMetrics::RecordRequest(const RequestLogLine& line) {
  const std::string model = ModelLabel(line.model);
  const std::string method = line.method.empty() ? "unknown" : line.method;
  // A closed set of label values: the two front ends.
  const std::string protocol = line.protocol == "http" ? "http" : "grpc";
  requests_->WithLabels({model, method, absl::StatusCodeToString(line.status.code()), protocol})
      .Inc();
  request_duration_->WithLabels({model, method}).Observe(line.total_seconds);
  if (line.method.empty()) return;  // refused before it was queued
  const engine::Stats& s = line.stats;
  queue_duration_->WithLabels({model}).Observe(line.queue_seconds);
  if (line.first_row_seconds >= 0)
    first_row_->WithLabels({model, method}).Observe(line.first_row_seconds);
  generated_tokens_->WithLabels({model, method}).Inc(static_cast<double>(s.tokens));
  target_forwards_->WithLabels({model, method}).Inc(static_cast<double>(s.target_forward_passes));
  iterations_->WithLabels({model, method}).Inc(static_cast<double>(s.verify_steps));
  for (int i = 0; i < engine::kNumPhases; ++i) {
    if (s.phase_seconds[i] > 0) {
      phase_duration_->WithLabels({model, method, engine::PhaseName(static_cast<engine::Phase>(i))})
          .Observe(s.phase_seconds[i]);
    }
  }
  // Speculative series only for methods that draft: for ar they would be zeros that
  // dashboards divide by.
  const engine::MethodEntry* entry = engine::FindMethod(line.method);
  if (entry == nullptr || !entry->drafts) return;
  draft_forwards_->WithLabels({model, method}).Inc(static_cast<double>(s.draft_forward_passes));
  drafted_->WithLabels({model, method}).Inc(static_cast<double>(s.drafted_tokens));
  accepted_->WithLabels({model, method}).Inc(static_cast<double>(s.accepted_tokens));
  resampled_->WithLabels({model, method}).Inc(static_cast<double>(s.resampled_tokens));
  relaxed_accepted_->WithLabels({model, method})
      .Inc(static_cast<double>(s.relaxed_accepted_tokens));
  pooled_drafts_->WithLabels({model, method}).Inc(static_cast<double>(s.pooled_drafts));
  pooled_neighbors_->WithLabels({model, method}).Inc(static_cast<double>(s.pooled_neighbors));
  tree_depth_->WithLabels({model, method}).Inc(static_cast<double>(s.drafted_tree_depth));
  tree_width_->WithLabels({model, method}).Inc(static_cast<double>(s.drafted_tree_width));
  expansion_resampled_->WithLabels({model, method})
      .Inc(static_cast<double>(s.expansion_resampled_tokens));
  prefix_tokens_->WithLabels({model, method, "own"})
      .Inc(static_cast<double>(s.prefix_own_tokens));
  prefix_tokens_->WithLabels({model, method, "downsampled"})
      .Inc(static_cast<double>(s.prefix_downsampled_tokens));
  for (size_t i = 0; i < s.accepted_per_position.size(); ++i) {
    accepted_per_position_->WithLabels({model, method, std::to_string(i)})
        .Inc(static_cast<double>(s.accepted_per_position[i]));
  }
}

}  // namespace mulo::server
