#include "engine/model/graph_set.h"

#include <chrono>
#include <utility>

#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"

namespace mulo::engine {

Status GraphSet::CaptureSpans(const KvPool& pool, int64_t min_rows, const torch::Device& device,
                              const std::function<Status(int64_t span)>& capture) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t reserved_before = DeviceReservedBytes(device);
  for (int64_t span = ForwardGraphs::kSpanRows; span <= pool.slot_rows();
       span += ForwardGraphs::kSpanRows) {
    if (span < min_rows) continue;
    MULO_RETURN_IF_ERROR(capture(span));
  }
  std::lock_guard<std::mutex> lock(mu_);
  counts_.capture_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  counts_.memory_bytes += DeviceReservedBytes(device) - reserved_before;
  return OkStatus();
}

std::unique_ptr<ReplayableGraph> GraphSet::Make(const torch::Device& device,
                                                std::function<void()> body, bool emulated,
                                                int64_t static_bytes) {
  auto graph = ReplayableGraph::Make(device, std::move(body), emulated, memory_);
  std::lock_guard<std::mutex> lock(mu_);
  if (!graph.ok()) {
    ++counts_.failed_captures;
    return nullptr;
  }
  ++counts_.graphs;
  counts_.memory_bytes += static_bytes;
  return std::move(*graph);
}

void GraphSet::CountReplay(int64_t calls) const {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.replays;
  counts_.calls += calls;
}

PoolGraphs::Counts GraphSet::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace mulo::engine
