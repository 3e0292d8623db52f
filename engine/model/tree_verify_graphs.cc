#include "engine/model/tree_verify_graphs.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"
#include "engine/sampling/relaxed_tree_rejection.h"
#include "engine/sampling/row_sampler.h"
#include "engine/sampling/tree_jacobi_update.h"
#include "engine/sampling/tree_rejection.h"

namespace mulo::engine {

namespace {

// A request's ints (its lane), after every lane's two slots: the cache length (the root's
// row), the root token, its sequence position, then cfg_scale, temperature, the relaxation's
// bound and top_p as float64 bits, and top_k.
constexpr int64_t kLaneInts = 8;
constexpr int64_t kParamsAt = 3, kTopKAt = 7;
// A Jacobi window's after them: the drafts with a carried q, the real drafts, whether a
// position follows, the image's last position, the levels that branch, then each level's
// extras, the window's drafts and the extras (Call::Jacobi).
constexpr int64_t kJacobiFields = 5;
// The most target rows (streams x tree rows) one replay feeds: the engine loop's default row
// budget per batch (--max_batch_tokens), which caps what a batch carries anyway. Each batch
// size is another graph per span and kind of p (captured at load), so sizes no batch takes
// by default are not captured: two of the family's 60-node trees (a batch of three would need
// four lanes), more of the cut ones.
constexpr int64_t kMaxReplayRows = 256;

int64_t LaneIntsOf(const TreeVerifyGraphs::Shape& shape) {
  const TreeVerifyGraphs::Shape::Jacobi& j = shape.jacobi;
  return kLaneInts +
         (shape.jacobi_window() ? kJacobiFields + j.levels + j.window + j.levels * j.extras : 0);
}

// The verify forward's attention over `span` cache columns: the root (at the cache's
// `length`) sees the prefix and itself, node i (the row after it) also its ancestors and
// itself. `ancestors` [nodes, nodes] bool. [nodes + 1, span] bool.
torch::Tensor TreeRowsMask(const torch::Tensor& ancestors, const torch::Tensor& length,
                           int64_t span) {
  const int64_t nodes = ancestors.size(0);
  const torch::Tensor columns =
      torch::arange(span, torch::dtype(torch::kInt64).device(ancestors.device()));
  const torch::Tensor relative = columns - (length + 1);  // column c is node c - length - 1
  const torch::Tensor in_tree = ((relative >= 0) & (relative < nodes)).unsqueeze(0);
  const torch::Tensor node_ancestors =
      torch::constant_pad_nd(ancestors, {0, 0, 1, 0}, 0)  // the root's row: no node
          .index_select(1, relative.clamp(0, nodes - 1));
  return (columns <= length).unsqueeze(0) | (node_ancestors & in_tree);
}

}  // namespace

// The static inputs of replays of `requests` requests, filled per replay: the ints (every
// lane's two slots, then each lane's fields); each lane's tree, numbers, a static tree's q
// and valid (undefined for a deterministic tree's graphs) and a Jacobi window's q and drafter
// numbers; a Jacobi window's constants, fixed at capture: each node's candidate, level, extra
// rank (-1: a carried draft) and whether its parent is off the carried path, the carried
// path's nodes and its rows of p [window + 1].
struct TreeVerifyGraphs::Inputs {
  int64_t requests = 0;
  torch::Tensor ints;
  struct Lane {
    torch::Tensor tokens, parents, depths, ancestors, accept, draw, q, valid;
    torch::Tensor carried_q, extras_q, drafter;  // [window, V], [levels, extras, V], numbers
  };
  std::vector<Lane> lanes;
  torch::Tensor candidates, levels, extra_ranks, off_main, main, path_rows;
  std::optional<KvCache> view;  // the pool's slots as the ints' first 2 x requests index them
  int64_t bytes = 0;            // counted with the first graph that reads them
  bool counted = false;

  torch::Tensor LaneFields(int64_t lane, int64_t width) const {
    return ints.narrow(0, 2 * requests + lane * width, width);
  }
};

struct TreeVerifyGraphs::Entry {
  Inputs* inputs = nullptr;
  torch::Tensor result;  // int64 [requests x (2 nodes + 3 + max_depth (+ a window's))]
  // Per request: [2, max_depth + 1, dim]; a Jacobi window's p along the carried path and
  // the siblings' q (Output's).
  std::vector<torch::Tensor> path_features, path_p, sibling_q;
  std::unique_ptr<ReplayableGraph> graph;
};

// A request's part of a replay before the target's forward.
struct TreeVerifyGraphs::LaneTree {
  torch::Tensor fields;  // the lane's ints
  torch::Tensor tokens, q, valid, last_position;
  torch::Tensor ids, positions, rows, mask;  // the forward's, [2, nodes + 1] (mask: x span)
};

bool TreeVerifyGraphs::Shape::SameKey(const Shape& other) const {
  return nodes == other.nodes && max_depth == other.max_depth &&
         max_children == other.max_children && drawn() == other.drawn() &&
         relaxation == other.relaxation && (!relaxed() || (k == other.k && greedy == other.greedy)) &&
         jacobi.window == other.jacobi.window && jacobi.levels == other.jacobi.levels &&
         jacobi.extras == other.jacobi.extras;
}

TreeVerifyGraphs::TreeVerifyGraphs(const KvPool& pool, Shape shape, RowGraphs::Model model,
                                   torch::Tensor neighbour_table)
    : pool_(pool),
      shape_(std::move(shape)),
      model_(std::move(model)),
      neighbour_table_(std::move(neighbour_table)) {
  // Requests in powers of two, as many as the pool holds (two slots each), while the smallest
  // batch that needs the next size (one request more than this one) fits kMaxReplayRows.
  const int64_t most = std::max<int64_t>(1, PoolGraphs::Bucket(pool_.slots()) / 2);
  while (2 * max_requests_ <= most &&
         (max_requests_ + 1) * 2 * (shape_.nodes + 1) <= kMaxReplayRows) {
    max_requests_ *= 2;
  }
}

TreeVerifyGraphs::~TreeVerifyGraphs() = default;

StatusOr<std::shared_ptr<TreeVerifyGraphs>> TreeVerifyGraphs::Capture(
    const KvPool& pool, Shape shape, RowGraphs::Model model, torch::Tensor neighbour_table) {
  if (pool.scratch_slot() < 0) {
    return InvalidArgumentError("TreeVerifyGraphs: the pool needs a scratch slot");
  }
  if (shape.nodes < 1 || shape.max_depth < 1) {
    return InvalidArgumentError("TreeVerifyGraphs: a tree needs nodes and a depth");
  }
  if (shape.drawn() && (shape.max_children < 1 ||
                        static_cast<int64_t>(shape.parents.size()) != shape.nodes)) {
    return InvalidArgumentError(
        "TreeVerifyGraphs: a static tree needs its nodes' parents and its widest node");
  }
  if (!shape.drawn() && !shape.relaxed() && shape.max_children != 0) {
    return InvalidArgumentError(
        "TreeVerifyGraphs: max_children is a static or relaxed tree's (parents missing?)");
  }
  const Shape::Jacobi& jacobi = shape.jacobi;
  if (shape.jacobi_window() &&
      (!shape.drawn() || shape.relaxed() || shape.max_depth < jacobi.window ||
       static_cast<int64_t>(jacobi.candidates.size()) != shape.nodes ||
       static_cast<int64_t>(jacobi.levels_of.size()) != shape.nodes ||
       static_cast<int64_t>(jacobi.main.size()) != jacobi.window)) {
    return InvalidArgumentError(
        "TreeVerifyGraphs: a Jacobi window needs a static lossless tree as deep as the window, "
        "each node's candidate and level and the carried path's nodes");
  }
  if (shape.relaxed() &&
      (shape.max_children < 1 || !neighbour_table.defined() || neighbour_table.dim() != 2 ||
       neighbour_table.size(0) != model.vocab)) {
    return InvalidArgumentError(
        "TreeVerifyGraphs: a relaxed tree needs its sibling bound and the neighbour table");
  }
  std::shared_ptr<TreeVerifyGraphs> graphs(new TreeVerifyGraphs(
      pool, std::move(shape), std::move(model), std::move(neighbour_table)));
  TreeVerifyGraphs* const raw = graphs.get();
  MULO_RETURN_IF_ERROR(graphs->set_.CaptureSpans(
      pool, graphs->shape_.nodes + 1, graphs->model_.options.device(),
      [raw](int64_t span) {
        MULO_RETURN_IF_ERROR(raw->CaptureSpan(span, /*filtered=*/false));
        // A greedy request's p ignores its filters: greedy relaxed graphs need no copy.
        const bool filters =
            raw->shape_.filters && !(raw->shape_.relaxed() && raw->shape_.greedy);
        return filters ? raw->CaptureSpan(span, /*filtered=*/true) : OkStatus();
      }));
  return graphs;
}

void TreeVerifyGraphs::WindowTreeOf(const Inputs& in, int64_t lane, LaneTree& tree) const {
  const Shape::Jacobi& j = shape_.jacobi;
  const Inputs::Lane& l = in.lanes[lane];
  const int64_t window = j.window, table_extras = j.levels * j.extras;
  const torch::Tensor fields = tree.fields.narrow(0, kLaneInts, LaneIntsOf(shape_) - kLaneInts);
  const torch::Tensor carried = fields.narrow(0, 0, 1), length = fields.narrow(0, 1, 1);
  const torch::Tensor counts = fields.narrow(0, kJacobiFields, j.levels);
  const torch::Tensor drafts = fields.narrow(0, kJacobiFields + j.levels, window);
  const torch::Tensor extras = fields.narrow(0, kJacobiFields + j.levels + window, table_extras);
  tree.tokens = torch::cat({drafts, extras}).index_select(0, in.candidates);
  // The table's q: the carried drafts', the fixed tokens' one-hot rows, then the extras'.
  const torch::Tensor fixed = torch::zeros_like(l.carried_q).scatter_(1, drafts.unsqueeze(1), 1.0);
  const torch::Tensor has_q =
      (torch::arange(window, drafts.options()) < carried).unsqueeze(1);
  tree.q = torch::cat({torch::where(has_q, l.carried_q, fixed),
                       l.extras_q.reshape({table_extras, model_.vocab})})
               .index_select(0, in.candidates);
  // A node is real when its level is in the window and, an extra, its level has that many;
  // a carried draft off the carried path only where its level branches (the eager tree's).
  const torch::Tensor branching = fields.narrow(0, 4, 1);
  const torch::Tensor extra = in.extra_ranks >= 0;
  tree.valid = (in.levels < length) & (extra | ~in.off_main | (in.levels < branching));
  if (table_extras > 0) {
    const torch::Tensor level_count = counts.index_select(0, in.levels.clamp_max(j.levels - 1));
    tree.valid = tree.valid & (~extra | (in.extra_ranks < level_count));
  } else {
    tree.valid = tree.valid & ~extra;
  }
  tree.last_position = fields.narrow(0, 3, 1);
}

TreeVerifyGraphs::LaneTree TreeVerifyGraphs::TreeOf(const Inputs& in, int64_t lane,
                                                    int64_t span) const {
  const Inputs::Lane& l = in.lanes[lane];
  const int64_t rows = shape_.nodes + 1;
  const auto longs = torch::dtype(torch::kInt64).device(model_.options.device());
  LaneTree tree;
  tree.fields = in.LaneFields(lane, LaneIntsOf(shape_));
  const torch::Tensor length = tree.fields.narrow(0, 0, 1);
  const torch::Tensor root = tree.fields.narrow(0, 1, 1);
  const torch::Tensor root_position = tree.fields.narrow(0, 2, 1);
  if (shape_.jacobi_window()) {
    WindowTreeOf(in, lane, tree);
  } else {
    tree.tokens = l.tokens;
    tree.q = l.q;
    tree.valid = l.valid;
  }
  // The root at the cache's length, node i at the row after it; positions by depth.
  tree.ids = torch::cat({root, tree.tokens}).unsqueeze(0).expand({2, rows});
  torch::Tensor positions = root_position + torch::constant_pad_nd(l.depths, {1, 0}, 0);
  // A window padded past the image's end feeds its pads at the last position (rows no one
  // keeps), as the chain verify graphs do.
  if (shape_.jacobi_window()) positions = torch::minimum(positions, tree.last_position);
  tree.positions = positions.unsqueeze(0).expand({2, rows});
  tree.rows = (length + torch::arange(rows, longs)).unsqueeze(0).expand({2, rows});
  tree.mask = TreeRowsMask(l.ancestors, length, span).unsqueeze(0).expand({2, rows, span});
  return tree;
}

void TreeVerifyGraphs::Body(Entry& e, int64_t span, bool filtered) const {
  at::NoGradGuard no_grad;
  Inputs& in = *e.inputs;
  const int64_t nodes = shape_.nodes, max_depth = shape_.max_depth;
  const auto longs = torch::dtype(torch::kInt64).device(model_.options.device());
  // Every request's tree in one forward of the target (a read of its weights for all).
  std::vector<LaneTree> trees;
  std::vector<torch::Tensor> ids, positions, rows, masks;
  for (int64_t lane = 0; lane < in.requests; ++lane) {
    trees.push_back(TreeOf(in, lane, span));
    ids.push_back(trees.back().ids);
    positions.push_back(trees.back().positions);
    rows.push_back(trees.back().rows);
    masks.push_back(trees.back().mask);
  }
  PoolGraphs::Inputs forward;
  forward.span = span;
  forward.inputs = {model_.embed(torch::cat(ids))};
  forward.positions = torch::cat(positions);
  forward.rows = torch::cat(rows);
  forward.mask = torch::cat(masks);
  const std::vector<torch::Tensor> out = model_.forward(*in.view, forward);
  const torch::Tensor logits = out[1].to(torch::kFloat32);
  // Then each request's judgement, unrolled in the graph.
  std::vector<torch::Tensor> result, from, places;
  e.path_features.assign(in.requests, torch::Tensor());
  e.path_p.assign(in.requests, torch::Tensor());
  e.sibling_q.assign(in.requests, torch::Tensor());
  for (int64_t lane = 0; lane < in.requests; ++lane) {
    const LaneTree& tree = trees[lane];
    const Inputs::Lane& l = in.lanes[lane];
    const torch::Tensor length = tree.fields.narrow(0, 0, 1);
    const torch::Tensor params = tree.fields.narrow(0, kParamsAt, 4).view(torch::kFloat64);
    const torch::Tensor cfg = params.narrow(0, 0, 1).to(torch::kFloat32);
    const torch::Tensor temperature = params.narrow(0, 1, 1).to(torch::kFloat32);
    const RowFilters filters{tree.fields.narrow(0, kTopKAt, 1).view({1, 1}),
                             params.narrow(0, 3, 1).view({1, 1})};
    // p as DecodeSession::Probabilities makes it: MixCfg, tempering, softmax; one-hot
    // greedy. Relaxed: as the host's relaxed step makes it, the request's own sampled and
    // the untempered ranking distribution greedy (a one-hot p leaves nothing to pool), which
    // the divisor of 1 at temperature 0 gives.
    const torch::Tensor p = GuidedProbabilities(
        logits.select(0, 2 * lane), logits.select(0, 2 * lane + 1), cfg, temperature,
        /*one_hot_greedy=*/!shape_.relaxed(), filtered ? &filters : nullptr);
    const bool jacobi = shape_.jacobi_window();
    const torch::Tensor walk_numbers = jacobi ? l.accept.narrow(0, 0, nodes) : l.accept;
    TreeCall call{p,      tree.tokens,      l.parents,          walk_numbers,
                  l.draw, /*greedy=*/false, max_depth,          l.ancestors,
                  tree.q, tree.valid,       shape_.max_children};
    torch::Tensor verdict;
    if (shape_.relaxed()) {
      call.greedy = shape_.greedy;
      verdict = JudgeRelaxedTree(
          {call, neighbour_table_, shape_.relaxation, shape_.k, params.narrow(0, 2, 1)});
    } else {
      verdict = JudgeTree(call);
    }
    result.insert(result.end(), {tree.tokens, l.parents, verdict});
    if (jacobi) {
      const Shape::Jacobi& j = shape_.jacobi;
      const torch::Tensor fields = tree.fields.narrow(0, kLaneInts, kJacobiFields);
      e.path_p[lane] = p.index_select(0, in.path_rows);
      const TreeJacobiUpdate update =
          UpdateJacobiAfterTree({e.path_p[lane], tree.tokens.index_select(0, in.main),
                                 tree.q.index_select(0, in.main), verdict, fields.narrow(0, 1, 1),
                                 fields.narrow(0, 2, 1), l.accept, l.drafter, j.levels, j.extras});
      result.insert(result.end(), {update.redraws, update.sibling_tokens.flatten(),
                                   update.sibling_valid.to(torch::kInt64).flatten()});
      e.sibling_q[lane] = update.sibling_q;
    }
    // The features of the root's row and the kept path's rows (pads: the root's).
    const torch::Tensor path = verdict.narrow(0, 3, max_depth);
    const torch::Tensor kept = path >= 0;
    e.path_features[lane] =
        out[0]
            .narrow(0, 2 * lane, 2)
            .index_select(1, torch::cat({torch::zeros({1}, longs),
                                         torch::where(kept, path + 1, torch::zeros_like(path))}));
    // The kept path's cache rows move right after the root's (the pads onto themselves):
    // the cache then holds the committed prefix, with nothing left for the host to move.
    const torch::Tensor to = length + 1 + torch::arange(max_depth, longs);
    from.push_back(torch::where(kept, length + 1 + path, to).unsqueeze(0).expand({2, max_depth}));
    places.push_back(to.unsqueeze(0).expand({2, max_depth}));
  }
  e.result = torch::cat(result);
  in.view->MoveRowsAt(torch::cat(from), torch::cat(places));
}

TreeVerifyGraphs::Inputs& TreeVerifyGraphs::InputsFor(int64_t requests) {
  std::unique_ptr<Inputs>& made = inputs_[requests];
  if (made != nullptr) return *made;
  made = std::make_unique<Inputs>();
  Inputs& in = *made;
  const torch::Device device = model_.options.device();
  const auto longs = torch::dtype(torch::kInt64).device(device);
  const auto doubles = longs.dtype(torch::kFloat64), floats = longs.dtype(torch::kFloat32);
  const int64_t nodes = shape_.nodes, width = LaneIntsOf(shape_);
  const Shape::Jacobi& j = shape_.jacobi;
  in.requests = requests;
  // Until a call fills them: the scratch slot, length 0, greedy, no filter; a static tree's
  // layout for good, a deterministic tree's every node a child of the root (a tree).
  in.ints = torch::zeros({2 * requests + requests * width}, longs);
  in.ints.narrow(0, 0, 2 * requests).fill_(pool_.scratch_slot());
  for (int64_t lane = 0; lane < requests; ++lane) {
    in.LaneFields(lane, width).narrow(0, kParamsAt + 3, 1).view(torch::kFloat64).fill_(1.0);
  }
  in.view.emplace(pool_.SlotIndexedView(in.ints.narrow(0, 0, 2 * requests)));
  std::vector<int64_t> parents =
      shape_.parents.empty() ? std::vector<int64_t>(nodes, -1) : shape_.parents;
  std::vector<int64_t> depths(nodes);
  torch::Tensor ancestors = torch::zeros({nodes, nodes}, torch::kBool);
  auto ancestor = ancestors.accessor<bool, 2>();
  for (int64_t i = 0; i < nodes; ++i) {
    depths[i] = parents[i] < 0 ? 1 : depths[parents[i]] + 1;
    for (int64_t a = i; a >= 0; a = parents[a]) ancestor[i][a] = true;
  }
  // A relaxed draft may use two acceptance numbers; a Jacobi window's coupling one per row.
  const int64_t numbers = shape_.relaxed() ? 2 * nodes : nodes + j.window;
  for (int64_t lane = 0; lane < requests; ++lane) {
    Inputs::Lane l;
    l.tokens = torch::zeros({nodes}, longs);
    l.parents = torch::tensor(parents, torch::kInt64).to(device);
    l.depths = torch::tensor(depths, torch::kInt64).to(device);
    l.ancestors = ancestors.to(device).clone();  // each lane its own (to() may return it)
    l.accept = torch::zeros({numbers}, doubles);
    l.draw = torch::zeros({1}, doubles);
    if (shape_.drawn() && !shape_.jacobi_window()) {
      l.q = torch::zeros({nodes, model_.vocab}, floats);
      l.q.select(1, 0).fill_(1.0f);  // every draft token 0, drawn from a one-hot row
      l.valid = torch::ones({nodes}, longs.dtype(torch::kBool));
    }
    in.bytes += (3 * nodes + numbers + 1) * 8 + nodes * nodes +
                (l.q.defined() ? nodes * model_.vocab * 4 + nodes : 0);
    if (shape_.jacobi_window()) {
      l.carried_q = torch::zeros({j.window, model_.vocab}, floats);
      l.extras_q = torch::zeros({j.levels, j.extras, model_.vocab}, floats);
      l.drafter = torch::zeros({j.window + 1 + j.levels * j.extras}, doubles);
      in.bytes += (l.carried_q.numel() + l.extras_q.numel()) * 4 + l.drafter.numel() * 8;
    }
    in.lanes.push_back(std::move(l));
  }
  in.bytes += in.ints.numel() * 8;
  if (shape_.jacobi_window()) {
    std::vector<int64_t> ranks(nodes), rows = {0}, off_main(nodes);
    for (int64_t i = 0; i < nodes; ++i) {  // level l's extra k is row window + l * extras + k
      const int64_t past = j.candidates[i] - j.window;
      ranks[i] = past < 0 ? -1 : past % j.extras;
      const int64_t level = j.levels_of[i];
      off_main[i] = parents[i] != (level == 0 ? -1 : j.main[level - 1]);
    }
    for (int64_t node : j.main) rows.push_back(node + 1);
    in.off_main = torch::tensor(off_main, torch::kInt64).to(device, torch::kBool);
    in.candidates = torch::tensor(j.candidates, torch::kInt64).to(device);
    in.levels = torch::tensor(j.levels_of, torch::kInt64).to(device);
    in.extra_ranks = torch::tensor(ranks, torch::kInt64).to(device);
    in.main = torch::tensor(j.main, torch::kInt64).to(device);
    in.path_rows = torch::tensor(rows, torch::kInt64).to(device);
    in.bytes += (4 * nodes + 2 * j.window + 1) * 8;
  }
  return in;
}

Status TreeVerifyGraphs::CaptureSpan(int64_t span, bool filtered) {
  return GuardTorch("TreeVerifyGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
    for (int64_t requests = 1; requests <= max_requests_; requests *= 2) {
      auto entry = std::make_unique<Entry>();
      Entry* e = entry.get();
      e->inputs = &InputsFor(requests);
      const int64_t bytes = e->inputs->counted ? 0 : e->inputs->bytes;
      e->graph = set_.Make(
          model_.options.device(), [this, e, span, filtered] { Body(*e, span, filtered); },
          model_.emulated, bytes);
      if (e->graph == nullptr) continue;
      e->inputs->counted = true;
      entries_[Key(requests, span, filtered)] = std::move(entry);
    }
    return OkStatus();
  });
}

bool TreeVerifyGraphs::Fits(const KvCache& cache, int64_t nodes, int64_t max_depth,
                            const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  if (nodes != shape_.nodes || max_depth != shape_.max_depth) return false;
  if (shape_.relaxed() && shape_.greedy != (sampling.temperature == 0.0)) return false;
  const int64_t span = SpanOf(cache);
  return span <= pool_.slot_rows() && entries_.count(Key(1, span, Filtered(sampling))) > 0;
}

int64_t TreeVerifyGraphs::SpanOf(const KvCache& cache) const {
  return ForwardGraphs::RoundUpToSpan(cache.length() + shape_.nodes + 1);
}

bool TreeVerifyGraphs::Filtered(const SamplingParams& sampling) const {
  return sampling.temperature != 0.0 && HasFilters(sampling, model_.vocab);
}

Status TreeVerifyGraphs::CheckWindow(const Call::Jacobi& call) const {
  const Shape::Jacobi& j = shape_.jacobi;
  const auto wrong = [](const std::string& what) {
    return InvalidArgumentError("TreeVerifyGraphs::Run: a Jacobi window's " + what);
  };
  if (static_cast<int64_t>(call.drafts.size()) != j.window) return wrong("drafts");
  if (static_cast<int64_t>(call.extras.size()) > j.levels) return wrong("extras");
  for (const std::vector<int64_t>& level : call.extras) {
    if (static_cast<int64_t>(level.size()) > j.extras) return wrong("extras");
  }
  if (call.length < 1 || call.length > j.window) return wrong("length");
  if (call.carried_q.defined() &&
      (call.carried_q.dim() != 2 || call.carried_q.size(0) > j.window ||
       call.carried_q.size(1) != model_.vocab)) {
    return wrong("carried_q");
  }
  if (call.extras_q.defined() &&
      (call.extras_q.dim() != 3 || call.extras_q.size(0) > j.levels ||
       call.extras_q.size(1) != j.extras || call.extras_q.size(2) != model_.vocab)) {
    return wrong("extras_q");
  }
  if (call.drafter_uniforms.defined() &&
      call.drafter_uniforms.numel() != j.window + 1 + j.levels * j.extras) {
    return wrong("drafter_uniforms");
  }
  return OkStatus();
}

void TreeVerifyGraphs::AppendWindowInts(const Call::Jacobi& call,
                                        std::vector<int64_t>& ints) const {
  const Shape::Jacobi& j = shape_.jacobi;
  ints.push_back(call.carried_q.defined() ? call.carried_q.size(0) : 0);
  ints.push_back(call.length);
  ints.push_back(call.bonus ? 1 : 0);
  ints.push_back(call.last_position);
  ints.push_back(std::min<int64_t>(static_cast<int64_t>(call.extras.size()), call.length));
  for (int64_t l = 0; l < j.levels; ++l) {
    ints.push_back(l < static_cast<int64_t>(call.extras.size())
                       ? static_cast<int64_t>(call.extras[l].size())
                       : 0);
  }
  ints.insert(ints.end(), call.drafts.begin(), call.drafts.end());
  for (int64_t l = 0; l < j.levels; ++l) {
    for (int64_t k = 0; k < j.extras; ++k) {
      const bool real = l < static_cast<int64_t>(call.extras.size()) &&
                        k < static_cast<int64_t>(call.extras[l].size());
      ints.push_back(real ? call.extras[l][k] : 0);
    }
  }
}

void TreeVerifyGraphs::CopyWindowTensors(const Call::Jacobi& call, bool greedy, Inputs& in,
                                         int64_t lane) const {
  Inputs::Lane& l = in.lanes[lane];
  if (call.carried_q.defined() && call.carried_q.size(0) > 0) {
    l.carried_q.narrow(0, 0, call.carried_q.size(0)).copy_(call.carried_q);
  }
  if (call.extras_q.defined() && call.extras_q.size(0) > 0) {
    l.extras_q.narrow(0, 0, call.extras_q.size(0)).copy_(call.extras_q);
  }
  if (!greedy) l.drafter.copy_(call.drafter_uniforms);
}

Status TreeVerifyGraphs::CheckCall(const Call& call) const {
  const int64_t nodes = shape_.nodes;
  const bool jacobi = shape_.jacobi_window();
  if (call.cache == nullptr || (!jacobi && !call.tokens.defined()) ||
      !Fits(*call.cache, jacobi ? nodes : call.tokens.size(0), shape_.max_depth,
            call.sampling)) {
    return InvalidArgumentError("TreeVerifyGraphs::Run: the call does not fit the tree graphs");
  }
  const bool greedy = call.sampling.temperature == 0.0;
  if (!greedy && (!call.accept_uniforms.defined() || !call.draw_uniform.defined() ||
                  (jacobi && !call.jacobi.drafter_uniforms.defined()))) {
    return InvalidArgumentError("TreeVerifyGraphs::Run: a sampled tree needs its numbers");
  }
  // A relaxed draft may use two acceptance numbers; a Jacobi window's coupling one per row.
  const int64_t numbers = shape_.relaxed() ? 2 * nodes : nodes + shape_.jacobi.window;
  if (!greedy && call.accept_uniforms.numel() != numbers) {
    return InvalidArgumentError("TreeVerifyGraphs::Run: accept_uniforms: expected " +
                                std::to_string(numbers) + " numbers");
  }
  if (jacobi) {
    MULO_RETURN_IF_ERROR(CheckWindow(call.jacobi));
  }
  const bool drawn = shape_.drawn() && !jacobi;
  if (call.q.defined() != drawn || call.valid.defined() != drawn) {
    return InvalidArgumentError(drawn ? "TreeVerifyGraphs::Run: a static tree needs q and valid"
                                      : "TreeVerifyGraphs::Run: q and valid are a static tree's");
  }
  return OkStatus();
}

StatusOr<std::vector<TreeVerifyGraphs::Output>> TreeVerifyGraphs::Run(
    const std::vector<Call>& calls) const {
  for (const Call& call : calls) MULO_RETURN_IF_ERROR(CheckCall(call));
  // Plain and filtered p replay apart, each in batches of at most max_requests().
  return RunInBatches<Output>(
      calls, max_requests_, [this](const Call& call) { return Filtered(call.sampling); },
      [this](const std::vector<const Call*>& batch, bool filtered) {
        return RunBatch(batch, filtered);
      });
}

std::vector<int64_t> TreeVerifyGraphs::ReplayInts(const std::vector<const Call*>& calls,
                                                  int64_t requests) const {
  // Every lane's two slots (pads: the scratch slot), then each lane's fields (pads: the
  // capture's, which the graph was made with).
  const int64_t width = LaneIntsOf(shape_), n = static_cast<int64_t>(calls.size());
  std::vector<int64_t> ints(2 * requests, pool_.scratch_slot());
  for (int64_t lane = 0; lane < requests; ++lane) {
    const size_t at = ints.size();
    ints.resize(at + width, 0);
    double* const params = reinterpret_cast<double*>(ints.data() + at + kParamsAt);
    static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
    if (lane >= n) {
      params[3] = 1.0;  // top_p: no filter
      continue;
    }
    const Call& call = *calls[lane];
    ints[2 * lane] = call.cache->first_slot();
    ints[2 * lane + 1] = call.cache->first_slot() + 1;
    ints[at] = call.cache->length();
    ints[at + 1] = call.root_token;
    ints[at + 2] = call.root_position;
    params[0] = call.sampling.cfg_scale;
    params[1] = call.sampling.temperature;
    params[2] = call.relaxation_bound;
    params[3] = call.sampling.top_p;
    ints[at + kTopKAt] = call.sampling.top_k;
    if (shape_.jacobi_window()) {
      std::vector<int64_t> window;
      AppendWindowInts(call.jacobi, window);
      std::copy(window.begin(), window.end(), ints.begin() + at + kLaneInts);
    }
  }
  return ints;
}

void TreeVerifyGraphs::CopyCallTensors(const std::vector<const Call*>& calls, Inputs& in) const {
  const bool jacobi = shape_.jacobi_window(), drawn = shape_.drawn() && !jacobi;
  for (size_t lane = 0; lane < calls.size(); ++lane) {
    const Call& call = *calls[lane];
    Inputs::Lane& l = in.lanes[lane];
    const bool greedy = call.sampling.temperature == 0.0;
    if (jacobi) {  // the tree's tokens, q and valid are made in the graph
      CopyWindowTensors(call.jacobi, greedy, in, static_cast<int64_t>(lane));
    } else if (drawn) {  // the layout is the graphs' own
      l.tokens.copy_(call.tokens);
      l.q.copy_(call.q);
      l.valid.copy_(call.valid);
    } else {
      l.tokens.copy_(call.tokens);
      l.parents.copy_(call.parents);
      l.depths.copy_(call.depths);
      l.ancestors.copy_(call.ancestors);
    }
    // A greedy request's p is one-hot: any numbers give its decisions (none are copied).
    if (!greedy) {
      l.accept.copy_(call.accept_uniforms);
      l.draw.copy_(call.draw_uniform);
    }
  }
}

StatusOr<std::vector<TreeVerifyGraphs::Output>> TreeVerifyGraphs::RunBatch(
    const std::vector<const Call*>& calls, bool filtered) const {
  const int64_t nodes = shape_.nodes, n = static_cast<int64_t>(calls.size());
  const int64_t requests = PoolGraphs::Bucket(2 * n) / 2;
  int64_t span = 0;
  for (const Call* call : calls) span = std::max(span, SpanOf(*call->cache));
  const auto it = entries_.find(Key(requests, span, filtered));
  if (it == entries_.end() && n > 1) {
    // A batch whose key failed to capture: each call alone (Fits holds the lone key).
    return RunEachAlone<Output>(
        calls, [&](const std::vector<const Call*>& one) { return RunBatch(one, filtered); });
  }
  if (it == entries_.end()) {
    return FailedPreconditionError("TreeVerifyGraphs::Run: no graph of span " +
                                   std::to_string(span));
  }
  Entry* e = it->second.get();
  Inputs& in = *e->inputs;
  const bool jacobi = shape_.jacobi_window();
  return GuardTorch("TreeVerifyGraphs::Run", [&]() -> StatusOr<std::vector<Output>> {
    at::NoGradGuard no_grad;
    std::vector<int64_t> ints = ReplayInts(calls, requests);
    UploadInto(in.ints,
               torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())}, torch::kInt64));
    CopyCallTensors(calls, in);
    e->graph->Replay();
    set_.CountReplay(n);
    // Every request's tree and verdict in one read.
    const std::vector<int64_t> host = HostReadIds(e->result);
    const int64_t each = static_cast<int64_t>(host.size()) / requests;
    std::vector<Output> outputs(n);
    for (int64_t lane = 0; lane < n; ++lane) {
      calls[lane]->cache->Advance(nodes + 1);
      Output& out = outputs[lane];
      out.host.assign(host.begin() + lane * each, host.begin() + (lane + 1) * each);
      // Copies: the next replay (another request's step, in an engine loop) rewrites them.
      out.path_features = e->path_features[lane].clone();
      if (jacobi) {
        out.path_p = e->path_p[lane].clone();
        out.sibling_q = e->sibling_q[lane].clone();
      }
    }
    return outputs;
  });
}

}  // namespace mulo::engine
