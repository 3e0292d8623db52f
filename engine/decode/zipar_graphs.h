// CUDA graphs of ZipAR's step over a model's KV-cache pool (issue 61; ZipAR's target, and
// MuLo-SD's drafter when its rows advance as the wavefront): one replay feeds a
// forward's set of tokens (every open row's newest token at its raster position, and the
// placeholders that open the next rows; zipar_rows.h), mixes guidance, makes p and draws every
// predicted token with the caller's numbers (the stream's: target or drafter), and leaves the
// drawn tokens in one small tensor that the step reads once. Eagerly the same step dispatched
// ~150 operators around its replayed forward (the mask and the inputs built and uploaded per
// forward, the gather of the drawing rows, the draw).
//
// The mask is built inside the graph from rasters: each column of a request's span carries the
// raster index of the token in that cache row (the condition rows -1; the forward's own rows
// their inputs' rasters; placeholders, pads and rows past them one past the grid, seen by no
// one), and an input sees a column when the column's raster is smaller than its own, or the
// column is its own row: ZipAR's wavefront (a token sees every real token decoded before it
// with a smaller raster index) with no host-built [n, span] mask. A schedule narrowed by a
// test's Visibility hook steps eagerly.
//
// Tokens may stay on the device (MuLo-SD's drafter, whose wavefront needs no token value on the
// host until its step's read): every replay also writes each drawn token into a per-slot row of
// the grid's tokens (`Tokens`), and an input whose id the host does not know (-1) takes it from
// there by the raster it names (its own, or a placeholder's stand-in's), so a forward can follow
// another with no read between them (Call::read false).
//
// Everything a replay reads is in its static buffers, filled by one upload and one device copy
// (the numbers) per replay: per stream its slot and cache length; per request cfg_scale,
// temperature and the sequence position of raster 0; per request row its token, raster and
// which input draws the row's number, the raster its token comes from when the host does not
// know it and the raster each draw predicts; per request column its raster. Pad rows after a
// request's inputs write cache rows nothing attends (rows past the cache's length); pad
// requests write to the scratch slot.
//
// Chains (MuLo-SD's drafter): a step's whole wavefront, several forwards of one request, in one
// replay of a graph that runs them one after the other, each over the tokens the one before it
// drew (they meet in `Tokens`), the request's numbers for all of them uploaded in one copy. The
// host plans every forward of a chain before it runs (ZipArRows' schedule needs no token
// value), so nothing is read between them. A batch of chains pads the shorter ones with pad
// requests in their last forwards.
//
// Keys (streams, span, filtered, rows of each forward): streams padded to a power of two, each
// forward's inputs padded to a power of two (as the pool's forward graphs pad them: a
// wavefront feeds 1 to 3 tokens most of the time, and a GPU's forward of 8 rows costs the
// H100 projection 2.5x one of 2), span the longest cache after them in whole
// ForwardGraphs::kSpanRows, and whether the batch filters (a copy of each key that applies each
// request's top-k and top-p, as row_graphs.h's, captured with `filters`). One set per pool
// serves every ZipAR window; requests with filters step eagerly where no filtered copy was
// captured (Fits). Lone forwards are captured for every rows bucket; chains for the row
// profiles the caller lists (the drafter's pool: zipar_chain_rows.h, every window's steps),
// and, for batches, each profile padded to its widest forward (a batch pads every forward to
// that).
#ifndef MULO_ENGINE_DECODE_ZIPAR_GRAPHS_H_
#define MULO_ENGINE_DECODE_ZIPAR_GRAPHS_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/graph_set.h"
#include "engine/model/kv_cache.h"
#include "engine/model/pool_graphs.h"
#include "engine/model/row_graphs.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

class KvPool;

class ZipArGraphs {
 public:
  // Captures (or, with model.emulated, emulates) every key's graph over `pool` (made with a
  // scratch slot) for a `grid` x `grid` image: forwards of up to grid + 1 inputs (every row
  // open and a placeholder); with `filters`, also each key's filtered copy; with `chains`,
  // also chains of those rows (each forward's bucket, RowsOf) alone, and each padded to its
  // widest in batches. INVALID_ARGUMENT without a scratch slot or a grid; a key whose capture
  // fails is left out and counted.
  static StatusOr<std::shared_ptr<ZipArGraphs>> Capture(
      const KvPool& pool, int64_t grid, RowGraphs::Model model, bool filters = false,
      const std::set<std::vector<int64_t>>& chains = {});

  const KvPool& pool() const { return pool_; }
  int64_t grid() const { return grid_; }
  // The rows a forward of `inputs` tokens takes per stream: its inputs, padded to a power of
  // two.
  static int64_t RowsOf(int64_t inputs);

  // Whether a request with `sampling` whose `cache` (a view of this pool) feeds `inputs`
  // tokens may step from these graphs: two guidance streams, and the rows fit a captured key
  // (a filtered one for a request with top-k or top-p).
  bool Fits(const KvCache& cache, int64_t inputs, const SamplingParams& sampling) const;

  // One request's forward (ZipArRows::Next's, without its mask).
  struct Call {
    KvCache* cache = nullptr;      // its rows in the order they were fed
    std::vector<int64_t> tokens;   // the inputs' ids; -1: the id at its source, on the device
    std::vector<int64_t> sources;  // per input, the raster its token is at (empty: all known)
    std::vector<int64_t> rasters;  // their raster indices
    std::vector<bool> placeholders;  // inputs that only lend their output (unseen by others)
    std::vector<int64_t> draws;    // the inputs that draw, in the order they take numbers
    std::vector<int64_t> predicts;  // per draw, the raster it draws (its column of Tokens)
    // The raster of every cache row after the condition rows, in cache order.
    std::vector<int64_t> cached;
    int64_t condition_rows = 0;
    torch::Tensor uniforms;        // float64 [draws] on the device: the model's stream's next
                                   // numbers (undefined when greedy: p's argmax)
    SamplingParams sampling;       // cfg_scale, temperature, top_k, top_p (Fits holds)
    int64_t position_offset = 0;   // the sequence position of raster 0
    bool read = true;              // whether the drawn tokens come back to the host
  };
  struct Output {
    std::vector<int64_t> drawn;  // one per Call::draws, in its order (empty when not read)
  };
  // One request's forwards, run in this order from one replay: each Call as Run's, planned
  // before the chain runs (its `cached` the rasters the cache will hold when it runs, its
  // tokens' unknown ids drawn by the forwards before it), `cache` the same in each, their own
  // `uniforms` unused.
  struct Chain {
    std::vector<Call> forwards;
    torch::Tensor uniforms;  // float64 on the device: the numbers of every draw, in order
                             // (undefined when greedy)
  };
  // Runs every call from one replay, reads the tokens of every call that asks in one host read
  // (none when none asks) and advances each cache by its inputs (the caller drops the
  // placeholders' rows). INVALID_ARGUMENT for a call that does not Fit or whose lists
  // disagree; a batch whose key failed to capture runs call by call; FAILED_PRECONDITION for a
  // lone call whose key failed to capture.
  StatusOr<std::vector<Output>> Run(const std::vector<Call>& calls) const;

  // The longest chain captured (1: none), and whether `chain`'s forwards fit a key of a lone
  // chain: each as Run's would, at the length the cache has when it runs, and the chain's rows
  // one of the profiles captured.
  int64_t chain_forwards() const { return chain_forwards_; }
  bool FitsChain(const Chain& chain) const;
  // Runs every chain from one replay (their forwards in order, side by side); each output has
  // the draws of its forwards that ask to read, in order, read at once; each cache ends at
  // its last forward's length plus that forward's inputs (the caller drops its placeholders).
  // The errors Run's.
  StatusOr<std::vector<Output>> RunChains(const std::vector<Chain>& chains) const;

  // The grid's tokens as the replays over `cache`'s slots drew them, int64 [grid * grid] on the
  // device (a view: the next replay writes it); a raster no replay drew holds a stale value.
  torch::Tensor Tokens(const KvCache& cache) const;
  // Tokens(cache).narrow(0, from, count), as one view (a view: the next replay writes it).
  torch::Tensor TokensAt(const KvCache& cache, int64_t from, int64_t count) const;
  // Writes a token drawn on the device (int64, one element) at `raster` of `cache`'s tokens.
  Status SetToken(const KvCache& cache, int64_t raster, const torch::Tensor& token) const;

  PoolGraphs::Counts counts() const;

  ZipArGraphs(const ZipArGraphs&) = delete;
  ZipArGraphs& operator=(const ZipArGraphs&) = delete;
  ~ZipArGraphs();

 private:
  // (streams, span, filtered, each forward's rows)
  using Key = std::tuple<int64_t, int64_t, bool, std::vector<int64_t>>;
  // A chain as its key sees it: each forward's rows and the cache length before it.
  struct ChainPlan {
    std::vector<int64_t> rows, lengths;
    bool filtered = false;
  };
  struct Entry;
  ZipArGraphs(const KvPool& pool, int64_t grid, RowGraphs::Model model);
  Status CaptureKey(const Key& key);
  // Forward `forward` of a key's chain over its static buffers (what is captured, in order).
  void Body(Entry& e, const Key& key, int64_t forward) const;
  // Whether `call` is well formed for a cache of `length` rows: its lists agree, its ids and
  // predicted rasters are in the grid.
  bool WellFormed(const Call& call, int64_t length) const;
  // `chain`'s plan; false when a forward is ill formed or the numbers do not match.
  bool ChainShape(const Chain& chain, ChainPlan* plan) const;
  // Whether a lone chain of `plan` fits a captured key.
  bool FitsPlan(const ChainPlan& plan) const;
  // The span of chains of `plans` run with each forward's `rows`.
  static int64_t SpanOf(const std::vector<ChainPlan>& plans, const std::vector<int64_t>& rows);
  // `rows` padded to the widest of them.
  static std::vector<int64_t> Uniform(const std::vector<int64_t>& rows);
  // One replay of `e` (the key (streams, span, *, rows)) for `chains` (of `plans`), which fit
  // it.
  StatusOr<std::vector<Output>> Replay(Entry& e, int64_t streams, const std::vector<int64_t>& rows,
                                       int64_t span, const std::vector<Chain>& chains,
                                       const std::vector<ChainPlan>& plans) const;

  const KvPool& pool_;  // the target's; owned by the worker's pools as these graphs are
  const int64_t grid_;
  const RowGraphs::Model model_;
  bool filters_ = false;  // whether filtered copies were captured
  int64_t chain_forwards_ = 1;
  // [slots + scratch, grid * grid + 1] int64 on the device: per slot (a request's first), the
  // tokens its replays drew; the last column takes pad rows' draws.
  torch::Tensor tokens_;
  torch::Tensor flat_tokens_;  // tokens_ viewed as one row
  std::map<Key, std::unique_ptr<Entry>> entries_;
  GraphSet set_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_ZIPAR_GRAPHS_H_
