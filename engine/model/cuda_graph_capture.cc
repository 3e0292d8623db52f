#include "engine/model/cuda_graph_capture.h"

#include <exception>
#include <string>
#include <utility>

#include "engine/core/op_count.h"

#ifdef MULO_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mulo::engine {

#ifdef MULO_WITH_CUDA
struct GraphMemoryPool::Id {
  c10::MempoolId_t id{0, 0};  // {0, 0}: the first capture makes the pool
};
struct CapturedGraph::Impl {
  at::cuda::CUDAGraph graph;
};
#else
struct GraphMemoryPool::Id {};
struct CapturedGraph::Impl {};
#endif

GraphMemoryPool::GraphMemoryPool() : id_(std::make_unique<Id>()) {}
GraphMemoryPool::~GraphMemoryPool() = default;

CapturedGraph::CapturedGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CapturedGraph::~CapturedGraph() = default;

StatusOr<std::unique_ptr<CapturedGraph>> CapturedGraph::Capture(
    const torch::Device& device, const std::function<void()>& body, GraphMemoryPool& pool) {
#ifdef MULO_WITH_CUDA
  auto impl = std::make_unique<Impl>();
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
    impl->graph.capture_begin(pool.id_->id, cudaStreamCaptureModeThreadLocal);
    capturing = true;
    body();
    capturing = false;
    impl->graph.capture_end();
  } catch (const std::exception& e) {
    if (capturing) {
      try {
        impl->graph.capture_end();  // leaves capture mode and returns the pool
      } catch (const std::exception&) {
      }
    }
    std::string message = e.what();
    const auto newline = message.find('\n');
    if (newline != std::string::npos) message.resize(newline);
    return InternalError("CUDA graph capture: " + message);
  }
  pool.id_->id = impl->graph.pool();
  return std::unique_ptr<CapturedGraph>(new CapturedGraph(std::move(impl)));
#else
  (void)device;
  (void)body;
  (void)pool;
  return FailedPreconditionError("CUDA graphs need a CUDA build of the engine");
#endif
}

void CapturedGraph::Replay() {
#ifdef MULO_WITH_CUDA
  impl_->graph.replay();
#endif
}

StatusOr<std::unique_ptr<ReplayableGraph>> ReplayableGraph::Make(const torch::Device& device,
                                                                  std::function<void()> body,
                                                                  bool emulated,
                                                                  GraphMemoryPool& pool) {
  std::unique_ptr<ReplayableGraph> graph(new ReplayableGraph());
  if (emulated) {
    body();
    graph->emulated_ = std::move(body);
  } else {
    MULO_ASSIGN_OR_RETURN(graph->graph_, CapturedGraph::Capture(device, body, pool));
  }
  return graph;
}

void ReplayableGraph::Replay() {
  GraphReplay replay;  // one launch (op_count.h)
  if (emulated_) {
    emulated_();
  } else {
    graph_->Replay();
  }
}

int64_t DeviceReservedBytes(const torch::Device& device) {
#ifdef MULO_WITH_CUDA
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return static_cast<int64_t>(stats.reserved_bytes[0].current);  // [0]: all pools together
#else
  (void)device;
  return 0;
#endif
}

}  // namespace mulo::engine
