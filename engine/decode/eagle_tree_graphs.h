// CUDA graphs of EAGLE's whole drafting step over the EAGLE head's KV-cache pool: one replay
// feeds the committed pairs the head has not seen (the catch-up), grows the tree and leaves it
// to verify, with no host read. The tree is either
//   - EAGLE-2's dynamic tree: DeviceDynamicTree's Start and its `depth` expansions, each a
//     masked head forward over the frontier and the target's output head, then its choice; or
//   - EAGLE-1's static tree (StaticTree57Cut): level by level, every node's children drawn
//     without replacement from the ranking distribution after it (DrawSiblingsOnDevice, as
//     EagleProposer::ProposeStatic draws them), then one masked head forward over the level's
//     nodes that have children. The levels' index tensors and masks are the shape's, made on
//     the device before capture.
// SGLang captures EAGLE's draft loop as one graph for the same reason (issue 61): eagerly, the
// expansions dispatched ~1,600 operators per step around their replayed head forwards, about
// 3 ms of host time per step on a GPU.
//
// Everything a replay reads is in its static buffers, filled by one upload per replay:
//   - per request: its two head slots, its cache length before the catch-up, how many pairs it
//     feeds (1 .. max_pairs()) and their tokens (padded with token 0), its cfg_scale and
//     temperature (the ranking distribution's, DecodeSession::RankingProbabilities: untempered
//     when greedy), its top_p and top_k (read by the filtered copies);
//   - each request's pairs' target features [2, max_pairs(), dim] (pads stale: only pad rows
//     read them);
//   - a sampled static tree's numbers, per request, the drafter stream's next one per node in
//     draw order (a greedy static tree takes each node's top tokens: greedy and sampled draws
//     are graphs of their own).
// Pad pairs write head cache rows past the catch-up's, which the tree's rows overwrite or
// nothing attends. The tree's rows are dropped after the replay (the cache keeps the pairs).
// Every tree node attends the committed rows, its ancestors' rows and its own, under a mask
// built on the device from the cache length: the shapes depend only on the tree options, so
// one graph per span serves every step of every request with those options.
//
// Keys: (requests, span, filtered). Requests come in powers of two up to the pool's (each
// request two streams: a guided request's conditional and unconditional halves) while the
// batches that need them fit the engine loop's default batch (256 rows of the widest
// forward); a batch of requests drafts in one replay: every request's catch-up in one head
// forward, then each depth's frontiers (or a static tree's level) of every request in one
// head forward (one read of the head's weights for all), each request's ranking, expansion
// and choice unrolled in the graph. Pad requests feed the scratch slot. The span is the
// longest request's cache after the step's rows, in whole ForwardGraphs::kSpanRows (a
// request's columns past its own rows are masked); whether the ranking is filtered splits
// batches. A set of graphs grows one tree shape; the worker's pools
// capture one set at load for the family's EAGLE-2 tree and one for each shorter depth it is
// cut to where the image ends, and for the static tree one per depth and draw (greedy or
// sampled).
// PEANUT's trees change width every step (its 4 default images took 55 shapes in 327 steps), so
// its sets are padded (CapturePadded): one set per depth, chosen count and padded width
// grows every width up to it, each request's width riding in the upload (DeviceDynamicTree's
// padded tree: the same chosen tree). A sampled request with a top-k or top-p filter ranks by
// its filtered distribution (DecodeSession::RankingProbabilities), in filtered copies of the
// graphs (`filters` at capture; a greedy request ranks unfiltered and takes the plain ones).
// A request with other options, a filter the graphs were captured without, or one stream
// grows its tree eagerly (Fits, FitsStatic).
// Emulated graphs (LoadOptions::emulate_cuda_graphs) run the captured body eagerly at each
// replay, counted as one replay with none of its operators (op_count.h).
#ifndef MULO_ENGINE_DECODE_EAGLE_TREE_GRAPHS_H_
#define MULO_ENGINE_DECODE_EAGLE_TREE_GRAPHS_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/device_dynamic_tree.h"
#include "engine/decode/dynamic_tree.h"
#include "engine/model/graph_set.h"
#include "engine/model/kv_cache.h"
#include "engine/model/pool_graphs.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

class KvPool;

class EagleTreeGraphs {
 public:
  // The models' pieces a drafting step is made of, each graph-capturable.
  struct Model {
    PoolGraphs::Body head;  // the EAGLE head over its pool's slots (EagleHead::SlotForward)
    // The target's embeddings [streams, n, dim] of drawn ids [streams, n] (int64, on the
    // device, not range-checked) and its output head: logits [streams, n, vocab] float32 of
    // features [streams, n, dim].
    std::function<torch::Tensor(const torch::Tensor& ids)> embed;
    std::function<torch::Tensor(const torch::Tensor& hidden)> logits;
    int64_t dim = 0;
    int64_t vocab = 0;
    torch::TensorOptions options;  // the head's inputs' dtype and device
    bool emulated = false;  // replays run the body eagerly (LoadOptions::emulate_cuda_graphs)
  };

  // EAGLE-1's tree (LANTERN++'s): StaticTree57Cut(depth), its children drawn greedily (each
  // node's top tokens) or with the drafter stream's numbers.
  struct StaticTree {
    int64_t depth = 0;  // 1 .. 5
    bool greedy = false;
  };

  // Captures (or, with model.emulated, emulates) every span's graph of trees with `tree`'s
  // options over `pool` (the head's, made with a scratch slot), each feeding up to `max_pairs`
  // committed pairs first: a step commits at most its tree's deepest path and the next token
  // (the family's full tree: depth + 2), or the first step's one. INVALID_ARGUMENT without a
  // scratch slot; a key whose capture fails is left out and counted (its steps grow eagerly).
  // `filters`: also a filtered copy of every span's graph, for sampled requests with a top-k
  // or top-p filter.
  static StatusOr<std::shared_ptr<EagleTreeGraphs>> Capture(const KvPool& pool,
                                                            DynamicTreeOptions tree,
                                                            int64_t max_pairs, Model model,
                                                            bool filters = false);

  // The same for trees of `tree`'s depth and every width up to tree.top_k (at most the
  // vocabulary) whose chosen count (ChosenNodes) is tree.total_tokens.
  static StatusOr<std::shared_ptr<EagleTreeGraphs>> CapturePadded(const KvPool& pool,
                                                                  DynamicTreeOptions tree,
                                                                  int64_t max_pairs, Model model,
                                                                  bool filters = false);

  // The same for the static tree `tree` (filtered copies only for a sampled draw: a greedy
  // one ranks unfiltered). INVALID_ARGUMENT also for a depth outside 1 .. 5.
  static StatusOr<std::shared_ptr<EagleTreeGraphs>> CaptureStatic(const KvPool& pool,
                                                                  StaticTree tree,
                                                                  int64_t max_pairs, Model model,
                                                                  bool filters = false);

  const KvPool& pool() const { return pool_; }
  // The dynamic tree these graphs grow (padded: the widest, with the chosen count);
  // meaningless when static_tree() is set.
  const DynamicTreeOptions& tree() const { return tree_; }
  bool padded() const { return padded_; }
  // Whether these graphs grow the dynamic tree of `options`: its own, or for padded graphs
  // any of their depth and chosen count no wider than theirs.
  bool Grows(const DynamicTreeOptions& options) const;
  // The static tree these graphs draw, or nullopt (a dynamic tree's graphs).
  const std::optional<StaticTree>& static_tree() const { return static_tree_; }
  int64_t max_pairs() const { return max_pairs_; }

  // Whether a request's step may draft from these graphs: `cache` (its head cache, two
  // streams) is a view of this pool, `pairs` fit, these graphs grow the tree (Grows), a
  // sampled request's top-k or top-p filter has its filtered copies and the step's rows fit a
  // captured span.
  bool Fits(const KvCache& cache, int64_t pairs, const DynamicTreeOptions& options,
            const SamplingParams& sampling) const;
  // The same for a static tree cut to `depth` levels; greedy requests (temperature 0) take the
  // greedy draw's graphs, the others the sampled one's.
  bool FitsStatic(const KvCache& cache, int64_t pairs, int64_t depth,
                  const SamplingParams& sampling) const;

  struct Call {
    KvCache* cache = nullptr;     // the head's cache: the committed pairs fed so far
    std::vector<int64_t> tokens;  // the pairs' tokens
    torch::Tensor features;       // [2, pairs, dim]: the target features that predicted them
    SamplingParams sampling;
    // A sampled static tree's numbers: float64 [nodes] on the device, the drafter stream's
    // next ones (DecodeSession::DrawNumbers); undefined otherwise.
    torch::Tensor numbers;
    // The step's tree (the dynamic tree's graphs: one they grow).
    DynamicTreeOptions tree;
  };
  // A drafted tree, left on the device as views of the graph's outputs (tree.borrowed), valid
  // until these graphs' next replay: a step that hands them straight to the verify graphs'
  // upload copies nothing, one that first yields to the engine loop (a read, a batched
  // forward) takes Owned copies.
  struct Draft {
    // The dynamic tree: DeviceDynamicTree's choice (as EagleProposer grows it eagerly). The
    // static tree: tokens (drawn), parents, depths, ancestors (the shape's), max_depth.
    DeviceDynamicTree::ChosenTree tree;
    // A static tree's: float32 [nodes, vocab], the distribution each draft came from, and
    // bool [nodes], whether its draw found mass; undefined for a dynamic tree.
    torch::Tensor q, valid;
    int64_t max_children = 0;   // a static tree's widest node
    int64_t head_forwards = 0;  // the catch-up and one per depth (a static tree's: level) fed

    // The draws in tensors of their own (a static tree's shape is constants nothing rewrites).
    Draft Owned() const;
  };
  using Output = Draft;
  // Whether `call` may draft from these graphs (Fits, or FitsStatic for a static tree's, with
  // its features and, sampled static, its numbers): INVALID_ARGUMENT naming what is wrong.
  Status Check(const Call& call) const;
  // The trees of `calls` (each Check-ed), in one replay per kind of ranking (plain, filtered)
  // and batch of at most max_requests(); each call's cache is advanced by its pairs.
  // FAILED_PRECONDITION when a lone call's key failed to capture.
  StatusOr<std::vector<Draft>> Run(const std::vector<Call>& calls) const;
  // The most requests one replay drafts.
  int64_t max_requests() const { return max_requests_; }
  // The most head rows per stream one forward of a replay feeds for one request (the
  // catch-up's pairs, or the widest frontier or level): its share of a batch's rows.
  int64_t lane_rows() const;

  PoolGraphs::Counts counts() const { return set_.counts(); }

  EagleTreeGraphs(const EagleTreeGraphs&) = delete;
  EagleTreeGraphs& operator=(const EagleTreeGraphs&) = delete;
  ~EagleTreeGraphs();

 private:
  struct Entry;
  struct Inputs;
  struct Lane;
  struct StaticLevel;
  struct Numbers;
  EagleTreeGraphs(const KvPool& pool, DynamicTreeOptions tree, int64_t max_pairs, Model model,
                  bool filters, bool padded = false);
  using Key = std::tuple<int64_t, int64_t, bool>;  // (requests, span, filtered)
  static StatusOr<std::shared_ptr<EagleTreeGraphs>> CaptureAll(
      std::shared_ptr<EagleTreeGraphs> graphs);
  // Sets max_requests_ (after PlanStatic: a static tree's levels bound its rows).
  void PlanRequests();
  Status CaptureSpan(int64_t span, bool filtered);
  // Makes static_levels_ and the shape's tensors for static_tree_ (before any capture).
  void PlanStatic();
  // The cache rows a step writes after the committed ones: the pairs and the tree's frontiers
  // (a static tree's: its nodes with children).
  int64_t rows_written() const;
  // A request's ints after the slots, and a pad request's (the capture's).
  int64_t lane_ints() const;
  std::vector<int64_t> PadLane() const;
  // The rows a call would span, and whether it ranks by a filtered distribution.
  int64_t SpanOf(const KvCache& cache) const;
  bool Filtered(const SamplingParams& sampling) const;
  // Whether the call's cache, pairs and sampling fit these graphs (the tree aside).
  bool FitsCall(const KvCache& cache, int64_t pairs, const SamplingParams& sampling) const;
  // The static inputs of a replay of `requests` requests, made on first use.
  Inputs& InputsFor(int64_t requests);
  // The step over a span's static buffers (what is captured), and its parts: request `lane`'s
  // fields as tensors; the dynamic trees grown; the static trees drawn (after the catch-up).
  void Body(Entry& e, int64_t span, bool filtered) const;
  Lane LaneOf(const Inputs& in, int64_t lane, bool filtered) const;
  void GrowDynamic(Entry& e, std::vector<Lane>& lanes) const;
  void DrawStatic(Entry& e, std::vector<Lane>& lanes) const;
  // The ranking distribution [m, vocab] after predicted features [2, m, dim].
  torch::Tensor Ranking(const torch::Tensor& features, const Numbers& numbers) const;
  // A replay's ints: every lane's slots, then each lane's fields (pads: the capture's).
  std::vector<int64_t> ReplayInts(const std::vector<const Call*>& calls, int64_t requests) const;
  // One replay for `calls` (one kind of ranking, at most max_requests()).
  StatusOr<std::vector<Draft>> RunBatch(const std::vector<const Call*>& calls, bool filtered) const;
  // What a caller gets of a lane's outputs (views, with a static tree's shape).
  Draft DraftOf(const Draft& written) const;

  const KvPool& pool_;  // the head's; owned by the worker's pools as these graphs are
  const DynamicTreeOptions tree_;
  const bool padded_;  // the width rides in the upload (CapturePadded)
  const bool filters_;  // filtered copies captured (a greedy static draw's never are)
  std::optional<StaticTree> static_tree_;
  const int64_t max_pairs_;
  const Model model_;
  // The static tree's shape on the device and its levels (PlanStatic).
  DeviceDynamicTree::ChosenTree static_shape_;
  int64_t static_widest_ = 0;
  std::vector<StaticLevel> static_levels_;
  int64_t max_requests_ = 1;
  std::map<int64_t, std::unique_ptr<Inputs>> inputs_;  // by requests
  std::map<Key, std::unique_ptr<Entry>> entries_;
  GraphSet set_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_EAGLE_TREE_GRAPHS_H_
