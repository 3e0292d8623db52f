// CUDA graphs of a whole row of plain autoregressive decoding over a model's KV-cache pool:
// one replay draws and feeds `tokens` tokens (a row of the image's grid) for every request in
// the batch, with guidance, tempering and the draw inside the graph, so that an ar row costs
// the host one launch and one read instead of a launch, a draw and ~140 operators per token
// (issue 61; gpt-fast compiles sampling into its step for the same reason).
//
// A batch is any set of calls whose caches are two-stream views (conditional, unconditional)
// of the pool's slots. Per step j of the row, every request:
//   - mixes its streams' logits (uncond + cfg_scale x (cond - uncond), MixCfg), divides them by
//     its temperature and draws with its j-th number (DrawRows: the host's inverse-CDF draw),
//     or takes the argmax at temperature 0;
//   - feeds the token to both streams at cache row length + j, position first_position + j,
//     attending over its slot's rows [0, length + j] (built on the device from the lengths).
// Every request's parameters are tensors, so one graph serves any mix of temperatures and
// guidance scales. Top-k and top-p filters (LlamaGen's and SJD's published settings use top-k)
// are tensors too (RowFilters), applied in graphs of their own (Shape::filters) that a batch
// with any filtering request replays: two sorts per draw that unfiltered batches do not pay. A
// request with one stream (cfg_scale 1), or filters where the graphs have none, steps token by
// token through the pool's forward graphs instead (Fits). The tokens are those
// of DecodeSession::DrawOnDevice and a fed forward per token, up to the last bits that a graph's
// longer span may change (as for pool_graphs.h's spans).
//
// Speculative decoding's drafter runs the same steps as a chain of drafts (Shape::drafts): the
// replay first feeds the one or two committed tokens the drafter has not seen (padded to two
// rows, the pad overwritten by the first draft), draws `tokens` drafts from there, feeds all
// but the last, and leaves the drafts and the distributions they were drawn from on the device
// for the verifier (chain_graphs.h), with no host read: speculative's whole drafting is one
// replay instead of gamma forwards, gamma draws and ~500 operators.
//
// Keys: (streams, span, filtered), streams padded up to a power of two (pad requests write to the
// scratch slot and see only their own rows), span the longest call's cache after the row
// rounded up to ForwardGraphs::kSpanRows. Every key is captured at load, as pool_graphs.h's.
// Emulated graphs (LoadOptions::emulate_cuda_graphs) run the captured body eagerly at each
// replay, counted as one replay with none of its operators (op_count.h).
#ifndef MULO_ENGINE_MODEL_ROW_GRAPHS_H_
#define MULO_ENGINE_MODEL_ROW_GRAPHS_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/kv_cache.h"
#include "engine/model/pool_graphs.h"
#include "engine/sampling/row_sampler.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

class KvPool;

class RowGraphs {
 public:
  // The model's pieces a row is made of, both graph-capturable: the embeddings [streams, 1,
  // dim] of drawn ids [streams, 1] (int64, on the device, not range-checked), and the batched
  // forward over a slot-indexed view of the pool (PoolGraphs::Body: {hidden, logits}).
  struct Model {
    std::function<torch::Tensor(const torch::Tensor& ids)> embed;
    PoolGraphs::Body forward;
    int64_t dim = 0;
    int64_t vocab = 0;
    torch::TensorOptions options;  // the embeddings' dtype and device
    bool emulated = false;  // replays run the body eagerly (LoadOptions::emulate_cuda_graphs)
    // Unfiltered rows draw with the fused guided draw (engine/kernels/fused_ops.h: one kernel
    // on a GPU; its reference, the same tokens, elsewhere): LoadOptions::fused_kernels.
    bool fused_draw = false;
  };

  // What one replay does.
  struct Shape {
    int64_t tokens = 0;  // draws per request
    // Drafts for a verifier: each call first feeds its 1 .. kMaxPrefix host tokens (Call::
    // prefix) and draws from the last one's logits; the last draw is not fed; Run reads
    // nothing back and returns the drafts and their distributions on the device.
    bool drafts = false;
    // Rows (not drafts): whether Run reads the row's tokens back. False leaves them on the
    // device (Output::drafts) for a caller that reads them with more of its step (MuLo-SD's
    // drafter rows, which its up-sampler and verification consume first).
    bool read = true;
    // Also capture graphs that filter each request's draws by its top-k and top-p.
    bool filters = false;
  };
  static constexpr int64_t kMaxPrefix = 2;

  // Captures (or, with model.emulated, emulates) every key's graph of `shape` over `pool`
  // (made with a scratch slot). INVALID_ARGUMENT without a scratch slot; a key whose capture
  // fails is left out and counted (Run then reports that no graph fits).
  static StatusOr<std::shared_ptr<RowGraphs>> Capture(const KvPool& pool, Shape shape,
                                                      Model model);
  // The row graphs of the pool `cache` is a view of, or null.
  static RowGraphs* Of(const KvCache& cache);

  int64_t tokens() const { return shape_.tokens; }
  const Shape& shape() const { return shape_; }
  // Cache rows one replay writes per stream (what a call's span must hold).
  int64_t rows_written() const { return shape_.tokens + (shape_.drafts ? kMaxPrefix : 0); }
  // Whether Run reads the tokens back (a row's, with Shape::read).
  bool reads_tokens() const { return !shape_.drafts && shape_.read; }
  // Whether a request with `sampling` and `cache` (a view of this pool) may run its next row
  // from these graphs: two guidance streams, top-k or top-p filters only in graphs with
  // filters, and the row fits its slots and a captured span.
  bool Fits(const KvCache& cache, const SamplingParams& sampling) const;

  // One request's row.
  struct Call {
    KvCache* cache = nullptr;
    torch::Tensor logits;     // [2, vocab] float32: the streams' logits for the row's first token
                              // (unread with Shape::drafts)
    std::vector<int64_t> prefix;  // Shape::drafts: the 1 .. kMaxPrefix tokens fed first
    torch::Tensor uniforms;   // float64 [tokens] on the device: step j's number; undefined: greedy
    SamplingParams sampling;  // cfg_scale, temperature, top_k and top_p (Fits holds)
    int64_t first_position = 0;  // the sequence position of the row's first token
    // (with drafts, of the prefix's first token).
    // The last position a token is fed at (the image's second to last token's; its last is
    // never fed): a row that ends the image feeds its last token too (the graph's rows are all
    // alike) at a position clamped to this one, into a cache row nothing reads (a learned
    // position table has no row beyond it).
    int64_t last_position = 0;
  };
  struct Output {
    std::vector<int64_t> tokens;  // the row's `tokens` ids, read back (reads_tokens())
    torch::Tensor logits;         // [2, vocab] float32: predicting the token after the row
                                  // (not with drafts)
    // Shape::drafts, or a row that is not read: int64 [tokens] on the device.
    torch::Tensor drafts;
    torch::Tensor probabilities;  // Shape::drafts: [tokens, vocab] float32, what each was
                                  // drawn from (DecodeSession::Probabilities; one-hot greedy)
  };
  // Runs every call's row from one replay, reads every call's tokens back in one host read
  // (the batch's one synchronisation; none with drafts or without Shape::read), and advances each cache by `tokens`
  // (with drafts: by its prefix and the fed drafts, tokens - 1). INVALID_ARGUMENT for a call
  // that does not Fit or whose prefix does not suit the shape. A batch whose key failed to capture runs call by call;
  // FAILED_PRECONDITION only for a lone call whose key failed to capture.
  // Const as TokenModel::Forward is: the graphs' buffers are scratch, written by each replay.
  StatusOr<std::vector<Output>> Run(const std::vector<Call>& calls) const;

  PoolGraphs::Counts counts() const;

  // A row's draws and feeds over `view` (a slot-indexed view of a pool), graph-capturable: what
  // every replay of these graphs runs, and MuLo-SD's step graphs run for its drafter's rows
  // before their up-sampling (mulo_verify_graphs.h).
  struct StepsIn {
    torch::Tensor logits;       // [streams, vocab] float32: what the first token is drawn from
    torch::Tensor cfg;          // [requests, 1] float32
    torch::Tensor temperature;  // [requests] float32, 0 greedy
    torch::Tensor uniforms;     // [requests, tokens] float64: step j's numbers in column j
    torch::Tensor lengths;      // [streams] int64: the cache rows before the first token fed
    torch::Tensor first_positions, last_positions;  // [streams] int64
    int64_t span = 0;
    int64_t tokens = 0;
    bool drafts = false;  // keep each draw's distribution; the last draw is not fed
    RowFilters filters;   // [requests, 1] each; undefined: no filters
  };
  struct Steps {
    torch::Tensor tokens;         // [requests, tokens] int64
    torch::Tensor probabilities;  // drafts: [requests, tokens, vocab] float32
    torch::Tensor logits;         // rows: [streams, vocab] float32, after the last token
  };
  static Steps DrawSteps(const Model& model, KvCache& view, const StepsIn& in);

  RowGraphs(const RowGraphs&) = delete;
  RowGraphs& operator=(const RowGraphs&) = delete;
  ~RowGraphs();

 private:
  using Key = std::tuple<int64_t, int64_t, bool>;  // (streams, span, filtered)
  struct Entry;
  RowGraphs(const KvPool& pool, Shape shape, Model model);
  Status CaptureKey(const Key& key);
  // The row's steps over a key's static buffers (what is captured).
  void Body(Entry& e, const Key& key) const;
  // INVALID_ARGUMENT naming what a call lacks for these graphs.
  Status CheckCall(const Call& call) const;

  const KvPool& pool_;  // owns these graphs
  const Shape shape_;
  const int64_t tokens_;  // shape_.tokens
  const Model model_;
  std::map<Key, std::unique_ptr<Entry>> entries_;
  struct MemoryPool;
  std::unique_ptr<MemoryPool> memory_pool_;
  mutable std::mutex mu_;  // counts_ only
  mutable PoolGraphs::Counts counts_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_ROW_GRAPHS_H_
