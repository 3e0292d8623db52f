// CUDA graphs of a decoder-only model's causal append (DecoderOnlyModel::ForwardTokens) over one
// KV cache.
//
// Why: on a GPU a small forward costs its kernel launches, not its arithmetic. One step of the
// 655 M-parameter Tar LP replica launches about 600 kernels and, launched one by one from the
// host, runs about 20 times slower than reading its weights takes. A CUDA graph replays all of
// them with one launch.
//
// How: a graph has fixed shapes and fixed addresses, so one is captured per key (new rows,
// key span, logits mode, masked or causal) over this cache's own tensors and static input
// buffers that every call fills first (token ids, positions, first cache row, and a masked
// forward's mask). The span is the cache length after the append rounded up to kSpanRows rows;
// rows past the live length are masked out, so one graph serves every length in its bucket.
// With buckets on (the default), the new rows are padded up to a power of two too, and masked
// forwards (a draft tree, a ZipAR window) are captured with their mask as an input: forwards
// whose size changes every step (MuLo-SD's verify, trees, windows) then share a few graphs
// instead of never replaying one (docs/gpu.md, fourth run: 0-4% of them replayed). Pad rows
// take the last live id and position, see the prefix and themselves, write past the live
// length (stale rows, overwritten later) and their outputs are dropped. A key is captured on
// its (kCaptureAfter + 1)-th use: capturing costs about two eager forwards, so shapes a request
// meets once or twice stay eager. A key whose capture fails stays eager for good.
//
// Inputs are uploaded without waiting for the device (device_upload.h); ids the engine drew on
// the device are copied there, never read back.
//
// Emulated (LoadOptions::emulate_cuda_graphs, for tests on the CPU): everything above happens,
// keys, padding, buffers, capture points and replays, except that a "graph" is the captured
// forward run eagerly again at each replay. CPU tests check through it what a GPU replays.
//
// Outputs are copied out of the graph's static buffers, so callers may keep them across later
// forwards. A cache and its graphs belong to one request (one thread).
#ifndef MULO_ENGINE_MODEL_FORWARD_GRAPHS_H_
#define MULO_ENGINE_MODEL_FORWARD_GRAPHS_H_

#include <torch/types.h>

#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "engine/core/status.h"
#include "engine/model/kv_cache.h"
#include "engine/model/token_model.h"

namespace mulo::engine {

class DecoderOnlyModel;  // decoder_only_model.h: the model whose ForwardStatic a graph captures

// Whether this build can capture CUDA graphs on `device`: a build with MULO_WITH_CUDA (a CUDA
// LibTorch) and a CUDA device. False on the CPU build, whatever the device.
bool CudaGraphsAvailable(const torch::Device& device);

class ForwardGraphs {
 public:
  static constexpr int64_t kSpanRows = 256;
  static constexpr int kCaptureAfter = 2;

  // `rows` rounded up to a whole number of span buckets.
  static int64_t RoundUpToSpan(int64_t rows);
  // The new rows a graph runs a forward of n rows as: n without buckets, else the least power
  // of two >= n.
  static int64_t GraphRows(int64_t n, bool buckets);

  // `buckets`: pad new rows to powers of two and capture masked forwards (see above); without,
  // only causal forwards of repeated exact shapes replay.
  explicit ForwardGraphs(bool buckets = true, bool emulated = false);
  ~ForwardGraphs();
  ForwardGraphs(const ForwardGraphs&) = delete;
  ForwardGraphs& operator=(const ForwardGraphs&) = delete;

  // Runs the append of `tokens` [batch, n] at `positions` [n] to `cache` from its graph,
  // capturing the graph first when it is due, and advances the cache. `mask` (optional,
  // [n, cache length + n] bool) as in TokenModel::Forward; undefined is causal. The caller has
  // checked every argument. nullopt when this call should run eagerly (too early for its key, a
  // failed capture, a masked forward without buckets, or a span beyond the cache's capacity).
  StatusOr<std::optional<ForwardOutput>> Run(const DecoderOnlyModel& model, KvCache& cache,
                                             const torch::Tensor& tokens,
                                             const torch::Tensor& positions,
                                             const torch::Tensor& mask, LogitsMode mode);

  // Drops every graph (the cache's tensors moved).
  void Clear();

  bool buckets() const { return buckets_; }
  bool emulated() const { return emulated_; }
  int64_t captured() const;  // graphs held now
  int64_t replays() const { return replays_; }
  int64_t failed_captures() const { return failed_captures_; }

 private:
  using Key = std::tuple<int64_t, int64_t, LogitsMode, bool>;  // (rows, span, mode, masked)
  struct Entry;
  struct Pool;  // the graphs' shared CUDA memory pool (CUDA builds only)

  bool buckets_;
  bool emulated_;
  std::map<Key, std::unique_ptr<Entry>> entries_;
  std::unique_ptr<Pool> pool_;
  int64_t generation_ = 0;  // the cache generation the graphs were captured at
  int64_t replays_ = 0;
  int64_t failed_captures_ = 0;
};

// One forward's inputs laid out as a graph of `rows` new rows over cache rows [0, span) reads
// them (what ForwardGraphs copies into its static buffers; exposed so that the CPU tests can
// check the layout against the eager forward). tokens [batch, n], positions [n] and the
// optional mask [n, cache_length + n] in; out: ids [batch, rows] and positions [rows] (pad rows
// repeat the last live id and position), first_row [1] = cache_length, and for a masked forward
// mask [rows, span] bool: the live rows' mask, nothing past the live rows, pad rows seeing the
// cached prefix and themselves. Each output is on its input's device (first_row on the host).
struct GraphInputs {
  torch::Tensor ids, positions, first_row, mask;
};
GraphInputs PadGraphInputs(const torch::Tensor& tokens, const torch::Tensor& positions,
                           const torch::Tensor& mask, int64_t cache_length, int64_t rows,
                           int64_t span);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_FORWARD_GRAPHS_H_
