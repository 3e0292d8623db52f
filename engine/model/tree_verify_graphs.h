// CUDA graphs of a draft tree's verification over the target's KV-cache pool: one replay feeds
// the last committed token (the root) and every node of a deterministic tree (EAGLE-2's, drawn
// by eagle_tree_graphs.h) or of a static one drawn with q (EAGLE-1's) under the tree mask, mixes
// guidance, makes p, judges the tree with JudgeTree (tree_rejection.h: TreeVerifier's lossless walk
// as tensor ops), moves the kept path's cache rows right after the root's (KvCache::MoveRowsAt) and
// gathers the target features of the root and the kept path (what the EAGLE head is fed next),
// leaving the tree and its verdict in one small tensor read back in one host read. With the
// drafting in one replay, an EAGLE-2 step is two replays and one read (issue 61; SGLang's draft and
// verify graphs).
//
// A request's numbers are tensors (cfg_scale, temperature: 0 makes p one-hot, as
// ToProbabilities does), and every tree is judged by the sampled rule: on a one-hot p a child
// is kept exactly when it is the argmax after its parent and the next token is the argmax of
// what is left, which are the greedy walk's decisions (so no host flag enters the graph and a
// greedy request's numbers are never read). A static tree's greedy drafts carry one-hot q rows
// (the top tokens): a child that is the argmax has p' = q = 1 and is kept, any other has p' = 0
// and is rejected with p' unchanged, the same decisions again. A sampled request with a top-k or
// top-p filter verifies in filtered copies of the graphs (Shape::filters: p filtered by its own
// top_k and top_p, as DecodeSession::Probabilities filters it; a greedy request's p ignores
// them, so it takes the plain ones); without them it verifies eagerly (Fits).
//
// Keys: (requests, span, filtered). Requests come in powers of two up to the pool's (each
// request two streams: a guided request's conditional and unconditional halves) while the
// batches that need them fit the engine loop's default batch (256 rows: two 60-node trees);
// a batch of
// requests verifies in one replay: the target's forward over every request's tree at once
// (one read of the weights), then each request's p, walk, path features and cache moves
// (unrolled in the graph), and every request's verdict in one host read. Pad requests feed
// the scratch slot. The span is the longest request's cache after its tree, in whole
// ForwardGraphs::kSpanRows; a request whose tree was judged in a wider span than its own has
// its columns past its rows masked. Filtered and plain requests replay apart (p is filtered
// or not). A set of graphs serves one tree shape (nodes, depth bound); the worker's pools
// capture one set per shape of the family's EAGLE-2 trees at load (the full tree's, and those
// cut shorter where the image ends). Emulated graphs (LoadOptions::emulate_cuda_graphs) run
// the captured body eagerly at each replay, counted as one replay with none of its operators
// (op_count.h).
#ifndef MULO_ENGINE_MODEL_TREE_VERIFY_GRAPHS_H_
#define MULO_ENGINE_MODEL_TREE_VERIFY_GRAPHS_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/graph_set.h"
#include "engine/model/kv_cache.h"
#include "engine/model/pool_graphs.h"
#include "engine/model/row_graphs.h"
#include "engine/sampling/pooling.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

class KvPool;

class TreeVerifyGraphs {
 public:
  struct Shape {
    int64_t nodes = 0;      // the tree's drafts (the root not counted)
    int64_t max_depth = 0;  // at least the tree's depth (JudgeTree's path length)
    // The most children of one node: a static tree's widest (its drafts carry q and valid,
    // JudgeTree's static rules) or a relaxed deterministic tree's bound (the dynamic tree's
    // top_k); 0 for a lossless deterministic tree.
    int64_t max_children = 0;
    // A static tree's parents (-1 = the root, parents first), fixed in its graphs at capture:
    // its calls upload no layout. Empty for a deterministic tree.
    std::vector<int64_t> parents;
    // LANTERN's relaxation (relaxed_tree_rejection.h): kNone for the lossless rules, else the
    // pooling kind and the neighbours considered; relaxed graphs serve greedy requests (the
    // greedy relaxed rule on the untempered p) or sampled ones, `greedy` says which.
    Pooling relaxation = Pooling::kNone;
    int64_t k = 0;
    bool greedy = false;
    // Also capture graphs that filter p by a sampled request's top-k and top-p (not part of
    // SameKey: the plain and the filtered graphs are one set).
    bool filters = false;

    // SJD-PAC's window (sjd_pac.h, pac_tree.h): a static tree (parents above) whose nodes are
    // rows of a candidate table, the window's `window` drafts then `levels` x `extras` extra
    // candidates; the replay also runs the Jacobi update (tree_jacobi_update.h) for the next
    // window. window 0: none.
    struct Jacobi {
      int64_t window = 0, levels = 0, extras = 0;
      std::vector<int64_t> candidates;  // [nodes]: each node's row of the candidate table
      std::vector<int64_t> levels_of;   // [nodes]: each node's level (0: the root's children)
      std::vector<int64_t> main;        // [window]: the carried drafts' nodes, level by level
    } jacobi;

    bool drawn() const { return !parents.empty(); }
    bool relaxed() const { return relaxation != Pooling::kNone; }
    bool jacobi_window() const { return jacobi.window > 0; }
    // Whether graphs of `other` serve the trees of this shape (the static layout aside: a
    // static tree's is fixed by its size).
    bool SameKey(const Shape& other) const;
  };
  // Captures (or, with model.emulated, emulates) every span's graph of `shape` over `pool`
  // (the target's, made with a scratch slot); a relaxed shape pools over `neighbour_table`
  // (int64 [vocab, neighbours] on the model's device). INVALID_ARGUMENT without a scratch slot
  // or nodes, for a static shape without its parents or a relaxed one without its table or
  // sibling bound; a key whose capture fails is left out and counted (its steps verify
  // eagerly).
  static StatusOr<std::shared_ptr<TreeVerifyGraphs>> Capture(
      const KvPool& pool, Shape shape, RowGraphs::Model model,
      torch::Tensor neighbour_table = torch::Tensor());

  const KvPool& pool() const { return pool_; }
  const Shape& shape() const { return shape_; }
  // Whether a request may verify a tree of `nodes` drafts at most `max_depth` deep with
  // `cache` (a view of this pool, two streams) and `sampling`: the shape is these graphs', a
  // sampled request's top-k or top-p filter has its filtered copies, relaxed graphs are of the
  // request's kind (greedy or sampled), and the tree fits a captured span.
  bool Fits(const KvCache& cache, int64_t nodes, int64_t max_depth,
            const SamplingParams& sampling) const;

  struct Call {
    KvCache* cache = nullptr;  // fed every committed token but the last
    int64_t root_token = 0;    // the last committed token
    int64_t root_position = 0;  // its sequence position; node i's is this + its depth
    // The tree on the device (DeviceDynamicTree::ChosenTree's): tokens, parents (-1 = the
    // root), depths (1 for the root's children) int64 [nodes]; ancestors bool [nodes, nodes].
    // A static tree's graphs read the tokens alone (the rest is their shape's).
    torch::Tensor tokens, parents, depths, ancestors;
    // float64 on the device: the acceptance stream's next numbers [nodes] and the draw
    // stream's next [1]; undefined when greedy (never read).
    torch::Tensor accept_uniforms, draw_uniform;
    // A static tree's (shape().max_children > 0): float32 [nodes, vocab], the distribution each
    // draft was drawn from, and bool [nodes], whether its draw found mass.
    torch::Tensor q, valid;
    // Relaxed graphs: delta (additive) or lambda - 1 (multiplicative), the request's own.
    double relaxation_bound = 0.0;
    SamplingParams sampling;
    // A Jacobi window's graphs take their tokens, q and valid from these instead (tokens, q,
    // valid above undefined), and accept_uniforms holds nodes + window numbers (the walk's,
    // then the coupling's from the walk's last).
    struct Jacobi {
      std::vector<int64_t> drafts;  // [window]: the window's drafts (pads past `length`)
      // [levels][<= extras]: each branching level's extra candidates (fewer: the rest pads).
      std::vector<std::vector<int64_t>> extras;
      // [c <= window, V] float32: what the first c drafts were drawn from (the others are
      // fixed tokens: one-hot q), undefined for none; [l <= levels, extras, V]: what the
      // extras were drawn from, undefined for none.
      torch::Tensor carried_q, extras_q;
      int64_t length = 0;         // the real drafts
      bool bonus = false;         // whether a position follows the window
      int64_t last_position = 0;  // the last sequence position fed (ModelStream sets it)
      // float64 [window + 1 + levels * extras]: the drafter stream's next numbers (undefined
      // when greedy).
      torch::Tensor drafter_uniforms;
    } jacobi;
  };
  struct Output {
    // The one read: the tree's tokens [nodes], parents [nodes], then JudgeTree's verdict
    // (TreeDecisionFromHost parses it; relaxed graphs: JudgeRelaxedTree's,
    // RelaxedTreeDecisionFromHost).
    std::vector<int64_t> host;
    // [2, max_depth + 1, dim] on the device: the target features of the root's row and of the
    // kept drafts' rows in path order (the rows after the path are pads).
    torch::Tensor path_features;
    // A Jacobi window's, after the verdict in `host`: the re-draws [window + 1], the sibling
    // tokens [levels * extras] and their validity (0 / 1) [levels * extras]
    // (tree_jacobi_update.h); on the device, p along the carried path [window + 1, V] and
    // the siblings' q [levels, extras, V] (copies).
    torch::Tensor path_p, sibling_q;
  };
  // The verifications of `calls` (each a request's, Fits), in one replay per kind of p
  // (plain, filtered) and one host read for all; each call's cache is advanced by nodes + 1,
  // its rows after the root's now the kept path's (the caller keeps them: Compact of rows in
  // place moves nothing). The calls' tensors are copied into the graphs' buffers before the
  // replay. INVALID_ARGUMENT for a call that does not Fit, or whose q and valid are missing
  // for a static tree's graphs (or given for a deterministic tree's).
  StatusOr<std::vector<Output>> Run(const std::vector<Call>& calls) const;
  // The most requests one replay verifies.
  int64_t max_requests() const { return max_requests_; }

  PoolGraphs::Counts counts() const { return set_.counts(); }

  TreeVerifyGraphs(const TreeVerifyGraphs&) = delete;
  TreeVerifyGraphs& operator=(const TreeVerifyGraphs&) = delete;
  ~TreeVerifyGraphs();

 private:
  struct Entry;
  struct Inputs;
  TreeVerifyGraphs(const KvPool& pool, Shape shape, RowGraphs::Model model,
                   torch::Tensor neighbour_table);
  using Key = std::tuple<int64_t, int64_t, bool>;  // (requests, span, filtered)
  // The span a call's tree needs, and whether its p is filtered.
  int64_t SpanOf(const KvCache& cache) const;
  bool Filtered(const SamplingParams& sampling) const;
  Status CaptureSpan(int64_t span, bool filtered);
  // The static inputs of a replay of `requests` requests, made on first use (shared by every
  // span's graph of that many requests: one worker replays them one at a time).
  Inputs& InputsFor(int64_t requests);
  void Body(Entry& e, int64_t span, bool filtered) const;
  // Request `lane`'s part of the step before the forward: its tree and the forward's inputs.
  struct LaneTree;
  LaneTree TreeOf(const Inputs& in, int64_t lane, int64_t span) const;
  // A Jacobi window's tree as the graph makes it from the lane's ints and q buffers.
  void WindowTreeOf(const Inputs& in, int64_t lane, LaneTree& tree) const;
  // A call's checks before any replay.
  Status CheckCall(const Call& call) const;
  // A Jacobi window's call: checked against the shape, its ints appended to the upload, its
  // q and numbers copied into the lane's buffers.
  Status CheckWindow(const Call::Jacobi& call) const;
  void AppendWindowInts(const Call::Jacobi& call, std::vector<int64_t>& ints) const;
  void CopyWindowTensors(const Call::Jacobi& call, bool greedy, Inputs& in, int64_t lane) const;
  // A replay's ints: every lane's slots, then each lane's fields (pads: the capture's).
  std::vector<int64_t> ReplayInts(const std::vector<const Call*>& calls, int64_t requests) const;
  // Each call's tensors into its lane's buffers.
  void CopyCallTensors(const std::vector<const Call*>& calls, Inputs& in) const;
  // One replay for `calls` (one kind of p, at most max_requests()).
  StatusOr<std::vector<Output>> RunBatch(const std::vector<const Call*>& calls,
                                         bool filtered) const;

  const KvPool& pool_;  // the target's; owned by the worker's pools as these graphs are
  const Shape shape_;
  const RowGraphs::Model model_;
  const torch::Tensor neighbour_table_;  // relaxed shapes only
  int64_t max_requests_ = 1;
  std::map<int64_t, std::unique_ptr<Inputs>> inputs_;  // by requests
  std::map<Key, std::unique_ptr<Entry>> entries_;
  GraphSet set_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_TREE_VERIFY_GRAPHS_H_
