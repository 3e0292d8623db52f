// CUDA graphs of speculative decoding's verification over the target's KV-cache pool: one
// replay feeds every request's last committed token and its chain of drafts, mixes guidance,
// makes p, judges the chain with the exact rule (chain_rejection.h: min(1, p/q), the residual
// re-draw at the first rejection, the bonus after a fully kept chain) and leaves each request's
// drafts, kept length and next token in one small tensor, read back in one host read. With the
// drafter's chain drafted by one replay of its row graphs (row_graphs.h, Shape::drafts), a
// speculative step is two replays and one read instead of ~5 replays, 2 reads and ~900
// operators (issue 61; SGLang captures its draft and its verify the same way).
//
// SJD's Jacobi iteration is the same verification of a window of drafts (Shape::redraw): a
// draft without a carried q is a fixed token (its q one-hot, built in the graph), and the
// replay also re-draws every row of p for the next window (row i with the drafter stream's
// number i - (kept + 1), the host draw's) and keeps p, the re-drawn drafts' q, on the device:
// an SJD step is one replay and one read instead of a replay, two reads and ~420 operators.
//
// GSD's grouped acceptance (group_verifier.h) rides in the same graphs (Shape::group_size): the
// graph also computes the masses of every draft's group G(x) of that size, and a call that asks
// for its groups (Call::group, with its own probability gap and embedding distance) is judged
// by them, the others by their drafts' own masses. Drafts past a call's `judged` count (the
// window's padding at the image's end) are rejected, so the relaxation counts (Output::relaxed,
// neighbors) are those of the eager verification of the real drafts.
//
// MC-SJD's Jacobi update (Shape::couple) re-draws each draft past the new prefix that the
// verification did not reach with the maximal coupling of its p and q (maximal_coupling.h): its
// keep test takes the acceptance stream's number of its own row (the numbers after the judged
// drafts'), its draw the drafter stream's, as McSjdDecoder::RedrawOnDevice does.
//
// Every request's parameters are tensors (cfg_scale, temperature: 0 makes p and q one-hot, as
// ToProbabilities does, and then the rule keeps a draft exactly when it is the argmax), so one
// graph serves any mix; top-k and top-p filter p in graphs of their own (Shape::filters, as
// row_graphs.h's), else such requests verify eagerly (Fits). The chain
// always has a bonus row: at the image's end the caller ignores the bonus token (the draft
// after the last is fed at the last position into a row nothing reads, as row_graphs.h's last
// row). Decisions are those of ExactVerifier given the same numbers and the same p, which the
// graph computes from a forward of exactly the chain's rows (the eager verification pads them
// to a power of two, which may change the last bits; pool_graphs.h).
//
// Keys (streams, span, filtered), as row_graphs.h's: streams padded to a power of two (pad requests write
// to the scratch slot), span the longest cache after the chain, in whole kSpanRows.
#ifndef MULO_ENGINE_MODEL_VERIFY_GRAPHS_H_
#define MULO_ENGINE_MODEL_VERIFY_GRAPHS_H_

#include <torch/types.h>

#include <cstdint>
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
#include "engine/model/row_graphs.h"
#include "engine/sampling/group_verifier.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

class KvPool;

class VerifyGraphs {
 public:
  struct Shape {
    int64_t drafts = 0;  // the chain's length
    bool redraw = false;  // also re-draw every row of p and keep p (SJD's Jacobi update)
    int64_t group_size = 0;  // > 1: calls may be judged by GSD's groups of this size
    bool couple = false;     // redraw by MC-SJD's maximal coupling with the carried drafts
    bool filters = false;    // also capture graphs that filter p by each request's top-k, top-p
  };
  // Captures (or, with model.emulated, emulates) every key's graph of `shape` over `pool`
  // (made with a scratch slot). `embeddings`: the target's token embeddings [V, dim] (GSD's
  // distances; needed with a group size). INVALID_ARGUMENT without a scratch slot, drafts or the
  // embeddings a group size needs; a key whose capture fails is left out and counted.
  static StatusOr<std::shared_ptr<VerifyGraphs>> Capture(const KvPool& pool, Shape shape,
                                                         RowGraphs::Model model,
                                                         const torch::Tensor& embeddings = {});
  // The verify graphs of `shape` over the pool `cache` is a view of, or null.
  static VerifyGraphs* Of(const KvCache& cache, const Shape& shape);

  int64_t drafts() const { return drafts_; }
  const Shape& shape() const { return shape_; }
  // Whether a request with `sampling` and `cache` (a view of this pool) may verify a chain
  // from these graphs: two guidance streams, top-k or top-p filters only in graphs with
  // filters, and the chain fits its slots and a captured span.
  bool Fits(const KvCache& cache, const SamplingParams& sampling) const;

  // One request's chain.
  struct Call {
    KvCache* cache = nullptr;  // fed every committed token but the last
    int64_t last_token = 0;    // the last committed token, fed first
    torch::Tensor drafts;      // int64 [drafts], on the device or the host
    // [c <= drafts, vocab] float32: what the first c drafts were drawn from; the others are
    // fixed tokens (one-hot q). Undefined: c = 0.
    torch::Tensor q;
    torch::Tensor accept_uniforms;  // float64 [drafts]: the acceptance stream's next numbers
    torch::Tensor draw_uniform;     // float64 [1]: the draw stream's next number
    // Shape::redraw: float64 [drafts + 1], the drafter stream's next numbers (undefined when
    // greedy: the re-draw is p's argmax).
    torch::Tensor redraw_uniforms;
    SamplingParams sampling;        // cfg_scale, temperature, top_k, top_p (Fits holds)
    int64_t first_position = 0;     // last_token's sequence position
    int64_t last_position = 0;      // the last position a token is fed at (row_graphs.h)
    // GSD's rule (its size the graphs' Shape::group_size); none: the drafts' own masses.
    std::optional<GroupRule> group;
    int64_t judged = -1;  // the leading drafts that are real (-1: all); the others are rejected
  };
  struct Output {
    std::vector<int64_t> drafts;  // the chain, read back
    int64_t kept = 0;             // leading drafts kept
    int64_t next_token = -1;      // the residual's draw, or the bonus after a kept chain
    // With groups: the kept drafts their own masses would have rejected (their indices).
    std::vector<int64_t> relaxed;
    int64_t neighbors = 0;  // with groups: the tokens pooled for the judged drafts
    // Shape::redraw: row i of p re-drawn with redraw_uniforms[i - kept - 1] (rows up to
    // kept hold no meaningful draw), and p itself ([drafts + 1, vocab] float32, on the device).
    std::vector<int64_t> redraws;
    torch::Tensor p;
  };
  // Runs every call's verification from one replay, reads every call's output in one host
  // read and advances each cache by drafts + 1 (the caller truncates it to what it keeps).
  // INVALID_ARGUMENT for a call that does not Fit; a batch whose key failed to capture runs
  // call by call; FAILED_PRECONDITION for a lone call whose key failed to capture.
  StatusOr<std::vector<Output>> Run(const std::vector<Call>& calls) const;

  PoolGraphs::Counts counts() const;

  VerifyGraphs(const VerifyGraphs&) = delete;
  VerifyGraphs& operator=(const VerifyGraphs&) = delete;
  ~VerifyGraphs();

 private:
  using Key = std::tuple<int64_t, int64_t, bool>;  // (streams, span, filtered)
  struct Entry;
  VerifyGraphs(const KvPool& pool, Shape shape, RowGraphs::Model model,
               torch::Tensor embeddings);
  Status CaptureKey(const Key& key);
  // The verification over a key's static buffers (what is captured).
  void Body(Entry& e, const Key& key) const;
  // INVALID_ARGUMENT naming what a call lacks for these graphs.
  Status CheckCall(const Call& call) const;

  const KvPool& pool_;  // owns these graphs
  const Shape shape_;
  const int64_t drafts_;  // shape_.drafts
  const RowGraphs::Model model_;
  const torch::Tensor embeddings_;  // [V, dim] float32 where the model is (Shape::group_size)
  std::map<Key, std::unique_ptr<Entry>> entries_;
  // The static inputs, one set per stream count, shared by its keys' graphs (one worker
  // replays them, each after filling them): a window's q buffer is requests x drafts x vocab.
  struct Inputs;
  std::map<int64_t, std::unique_ptr<Inputs>> inputs_;
  struct MemoryPool;
  std::unique_ptr<MemoryPool> memory_pool_;
  mutable std::mutex mu_;  // counts_ only
  mutable PoolGraphs::Counts counts_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_VERIFY_GRAPHS_H_
