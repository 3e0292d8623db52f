// The mulo_ metrics (docs/design.md, "Stats and metrics") and the HTTP endpoint that exposes them.
// Counters rather than ratios: acceptance rate, step compression and mean accepted length are
// derived in PromQL, e.g.
//   rate(mulo_spec_accepted_tokens_total[5m]) / rate(mulo_spec_drafted_tokens_total[5m])
//   rate(mulo_generated_tokens_total[5m]) / rate(mulo_target_forward_passes_total[5m])
#ifndef MULO_SERVER_SERVER_METRICS_H_
#define MULO_SERVER_SERVER_METRICS_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/http_server.h"
#include "server/metrics/registry.h"
#include "server/request_log.h"

namespace mulo::server {

class ServerMetrics {
 public:
  ServerMetrics();

  // Serves /metrics, /healthz and /readyz on host:port (0 = a free port); returns the port.
  absl::StatusOr<int> StartHttp(const std::string& host, int port,
                                metrics::MetricsHttpServer::ReadinessCheck is_ready);

  // Queue depth and running requests are read at scrape time from `probe`.
  void WatchQueue(std::function<std::pair<int, int>()> probe);

  // Everything one finished (or refused) request contributes. Its model label is the model's
  // name only when SetModelLoaded has seen that name, otherwise "unknown": label values come
  // from a closed set, whatever names clients send.
  void RecordRequest(const RequestLogLine& line);
  void SetModelLoaded(const std::string& model, bool loaded);
  // One batched forward (continuous batching) of `component` (transformer, eagle_head,
  // resampler, sampler, verifier, host_read: a closed set, engine::EngineLoop::ComponentName):
  // how many requests' calls it carried and how many rows.
  void RecordBatch(const std::string& component, int64_t requests, int64_t rows);
  // One KV-cache pool of one worker, as read at scrape time (engine/decode/kv_pools.h).
  struct KvPoolReading {
    std::string model, component;  // component: target, drafter, chain, eagle
    int worker = 0;
    int64_t slots = 0, used = 0, bytes = 0, overflows = 0;
  };
  // The workers' KV-cache pools are read at scrape time from `probe`.
  void WatchKvPools(std::function<std::vector<KvPoolReading>()> probe);
  // Memory the family's resident weights take on `device` (engine::ModelSet::weight_bytes).
  void SetModelWeightBytes(const std::string& model, const std::string& device, int64_t bytes);

  const metrics::Registry& registry() const { return registry_; }

 private:
  // The constructor's series, by what they count.
  void AddRequestSeries();
  void AddSpeculativeSeries();
  void AddLatencySeries();
  void AddBatchAndModelSeries();
  // `model` if it was ever loaded, else "unknown".
  std::string ModelLabel(const std::string& model) const;

  metrics::Registry registry_;
  mutable absl::Mutex models_mu_;
  std::set<std::string> known_models_ ABSL_GUARDED_BY(models_mu_);
  metrics::CounterFamily* requests_;
  metrics::CounterFamily* generated_tokens_;
  metrics::CounterFamily* target_forwards_;
  metrics::CounterFamily* draft_forwards_;
  metrics::CounterFamily* drafted_;
  metrics::CounterFamily* accepted_;
  metrics::CounterFamily* resampled_;
  metrics::CounterFamily* relaxed_accepted_;
  metrics::CounterFamily* expansion_resampled_;
  metrics::CounterFamily* prefix_tokens_;
  metrics::CounterFamily* accepted_per_position_;
  metrics::CounterFamily* pooled_drafts_;
  metrics::CounterFamily* pooled_neighbors_;
  metrics::CounterFamily* iterations_;
  metrics::CounterFamily* tree_depth_;
  metrics::CounterFamily* tree_width_;
  metrics::HistogramFamily* request_duration_;
  metrics::HistogramFamily* queue_duration_;
  metrics::HistogramFamily* first_row_;
  metrics::HistogramFamily* phase_duration_;
  metrics::HistogramFamily* batch_size_;
  metrics::HistogramFamily* batch_rows_;
  metrics::GaugeFamily* model_loaded_;
  metrics::GaugeFamily* model_weight_bytes_;
  std::unique_ptr<metrics::MetricsHttpServer> http_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_SERVER_METRICS_H_
