// CUDA graphs of MuLo-SD's verification over the target's KV-cache pool (paper Algorithm 1,
// steps 3 to 6 with the family's re-sampling from the verify forward): one replay feeds each
// request's tail (the committed tokens its cache lacks: the re-sampled run of its previous
// step, or the last committed token) and U_r's drafts after it, mixes guidance, makes p, scores
// every draft's pooled and own probability, keeps those whose pooled mass reaches tau, expands
// the rejections locally (local_expansion.h), re-draws every expanded position from p with the
// target stream's numbers in rank order and leaves the step's tokens, with the drafter's row,
// in one small tensor that the step reads once. Eagerly the same step dispatched ~230
// operators around its replayed forward (issue 61).
//
// The decisions are MuloState's device path's (mulo.cc): PooledThresholdVerifier::Kept,
// ExpandRejectionsOnDevice and a draw of p with the k-th re-sampled position taking the k-th
// number, given the same p. p comes from a forward of the tail and the drafts only (the eager
// step reuses the logits of the previous forward for the first draft when nothing was
// re-sampled; the graph re-feeds the last committed token instead), so the last bits of p may
// differ from the eager step's.
//
// Everything a replay reads is in its static buffers, filled by one upload and three device
// copies per replay: per stream its slot, cache length, first position and last position; per
// request its tail length, cfg_scale, temperature and tau; the tails, drafts, numbers and
// carried ids; and, for a request whose tail is empty (its first step, after the prefill), the
// prefill's logits of the first draft. Pad rows after a request's real ones (its rows rounded
// up to kRowsStep) write cache rows nothing attends; pad requests write to the scratch slot.
//
// Step graphs (Shape::draft, for a drafter that continues from its own tokens: DraftPrefix::
// kOwn) draft in the same replay first (paper steps 1 and 2): the drafter's row is drawn and
// fed over the drafter's pool (RowGraphs::DrawSteps, as its row graphs do, attending over its
// whole slot) and U_r up-samples the drafter's grid with that row in place (its rows below
// hold id 0, which no real row reads: U_r is row-causal, as ResamplerGraphs' batches rely
// on), so that a whole MuLo-SD step is one replay and one read instead of three replays
// (issue 61). The drafter's row is the step's carried ids; its next logits stay on the device.
// U_r runs at the eager step's height (its shapes, hence its bits, as ResamplerGraphs' lone
// calls), so step graphs are keyed (streams, rows, height), and each height attends over the
// span the longest condition (Drafting's prefix rows) needs there, in the target's and the
// drafter's slots: a longer span than a request's own, as pool_graphs.h's.
//
// Graphs that up-sample (Shape::upsample, for steps whose drafter draws its rows apart: a
// ZipAR wavefront, a prefix to re-feed) take the drafter's new rows as the call's carried ids
// (on the device, as the drafter left them) and run U_r on them in place after the drafter's
// prefix first, as step graphs do after drafting: the step is then the drafter's replay and
// this one instead of a third for U_r (issue 61). They are keyed by U_r's height as step
// graphs are, and need the drafting models but the drafter's pool.
//
// Keys (streams, rows, span, filtered): streams padded to a power of two, rows the longest
// request's tail and drafts rounded up to kRowsStep, span the longest cache after them in whole
// ForwardGraphs::kSpanRows; and whether the batch filters (a copy of each key that applies each
// request's top-k and top-p to p and to the drafter's draws, Shape::filters, as row_graphs.h's).
// A set of graphs serves one Shape (the family's MuLo-SD defaults, captured by the worker's
// pools at load); a request with other options, a filter where the graphs have no filtered
// copy, or a step that does not start a row steps eagerly (Fits).
#ifndef MULO_ENGINE_DECODE_MULO_VERIFY_GRAPHS_H_
#define MULO_ENGINE_DECODE_MULO_VERIFY_GRAPHS_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/local_expansion.h"
#include "engine/model/graph_set.h"
#include "engine/model/kv_cache.h"
#include "engine/model/pool_graphs.h"
#include "engine/model/resampler.h"
#include "engine/model/row_graphs.h"
#include "engine/sampling/latent_neighbors.h"
#include "engine/sampling/pooling.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

class KvPool;

class MuloVerifyGraphs {
 public:
  // A step's rows (tail and drafts) are rounded up to a multiple of this.
  static constexpr int64_t kRowsStep = 16;

  struct Shape {
    int64_t drafts = 0;  // U_r's drafts per step: r x draft_rows target rows
    int64_t grid = 0;    // the target grid's width (a step's drafts start a row)
    int64_t radius = 0;  // the local expansion's
    Rejection rejection = Rejection::kLocal;
    PoolingRule pooling;  // with its neighbour table (Capture) unless Pooling::kNone
    int64_t carried = 0;  // the drafter's ids per step, read back with the verdict
    // The replay drafts them first (step graphs: Capture's `drafting`): `carried` tokens of
    // the drafter's row, whose r x r blocks are the `drafts`.
    bool draft = false;
    // The replay up-samples the call's carried ids first (Capture's `drafting`, no drafter
    // pool needed): U_r's r x r blocks of them are the `drafts`. Not with `draft`.
    bool upsample = false;
    bool upsamples() const { return draft || upsample; }
    // Also capture a copy of every key that filters by each request's top-k and top-p (not
    // part of the shape's identity: operator== ignores it).
    bool filters = false;
    bool operator==(const Shape& other) const;
  };

  // What step graphs draft with (graphs that up-sample: U_r, the grid, the prefix rows).
  struct Drafting {
    const KvPool* pool = nullptr;  // the drafter's, with a scratch slot (step graphs)
    RowGraphs::Model model;        // the drafter's
    std::shared_ptr<const Resampler> upsampler;  // U_r
    int64_t grid = 0;              // the drafter's grid width and height
    // The most cache rows before raster token 0 (the longest condition) in the target's and
    // the drafter's slots: with a height they bound each key's spans.
    int64_t target_prefix_rows = 0, drafter_prefix_rows = 0;
  };

  // Captures (or, with model.emulated, emulates) every key's graph of `shape` over `pool`
  // (made with a scratch slot). `neighbors`: the family's latent neighbours (outlives the
  // graphs), needed unless the shape pools nothing. INVALID_ARGUMENT for a shape without
  // drafts or grid, drafts that do not fill whole rows, or pooling without neighbours of the
  // model's vocabulary; a key whose capture fails is left out and counted.
  // Step graphs (shape.draft) and graphs that up-sample (shape.upsample) need `drafting`,
  // whose up-sampler's factor r makes `carried` drafter tokens the `drafts` (r x r each);
  // INVALID_ARGUMENT otherwise.
  static StatusOr<std::shared_ptr<MuloVerifyGraphs>> Capture(
      const KvPool& pool, Shape shape, RowGraphs::Model model, const LatentNeighbors* neighbors,
      std::optional<Drafting> drafting = std::nullopt);

  const Shape& shape() const { return shape_; }
  const KvPool& pool() const { return pool_; }

  // Whether a request with `sampling` whose `cache` (a view of this pool), holding `cached`
  // rows (<= its length) before the tail, takes a tail of `tail` tokens may verify from these
  // graphs: two guidance streams, no top-k or top-p filter, a tail of at most `drafts` tokens,
  // and the rows fit a captured key.
  bool Fits(const KvCache& cache, int64_t cached, int64_t tail,
            const SamplingParams& sampling) const;
  // Step graphs: whether the drafter's `cache` (a view of Drafting::pool) holding `prefix`
  // tokens may draw its next row here with `sampling`: two streams, no filter, the row fits
  // its slot and the image.
  bool FitsDrafter(const KvCache& cache, int64_t prefix, const SamplingParams& sampling) const;

  // Step graphs: the drafter's row of a call, drawn as its row graphs draw it.
  struct DrafterRow {
    KvCache* cache = nullptr;      // the drafter's, fed every token of `prefix`
    torch::Tensor logits;          // [2, drafter vocab] float32: its next token's
    torch::Tensor uniforms;        // float64 [carried]: its stream's numbers (undefined: greedy)
    SamplingParams sampling;       // its cfg_scale and temperature
    std::vector<int64_t> prefix;   // its tokens of the committed rows (whole rows)
    int64_t first_position = 0;    // the row's first token's sequence position
    int64_t last_position = 0;     // the last a token is fed at
  };

  // One request's step.
  struct Call {
    KvCache* cache = nullptr;         // fed every committed token before the tail
    std::vector<int64_t> tail;        // the committed tokens after the cache's
    torch::Tensor first_logits;       // [2, V] the first draft's logits when the tail is empty
    torch::Tensor drafts;             // int64 [drafts] on the device (U_r's)
    torch::Tensor redraw_uniforms;    // float64 [drafts]: the target stream's next numbers
                                      // (undefined when greedy: p's argmax)
    torch::Tensor carried;            // int64 [carried] on the device, read back as is
    SamplingParams sampling;          // cfg_scale, temperature, top_k, top_p (Fits holds)
    double tau = 0.0;
    int64_t first_position = 0;       // the tail's first token's sequence position
    int64_t last_position = 0;        // the last a token is fed at (rows are clamped to it)
    DrafterRow drafter;               // step graphs only (`drafts` and `carried` unset);
                                      // graphs that up-sample read its `prefix` (`carried`
                                      // set, `drafts` unset)
  };
  // Read back as host values (parsed without tensor operators).
  struct Output {
    std::vector<int64_t> drafts, carried;
    // Every draft's pooled and own probability (float32 values), as
    // PooledThresholdVerifier::PooledAndOwn makes them, for its Judge.
    std::vector<double> pooled, own;
    // Every draft re-sampled or not, and the step's tokens (the re-draw where re-sampled, the
    // draft elsewhere), as MuloState's device path decides.
    std::vector<int64_t> resampled, tokens;
    // Step graphs: the drafter's logits after its row [2, drafter vocab] float32, on the device.
    torch::Tensor drafter_logits;
  };
  // Runs every call from one replay, reads every call's output in one host read and advances
  // each cache by its tail and drafts. INVALID_ARGUMENT for a call that does not Fit or has
  // the wrong counts; a batch whose key failed to capture runs call by call;
  // FAILED_PRECONDITION for a lone call whose key failed to capture.
  StatusOr<std::vector<Output>> Run(const std::vector<Call>& calls) const;

  // The rows a call's replay feeds per stream: its tail and drafts, rounded up.
  int64_t RowsOf(int64_t tail) const;

  PoolGraphs::Counts counts() const;

  MuloVerifyGraphs(const MuloVerifyGraphs&) = delete;
  MuloVerifyGraphs& operator=(const MuloVerifyGraphs&) = delete;
  ~MuloVerifyGraphs();

 private:
  // (streams, rows, span), or (streams, rows, U_r's height) for step graphs.
  using Key = std::tuple<int64_t, int64_t, int64_t, bool>;  // (streams, rows, span, filtered)
  struct Entry;
  struct Inputs;
  MuloVerifyGraphs(const KvPool& pool, Shape shape, RowGraphs::Model model,
                   const LatentNeighbors* neighbors, std::optional<Drafting> drafting);
  Status CaptureKey(const Key& key);
  // The step over a key's static buffers (what is captured): step graphs draft first. `last`:
  // the key's last field.
  void Body(Entry& e, int64_t streams, int64_t rows, int64_t last, bool filtered) const;
  // Step graphs: the drafter's row [requests, carried], drawn and fed over its pool.
  torch::Tensor DrawDrafterRow(Entry& e, int64_t streams, int64_t height, bool filtered) const;
  // U_r's drafts [requests, drafts] of the drafter's `row` [requests, carried] in place after
  // each request's prefix, at `height`.
  torch::Tensor UpSample(Entry& e, int64_t height, const torch::Tensor& row) const;
  // Step graphs: the target's and the drafter's spans at U_r's `height` (the rows a request
  // there may reach: its prefix, its tokens through the step's rows, a batch's padded tail).
  int64_t StepSpan(int64_t height) const;
  int64_t DrafterSpan(int64_t height) const;
  // Steps 3 to 6 on `draft_ids` [requests, drafts], read back with `carried_ids`.
  void Verify(Entry& e, const torch::Tensor& draft_ids, const torch::Tensor& carried_ids,
              int64_t streams, int64_t rows, int64_t span, bool filtered) const;
  // A call's fields against the shape (its drafter's too for step graphs), or INVALID_ARGUMENT.
  Status CheckCall(const Call& call) const;
  // Copies each call's numbers, logits and drafts into the entry's input buffers.
  void UploadCalls(Entry& e, const std::vector<Call>& calls) const;

  const KvPool& pool_;  // owns the slots these graphs read
  const Shape shape_;
  const RowGraphs::Model model_;
  const LatentNeighbors* const neighbors_;
  const std::optional<Drafting> drafting_;
  std::map<Key, std::unique_ptr<Entry>> entries_;
  // The static inputs, one set per (streams, rows), shared by its spans' graphs (one worker
  // replays them, each after filling them).
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Inputs>> inputs_;
  GraphSet set_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_MULO_VERIFY_GRAPHS_H_
