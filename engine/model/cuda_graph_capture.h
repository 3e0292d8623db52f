// Capturing and replaying one CUDA graph: what the per-cache graphs (forward_graphs.h) and a
// KV-cache pool's graphs (pool_graphs.h, row_graphs.h, verify_graphs.h) share. On a build without CUDA a capture
// fails with FAILED_PRECONDITION and nothing replays.
#ifndef MULO_ENGINE_MODEL_CUDA_GRAPH_CAPTURE_H_
#define MULO_ENGINE_MODEL_CUDA_GRAPH_CAPTURE_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "engine/core/status.h"

namespace mulo::engine {

// The private memory pool that a set of graphs allocates its intermediates and outputs from.
// Graphs that replay one at a time on one stream and whose outputs stay referenced may share
// one, which keeps their memory to about one forward's worth.
class GraphMemoryPool {
 public:
  GraphMemoryPool();
  ~GraphMemoryPool();
  GraphMemoryPool(const GraphMemoryPool&) = delete;
  GraphMemoryPool& operator=(const GraphMemoryPool&) = delete;

 private:
  friend class CapturedGraph;
  struct Id;
  std::unique_ptr<Id> id_;
};

class CapturedGraph {
 public:
  // Captures `body` on `device` into a graph allocating from `pool`, after one eager warm-up
  // run (which creates the library handles and workspaces the body needs: creating them
  // during capture is not allowed). The body must be idempotent: the warm-up's writes are
  // repeated by the first replay. INTERNAL when the capture fails (the warm-up's writes stay);
  // FAILED_PRECONDITION on a build without CUDA.
  static StatusOr<std::unique_ptr<CapturedGraph>> Capture(const torch::Device& device,
                                                          const std::function<void()>& body,
                                                          GraphMemoryPool& pool);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void Replay();

 private:
  struct Impl;
  explicit CapturedGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A pool graph's body as one launch: captured (CapturedGraph), or with emulated graphs (tests
// and CPU benchmarks, LoadOptions::emulate_cuda_graphs) kept and run eagerly at each replay.
// Either way a replay counts as one launch and none of its operators (GraphReplay,
// op_count.h), so the CPU counts what a GPU dispatches outside graphs.
class ReplayableGraph {
 public:
  // Emulated: runs `body` once, as a capture's warm-up does, and keeps it. Otherwise
  // CapturedGraph::Capture, with its errors.
  static StatusOr<std::unique_ptr<ReplayableGraph>> Make(const torch::Device& device,
                                                         std::function<void()> body,
                                                         bool emulated, GraphMemoryPool& pool);
  void Replay();

 private:
  ReplayableGraph() = default;
  std::unique_ptr<CapturedGraph> graph_;
  std::function<void()> emulated_;
};

// The bytes the CUDA caching allocator holds reserved on `device` (0 off CUDA): the difference
// around a set of captures is their graphs' memory.
int64_t DeviceReservedBytes(const torch::Device& device);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CUDA_GRAPH_CAPTURE_H_
