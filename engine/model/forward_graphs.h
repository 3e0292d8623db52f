// CUDA graphs of a transformer's causal append (Transformer::ForwardTokens) over one KV cache.
//
// Why: on a GPU a small forward costs its kernel launches, not its arithmetic. One step of the
// 655 M-parameter Tar LP replica launches about 600 kernels and, launched one by one from the
// host, runs about 20 times slower than reading its weights takes. A CUDA graph replays all of
// them with one launch.
//
// How: a graph has fixed shapes and fixed addresses, so one is captured per key (new tokens n,
// key span, logits mode) over this cache's own tensors and a static input buffer that every
// call fills first (token ids, positions, first cache row). The span is the cache length after
// the append rounded up to kSpanRows rows; rows past the live length are masked out, so one
// graph serves every length in its bucket. A key is captured on its (kCaptureAfter + 1)-th use:
// capturing costs about two eager forwards, so shapes a request meets once or twice (MuLo-SD's
// re-sampling chunks) stay eager. A key whose capture fails stays eager for good.
//
// Outputs are copied out of the graph's static buffers, so callers may keep them across later
// forwards. A cache and its graphs belong to one request (one thread).
#ifndef MULO_ENGINE_MODEL_FORWARD_GRAPHS_H_
#define MULO_ENGINE_MODEL_FORWARD_GRAPHS_H_

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "engine/core/status.h"
#include "engine/model/kv_cache.h"
#include "engine/model/transformer.h"

namespace mulo::engine {

// Whether this build can capture CUDA graphs on `device`: a build with MULO_WITH_CUDA (a CUDA
// LibTorch) and a CUDA device. False on the CPU build, whatever the device.
bool CudaGraphsAvailable(const torch::Device& device);

class ForwardGraphs {
 public:
  static constexpr int64_t kSpanRows = 256;
  static constexpr int kCaptureAfter = 2;

  // `rows` rounded up to a whole number of span buckets.
  static int64_t RoundUpToSpan(int64_t rows);

  ForwardGraphs();
  ~ForwardGraphs();
  ForwardGraphs(const ForwardGraphs&) = delete;
  ForwardGraphs& operator=(const ForwardGraphs&) = delete;

  // Runs the causal append of `tokens` [batch, n] at `positions` [n] (checked by the caller)
  // to `cache` from its graph, capturing the graph first when it is due, and advances the
  // cache. nullopt when this call should run eagerly (too early for its key, a failed capture,
  // or a span beyond the cache's capacity).
  StatusOr<std::optional<ForwardOutput>> Run(const Transformer& model, KvCache& cache,
                                             const torch::Tensor& tokens,
                                             const torch::Tensor& positions, LogitsMode mode);

  // Drops every graph (the cache's tensors moved).
  void Clear();

  int64_t captured() const;  // graphs held now
  int64_t replays() const { return replays_; }
  int64_t failed_captures() const { return failed_captures_; }

 private:
  using Key = std::tuple<int64_t, int64_t, LogitsMode>;  // (n, span, logits mode)
  struct Entry;
  struct Pool;  // the graphs' shared CUDA memory pool (CUDA builds only)

  std::map<Key, std::unique_ptr<Entry>> entries_;
  std::unique_ptr<Pool> pool_;
  int64_t generation_ = 0;  // the cache generation the graphs were captured at
  int64_t replays_ = 0;
  int64_t failed_captures_ = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_FORWARD_GRAPHS_H_
