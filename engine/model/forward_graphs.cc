#include "engine/model/forward_graphs.h"

#include <exception>
#include <functional>
#include <string>

#include "engine/core/torch_guard.h"

#ifdef MULO_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#endif

namespace mulo::engine {

#ifdef MULO_WITH_CUDA
struct ForwardGraphs::Pool {
  // Every graph of one cache allocates its intermediates and outputs from one private pool:
  // they replay one at a time on one stream, and their outputs stay referenced, so sharing is
  // safe and keeps memory to about one forward's worth.
  c10::MempoolId_t id{0, 0};
};
#else
struct ForwardGraphs::Pool {};
#endif

namespace {

#ifdef MULO_WITH_CUDA
using Graph = at::cuda::CUDAGraph;

// Captures `body` on a side stream of `device` (as CUDA requires: never the legacy default
// stream), after one eager warm-up run there that creates the library handles and workspaces
// the body needs (creating them during capture is not allowed). The body must be idempotent:
// the warm-up's writes are repeated by the first replay.
StatusOr<std::unique_ptr<Graph>> Capture(const torch::Device& device,
                                         const std::function<void()>& body,
                                         c10::MempoolId_t* pool) {
  auto graph = std::make_unique<Graph>();
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device.index());
  // A worker captures on its own stream (device_stream.h), which no other thread launches on.
  // The legacy default stream cannot be captured: a thread still on it (a tool, a test) captures
  // on a side stream from the high-priority pool, which workers' streams never come from (an
  // H200 run saw a worker's launches land in another's capture on a shared pool stream).
  const bool on_default = caller == c10::cuda::getDefaultCUDAStream(device.index());
  const c10::cuda::CUDAStream capture_stream =
      on_default ? c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index()) : caller;
  c10::cuda::CUDAStreamGuard on_capture_stream(capture_stream);
  bool capturing = false;
  try {
    // The capture stream must see this thread's earlier work. Only this thread's stream is
    // waited on: a device-wide synchronisation fails while another worker is capturing (an H200
    // run with eight workers died of it, docs/gpu.md).
    caller.synchronize();
    body();
    capture_stream.synchronize();
    // Thread-local mode: other workers' allocations and synchronisations are unaffected.
    graph->capture_begin(*pool, cudaStreamCaptureModeThreadLocal);
    capturing = true;
    body();
    capturing = false;
    graph->capture_end();
  } catch (const std::exception& e) {
    if (capturing) {
      try {
        graph->capture_end();  // leaves capture mode and returns the pool
      } catch (const std::exception&) {
      }
    }
    std::string message = e.what();
    const auto newline = message.find('\n');
    if (newline != std::string::npos) message.resize(newline);
    return InternalError("CUDA graph capture: " + message);
  }
  *pool = graph->pool();
  return graph;
}
#else
struct Graph {
  void replay() {}
};
#endif

}  // namespace

struct ForwardGraphs::Entry {
  int uses = 0;
  bool failed = false;
  torch::Tensor inputs;  // [batch * n + n + 1] int64 on the device: ids, positions, first row
  ForwardOutput output;  // written by every replay
  std::unique_ptr<Graph> graph;
};

bool CudaGraphsAvailable(const torch::Device& device) {
#ifdef MULO_WITH_CUDA
  return device.is_cuda() && torch::cuda::is_available();
#else
  (void)device;
  return false;
#endif
}

int64_t ForwardGraphs::RoundUpToSpan(int64_t rows) {
  return std::max<int64_t>(1, (rows + kSpanRows - 1) / kSpanRows) * kSpanRows;
}

ForwardGraphs::ForwardGraphs() : pool_(std::make_unique<Pool>()) {}
ForwardGraphs::~ForwardGraphs() = default;

void ForwardGraphs::Clear() {
  entries_.clear();
  pool_ = std::make_unique<Pool>();
}

int64_t ForwardGraphs::captured() const {
  int64_t count = 0;
  for (const auto& [key, entry] : entries_) count += entry->graph != nullptr;
  return count;
}

StatusOr<std::optional<ForwardOutput>> ForwardGraphs::Run(const Transformer& model,
                                                          KvCache& cache,
                                                          const torch::Tensor& tokens,
                                                          const torch::Tensor& positions,
                                                          LogitsMode mode) {
  if (cache.generation() != generation_) {
    Clear();
    generation_ = cache.generation();
  }
  const int64_t batch = tokens.size(0), n = tokens.size(1);
  const int64_t span = RoundUpToSpan(cache.length() + n);
  if (span > cache.capacity()) return std::optional<ForwardOutput>();
  std::unique_ptr<Entry>& entry = entries_[Key(n, span, mode)];
  if (entry == nullptr) entry = std::make_unique<Entry>();
  if (entry->failed || ++entry->uses <= kCaptureAfter) return std::optional<ForwardOutput>();
  return GuardTorch("ForwardGraphs::Run", [&]() -> StatusOr<std::optional<ForwardOutput>> {
    torch::NoGradGuard no_grad;
    const auto host = torch::cat({tokens.to(torch::kCPU).flatten(), positions.to(torch::kCPU),
                                  torch::full({1}, cache.length(), torch::kInt64)});
    if (entry->graph == nullptr) {
      const torch::Device device = model.options().device();
      entry->inputs = host.to(device);
      const auto ids = entry->inputs.narrow(0, 0, batch * n).view({batch, n});
      const auto pos = entry->inputs.narrow(0, batch * n, n);
      const auto first_row = entry->inputs.narrow(0, batch * n + n, 1);
      Entry* e = entry.get();
#ifdef MULO_WITH_CUDA
      auto graph = Capture(
          device, [&] { e->output = model.ForwardStatic(cache, ids, pos, first_row, span, mode); },
          &pool_->id);
#else
      StatusOr<std::unique_ptr<Graph>> graph =
          FailedPreconditionError("CUDA graphs need a CUDA build of the engine");
#endif
      if (!graph.ok()) {
        // Whatever the warm-up wrote lies past the cache length: the eager run rewrites it.
        e->failed = true;
        ++failed_captures_;
        return std::optional<ForwardOutput>();
      }
      e->graph = std::move(*graph);
    } else {
      entry->inputs.copy_(host);
    }
    entry->graph->replay();
    cache.Advance(n);
    ++replays_;
    ForwardOutput out;
    if (entry->output.logits.defined()) out.logits = entry->output.logits.clone();
    out.hidden = entry->output.hidden.clone();
    return std::optional<ForwardOutput>(std::move(out));
  });
}

}  // namespace mulo::engine
