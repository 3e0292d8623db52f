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
#include "engine/sampling/tree_rejection.h"

namespace mulo::engine {

namespace {

// The ints: the two slots, the cache length (the root's row), the root token, its sequence
// position, then cfg_scale, temperature and the relaxation's bound as float64 bits.
constexpr int64_t kInts = 8;

}  // namespace

struct TreeVerifyGraphs::Entry {
  // Static inputs on the device, filled per replay: the ints above; the tree; the numbers; a
  // static tree's q and valid (undefined for a deterministic tree's graphs).
  torch::Tensor ints, tokens, parents, depths, ancestors, accept, draw, q, valid;
  std::optional<KvCache> view;  // the pool's slots as the ints' first two index them
  torch::Tensor result;         // int64 [2 nodes + 3 + max_depth], every replay
  torch::Tensor path_features;  // [2, max_depth + 1, dim], every replay
  std::unique_ptr<ReplayableGraph> graph;
};

bool TreeVerifyGraphs::Shape::SameKey(const Shape& other) const {
  return nodes == other.nodes && max_depth == other.max_depth &&
         max_children == other.max_children && drawn() == other.drawn() &&
         relaxation == other.relaxation && (!relaxed() || (k == other.k && greedy == other.greedy));
}

TreeVerifyGraphs::TreeVerifyGraphs(const KvPool& pool, Shape shape, RowGraphs::Model model,
                                   torch::Tensor neighbour_table)
    : pool_(pool),
      shape_(std::move(shape)),
      model_(std::move(model)),
      neighbour_table_(std::move(neighbour_table)) {}

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
      [raw](int64_t span) { return raw->CaptureSpan(span); }));
  return graphs;
}

void TreeVerifyGraphs::Body(Entry& e, int64_t span) const {
  torch::NoGradGuard no_grad;
  const int64_t nodes = shape_.nodes, rows = nodes + 1;
  const auto longs = torch::dtype(torch::kInt64).device(model_.options.device());
  const torch::Tensor length = e.ints.narrow(0, 2, 1);
  const torch::Tensor root = e.ints.narrow(0, 3, 1);
  const torch::Tensor root_position = e.ints.narrow(0, 4, 1);
  const torch::Tensor params = e.ints.narrow(0, 5, 3).view(torch::kFloat64);
  const torch::Tensor cfg = params.narrow(0, 0, 1).to(torch::kFloat32);
  const torch::Tensor temperature = params.narrow(0, 1, 1).to(torch::kFloat32);
  // The root at the cache's length, node i at the row after it; positions by depth. The root
  // sees the prefix and itself, a node also its ancestors and itself (the tree mask).
  const torch::Tensor columns = torch::arange(span, longs);
  const torch::Tensor relative = columns - (length + 1);  // column c is node c - length - 1
  const torch::Tensor in_tree = ((relative >= 0) & (relative < nodes)).unsqueeze(0);
  const torch::Tensor node_ancestors =
      torch::constant_pad_nd(e.ancestors, {0, 0, 1, 0}, 0)  // the root's row: no node
          .index_select(1, relative.clamp(0, nodes - 1));
  const torch::Tensor mask =
      (columns <= length).unsqueeze(0) | (node_ancestors & in_tree);  // [rows, span]
  PoolGraphs::Inputs in;
  in.span = span;
  in.inputs = {model_.embed(torch::cat({root, e.tokens}).unsqueeze(0).expand({2, rows}).contiguous())};
  in.positions =
      (root_position + torch::constant_pad_nd(e.depths, {1, 0}, 0)).unsqueeze(0).expand({2, rows});
  in.rows = (length + torch::arange(rows, longs)).unsqueeze(0).expand({2, rows});
  in.mask = mask.unsqueeze(0).expand({2, rows, span});
  const std::vector<torch::Tensor> out = model_.forward(*e.view, in);
  // p as DecodeSession::Probabilities makes it: MixCfg, tempering, softmax; one-hot greedy.
  // Relaxed: as the host's relaxed step makes it, the request's own sampled and the untempered
  // ranking distribution greedy (a one-hot p leaves nothing to pool), which the divisor of 1
  // at temperature 0 gives.
  const torch::Tensor logits = out[1].to(torch::kFloat32);
  const torch::Tensor p = GuidedProbabilities(logits.select(0, 0), logits.select(0, 1), cfg,
                                              temperature, /*one_hot_greedy=*/!shape_.relaxed());
  TreeCall call{p,       e.tokens, e.parents, e.accept, e.draw, /*greedy=*/false,
                shape_.max_depth, e.ancestors, e.q, e.valid, shape_.max_children};
  torch::Tensor verdict;
  if (shape_.relaxed()) {
    call.greedy = shape_.greedy;
    verdict = JudgeRelaxedTree({call, neighbour_table_, shape_.relaxation, shape_.k,
                                params.narrow(0, 2, 1)});
  } else {
    verdict = JudgeTree(call);
  }
  e.result = torch::cat({e.tokens, e.parents, verdict});
  // The features of the root's row and the kept path's rows (pads: the root's).
  const torch::Tensor path = verdict.narrow(0, 3, shape_.max_depth);
  const torch::Tensor kept = path >= 0;
  e.path_features = out[0].index_select(
      1, torch::cat({torch::zeros({1}, longs), torch::where(kept, path + 1, torch::zeros_like(path))}));
  // The kept path's cache rows moved right after the root's (the pads onto themselves): the
  // cache then holds the committed prefix, with nothing left for the host to move.
  const torch::Tensor places = length + 1 + torch::arange(shape_.max_depth, longs);
  const torch::Tensor from = torch::where(kept, length + 1 + path, places);
  e.view->MoveRowsAt(from.unsqueeze(0).expand({2, shape_.max_depth}),
                     places.unsqueeze(0).expand({2, shape_.max_depth}));
}

Status TreeVerifyGraphs::CaptureSpan(int64_t span) {
  return GuardTorch("TreeVerifyGraphs::Capture", [&]() -> Status {
    torch::NoGradGuard no_grad;
    const torch::Device device = model_.options.device();
    const auto longs = torch::dtype(torch::kInt64).device(device);
    const auto doubles = torch::dtype(torch::kFloat64).device(device);
    const int64_t nodes = shape_.nodes;
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    // Until the first call fills them: the scratch slot, length 0, greedy; a static tree's
    // layout for good, a deterministic tree's every node a child of the root (a tree).
    std::vector<int64_t> parents =
        shape_.parents.empty() ? std::vector<int64_t>(nodes, -1) : shape_.parents;
    std::vector<int64_t> depths(nodes);
    torch::Tensor ancestors = torch::zeros({nodes, nodes}, torch::kBool);
    auto ancestor = ancestors.accessor<bool, 2>();
    for (int64_t i = 0; i < nodes; ++i) {
      depths[i] = parents[i] < 0 ? 1 : depths[parents[i]] + 1;
      for (int64_t a = i; a >= 0; a = parents[a]) ancestor[i][a] = true;
    }
    e->ints = torch::zeros({kInts}, longs);
    e->ints.narrow(0, 0, 2).fill_(pool_.scratch_slot());
    e->tokens = torch::zeros({nodes}, longs);
    e->parents = torch::tensor(parents, torch::kInt64).to(device);
    e->depths = torch::tensor(depths, torch::kInt64).to(device);
    e->ancestors = ancestors.to(device);
    // A relaxed draft may use two acceptance numbers.
    e->accept = torch::zeros({shape_.relaxed() ? 2 * nodes : nodes}, doubles);
    e->draw = torch::zeros({1}, doubles);
    if (shape_.drawn()) {
      e->q = torch::zeros({nodes, model_.vocab}, longs.dtype(torch::kFloat32));
      e->q.select(1, 0).fill_(1.0f);  // every draft token 0, drawn from a one-hot row
      e->valid = torch::ones({nodes}, longs.dtype(torch::kBool));
    }
    e->view.emplace(pool_.SlotIndexedView(e->ints.narrow(0, 0, 2)));
    e->graph = set_.Make(device, [this, e, span] { Body(*e, span); }, model_.emulated,
                         (kInts + 3 * nodes + e->accept.numel() + 1) * 8 + nodes * nodes +
                             (e->q.defined() ? nodes * model_.vocab * 4 + nodes : 0));
    if (e->graph != nullptr) entries_[span] = std::move(entry);
    return OkStatus();
  });
}

bool TreeVerifyGraphs::Fits(const KvCache& cache, int64_t nodes, int64_t max_depth,
                            const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  if (nodes != shape_.nodes || max_depth != shape_.max_depth) return false;
  if (shape_.relaxed() && shape_.greedy != (sampling.temperature == 0.0)) return false;
  if (sampling.top_k > 0 && sampling.top_k < model_.vocab) return false;
  if (sampling.top_p < 1.0) return false;
  const int64_t span = ForwardGraphs::RoundUpToSpan(cache.length() + nodes + 1);
  return span <= pool_.slot_rows() && entries_.count(span) > 0;
}

StatusOr<TreeVerifyGraphs::Output> TreeVerifyGraphs::Run(const Call& call) const {
  const int64_t nodes = shape_.nodes;
  if (call.cache == nullptr || !call.tokens.defined() ||
      !Fits(*call.cache, call.tokens.size(0), shape_.max_depth, call.sampling)) {
    return InvalidArgumentError("TreeVerifyGraphs::Run: the call does not fit the tree graphs");
  }
  const bool greedy = call.sampling.temperature == 0.0;
  if (!greedy && (!call.accept_uniforms.defined() || !call.draw_uniform.defined())) {
    return InvalidArgumentError("TreeVerifyGraphs::Run: a sampled tree needs its numbers");
  }
  const bool drawn = shape_.drawn();
  if (call.q.defined() != drawn || call.valid.defined() != drawn) {
    return InvalidArgumentError(drawn ? "TreeVerifyGraphs::Run: a static tree needs q and valid"
                                      : "TreeVerifyGraphs::Run: q and valid are a static tree's");
  }
  const int64_t span = ForwardGraphs::RoundUpToSpan(call.cache->length() + nodes + 1);
  Entry* e = entries_.at(span).get();
  return GuardTorch("TreeVerifyGraphs::Run", [&]() -> StatusOr<Output> {
    torch::NoGradGuard no_grad;
    int64_t ints[kInts] = {call.cache->first_slot(), call.cache->first_slot() + 1,
                           call.cache->length(), call.root_token, call.root_position, 0, 0, 0};
    double* const params = reinterpret_cast<double*>(ints + 5);
    static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
    params[0] = call.sampling.cfg_scale;
    params[1] = call.sampling.temperature;
    params[2] = call.relaxation_bound;
    UploadInto(e->ints, torch::from_blob(ints, {kInts}, torch::kInt64));
    e->tokens.copy_(call.tokens);
    if (drawn) {  // the layout is the graphs' own
      e->q.copy_(call.q);
      e->valid.copy_(call.valid);
    } else {
      e->parents.copy_(call.parents);
      e->depths.copy_(call.depths);
      e->ancestors.copy_(call.ancestors);
    }
    // A greedy request's p is one-hot: any numbers give its decisions (none are copied).
    if (!greedy) {
      if (call.accept_uniforms.numel() != e->accept.numel()) {
        return InvalidArgumentError("TreeVerifyGraphs::Run: accept_uniforms: expected " +
                                    std::to_string(e->accept.numel()) + " numbers");
      }
      e->accept.copy_(call.accept_uniforms);
      e->draw.copy_(call.draw_uniform);
    }
    e->graph->Replay();
    set_.CountReplay(1);
    call.cache->Advance(nodes + 1);
    Output out;
    out.host = HostReadIds(e->result);
    // A copy: the next replay (another request's step, in an engine loop) rewrites it.
    out.path_features = e->path_features.clone();
    return out;
  });
}

}  // namespace mulo::engine
