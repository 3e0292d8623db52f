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

// The ints: the two slots, the cache length (the root's row), the root token, its sequence
// position, then cfg_scale, temperature, the relaxation's bound and top_p as float64 bits, and
// top_k.
constexpr int64_t kInts = 10;
// A Jacobi window's after them: the drafts with a carried q, the real drafts, whether a
// position follows, the image's last position, the levels that branch, then each level's
// extras, the window's drafts and the extras (Call::Jacobi).
constexpr int64_t kJacobiFields = 5;

int64_t IntsOf(const TreeVerifyGraphs::Shape& shape) {
  const TreeVerifyGraphs::Shape::Jacobi& j = shape.jacobi;
  return kInts + (shape.jacobi_window()
                      ? kJacobiFields + j.levels + j.window + j.levels * j.extras
                      : 0);
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

struct TreeVerifyGraphs::Entry {
  // Static inputs on the device, filled per replay: the ints above; the tree; the numbers; a
  // static tree's q and valid (undefined for a deterministic tree's graphs).
  torch::Tensor ints, tokens, parents, depths, ancestors, accept, draw, q, valid;
  // A Jacobi window's: the carried drafts' q [window, V], the extras' [levels, extras, V], the
  // drafter stream's numbers; fixed at capture, each node's candidate, level, extra rank (-1: a
  // carried draft) and whether its parent is off the carried path, the carried path's nodes
  // and its rows of p [window + 1].
  torch::Tensor carried_q, extras_q, drafter, candidates, levels, extra_ranks, off_main, main,
      path_rows;
  std::optional<KvCache> view;  // the pool's slots as the ints' first two index them
  torch::Tensor result;         // int64 [2 nodes + 3 + max_depth], every replay
  torch::Tensor path_features;  // [2, max_depth + 1, dim], every replay
  torch::Tensor path_p, sibling_q;  // a Jacobi window's, every replay (Output's)
  std::unique_ptr<ReplayableGraph> graph;
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

TreeVerifyGraphs::WindowTree TreeVerifyGraphs::WindowTreeOf(const Entry& e) const {
  const Shape::Jacobi& j = shape_.jacobi;
  const int64_t window = j.window, table_extras = j.levels * j.extras;
  const torch::Tensor fields = e.ints.narrow(0, kInts, IntsOf(shape_) - kInts);
  const torch::Tensor carried = fields.narrow(0, 0, 1), length = fields.narrow(0, 1, 1);
  const torch::Tensor counts = fields.narrow(0, kJacobiFields, j.levels);
  const torch::Tensor drafts = fields.narrow(0, kJacobiFields + j.levels, window);
  const torch::Tensor extras = fields.narrow(0, kJacobiFields + j.levels + window, table_extras);
  WindowTree tree;
  tree.tokens = torch::cat({drafts, extras}).index_select(0, e.candidates);
  // The table's q: the carried drafts', the fixed tokens' one-hot rows, then the extras'.
  const torch::Tensor fixed = torch::zeros_like(e.carried_q).scatter_(1, drafts.unsqueeze(1), 1.0);
  const torch::Tensor has_q =
      (torch::arange(window, drafts.options()) < carried).unsqueeze(1);
  tree.q = torch::cat({torch::where(has_q, e.carried_q, fixed),
                       e.extras_q.reshape({table_extras, model_.vocab})})
               .index_select(0, e.candidates);
  // A node is real when its level is in the window and, an extra, its level has that many;
  // a carried draft off the carried path only where its level branches (the eager tree's).
  const torch::Tensor branching = fields.narrow(0, 4, 1);
  const torch::Tensor extra = e.extra_ranks >= 0;
  tree.valid = (e.levels < length) & (extra | ~e.off_main | (e.levels < branching));
  if (table_extras > 0) {
    const torch::Tensor level_count = counts.index_select(0, e.levels.clamp_max(j.levels - 1));
    tree.valid = tree.valid & (~extra | (e.extra_ranks < level_count));
  } else {
    tree.valid = tree.valid & ~extra;
  }
  tree.last_position = fields.narrow(0, 3, 1);
  return tree;
}

void TreeVerifyGraphs::Body(Entry& e, int64_t span, bool filtered) const {
  at::NoGradGuard no_grad;
  const int64_t nodes = shape_.nodes, rows = nodes + 1;
  const auto longs = torch::dtype(torch::kInt64).device(model_.options.device());
  const torch::Tensor length = e.ints.narrow(0, 2, 1);
  const torch::Tensor root = e.ints.narrow(0, 3, 1);
  const torch::Tensor root_position = e.ints.narrow(0, 4, 1);
  const torch::Tensor params = e.ints.narrow(0, 5, 4).view(torch::kFloat64);
  const torch::Tensor cfg = params.narrow(0, 0, 1).to(torch::kFloat32);
  const torch::Tensor temperature = params.narrow(0, 1, 1).to(torch::kFloat32);
  const RowFilters filters{e.ints.narrow(0, 9, 1).view({1, 1}),
                           params.narrow(0, 3, 1).view({1, 1})};
  const bool jacobi = shape_.jacobi_window();
  const WindowTree window = jacobi ? WindowTreeOf(e) : WindowTree{e.tokens, e.q, e.valid, {}};
  // The root at the cache's length, node i at the row after it; positions by depth.
  const torch::Tensor mask = TreeRowsMask(e.ancestors, length, span);  // [rows, span]
  PoolGraphs::Inputs in;
  in.span = span;
  in.inputs = {model_.embed(
      torch::cat({root, window.tokens}).unsqueeze(0).expand({2, rows}).contiguous())};
  torch::Tensor positions = root_position + torch::constant_pad_nd(e.depths, {1, 0}, 0);
  // A window padded past the image's end feeds its pads at the last position (rows no one
  // keeps), as the chain verify graphs do.
  if (jacobi) positions = torch::minimum(positions, window.last_position);
  in.positions = positions.unsqueeze(0).expand({2, rows});
  in.rows = (length + torch::arange(rows, longs)).unsqueeze(0).expand({2, rows});
  in.mask = mask.unsqueeze(0).expand({2, rows, span});
  const std::vector<torch::Tensor> out = model_.forward(*e.view, in);
  // p as DecodeSession::Probabilities makes it: MixCfg, tempering, softmax; one-hot greedy.
  // Relaxed: as the host's relaxed step makes it, the request's own sampled and the untempered
  // ranking distribution greedy (a one-hot p leaves nothing to pool), which the divisor of 1
  // at temperature 0 gives.
  const torch::Tensor logits = out[1].to(torch::kFloat32);
  const torch::Tensor p =
      GuidedProbabilities(logits.select(0, 0), logits.select(0, 1), cfg, temperature,
                          /*one_hot_greedy=*/!shape_.relaxed(), filtered ? &filters : nullptr);
  const torch::Tensor walk_numbers = jacobi ? e.accept.narrow(0, 0, nodes) : e.accept;
  TreeCall call{p,         window.tokens, e.parents, walk_numbers, e.draw, /*greedy=*/false,
                shape_.max_depth, e.ancestors, window.q, window.valid, shape_.max_children};
  torch::Tensor verdict;
  if (shape_.relaxed()) {
    call.greedy = shape_.greedy;
    verdict = JudgeRelaxedTree({call, neighbour_table_, shape_.relaxation, shape_.k,
                                params.narrow(0, 2, 1)});
  } else {
    verdict = JudgeTree(call);
  }
  std::vector<torch::Tensor> result = {window.tokens, e.parents, verdict};
  if (jacobi) {
    const Shape::Jacobi& j = shape_.jacobi;
    const torch::Tensor fields = e.ints.narrow(0, kInts, kJacobiFields);
    e.path_p = p.index_select(0, e.path_rows);
    const TreeJacobiUpdate update = UpdateJacobiAfterTree(
        {e.path_p, window.tokens.index_select(0, e.main), window.q.index_select(0, e.main), verdict,
         fields.narrow(0, 1, 1), fields.narrow(0, 2, 1), e.accept, e.drafter, j.levels,
         j.extras});
    result.push_back(update.redraws);
    result.push_back(update.sibling_tokens.flatten());
    result.push_back(update.sibling_valid.to(torch::kInt64).flatten());
    e.sibling_q = update.sibling_q;
  }
  e.result = torch::cat(result);
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

Status TreeVerifyGraphs::CaptureSpan(int64_t span, bool filtered) {
  return GuardTorch("TreeVerifyGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
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
    e->tokens = torch::zeros({nodes}, longs);
    e->parents = torch::tensor(parents, torch::kInt64).to(device);
    e->depths = torch::tensor(depths, torch::kInt64).to(device);
    e->ancestors = ancestors.to(device);
    // A relaxed draft may use two acceptance numbers; a Jacobi window's coupling one per row.
    const Shape::Jacobi& j = shape_.jacobi;
    e->accept = torch::zeros({shape_.relaxed() ? 2 * nodes : nodes + j.window}, doubles);
    e->draw = torch::zeros({1}, doubles);
    if (shape_.drawn() && !shape_.jacobi_window()) {
      e->q = torch::zeros({nodes, model_.vocab}, longs.dtype(torch::kFloat32));
      e->q.select(1, 0).fill_(1.0f);  // every draft token 0, drawn from a one-hot row
      e->valid = torch::ones({nodes}, longs.dtype(torch::kBool));
    }
    int64_t window_bytes = 0;
    if (shape_.jacobi_window()) {
      const auto floats = longs.dtype(torch::kFloat32);
      std::vector<int64_t> ranks(nodes), rows = {0};
      std::vector<uint8_t> off_main(nodes);
      for (int64_t i = 0; i < nodes; ++i) {  // level l's extra k is row window + l * extras + k
        const int64_t past = j.candidates[i] - j.window;
        ranks[i] = past < 0 ? -1 : past % j.extras;
        const int64_t level = j.levels_of[i];
        off_main[i] = parents[i] != (level == 0 ? -1 : j.main[level - 1]);
      }
      e->off_main = torch::tensor(std::vector<int64_t>(off_main.begin(), off_main.end()),
                                  torch::kInt64)
                        .to(device, torch::kBool);
      for (int64_t node : j.main) rows.push_back(node + 1);
      e->candidates = torch::tensor(j.candidates, torch::kInt64).to(device);
      e->levels = torch::tensor(j.levels_of, torch::kInt64).to(device);
      e->extra_ranks = torch::tensor(ranks, torch::kInt64).to(device);
      e->main = torch::tensor(j.main, torch::kInt64).to(device);
      e->path_rows = torch::tensor(rows, torch::kInt64).to(device);
      e->carried_q = torch::zeros({j.window, model_.vocab}, floats);
      e->extras_q = torch::zeros({j.levels, j.extras, model_.vocab}, floats);
      e->drafter = torch::zeros({j.window + 1 + j.levels * j.extras}, doubles);
      window_bytes = (e->carried_q.numel() + e->extras_q.numel()) * 4 +
                     (e->drafter.numel() + 4 * nodes + 2 * j.window + 1) * 8;
    }
    e->ints = torch::zeros({IntsOf(shape_)}, longs);
    e->ints.narrow(0, 0, 2).fill_(pool_.scratch_slot());
    e->ints.narrow(0, 8, 1).view(torch::kFloat64).fill_(1.0);  // top_p: no filter
    e->view.emplace(pool_.SlotIndexedView(e->ints.narrow(0, 0, 2)));
    e->graph = set_.Make(device, [this, e, span, filtered] { Body(*e, span, filtered); },
                         model_.emulated,
                         (IntsOf(shape_) + 3 * nodes + e->accept.numel() + 1) * 8 +
                             nodes * nodes +
                             (e->q.defined() ? nodes * model_.vocab * 4 + nodes : 0) +
                             window_bytes);
    if (e->graph != nullptr) entries_[Key(span, filtered)] = std::move(entry);
    return OkStatus();
  });
}

bool TreeVerifyGraphs::Fits(const KvCache& cache, int64_t nodes, int64_t max_depth,
                            const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  if (nodes != shape_.nodes || max_depth != shape_.max_depth) return false;
  if (shape_.relaxed() && shape_.greedy != (sampling.temperature == 0.0)) return false;
  const Key key = KeyOf(cache, sampling);
  return key.first <= pool_.slot_rows() && entries_.count(key) > 0;
}

TreeVerifyGraphs::Key TreeVerifyGraphs::KeyOf(const KvCache& cache,
                                              const SamplingParams& sampling) const {
  return Key(ForwardGraphs::RoundUpToSpan(cache.length() + shape_.nodes + 1),
             sampling.temperature != 0.0 && HasFilters(sampling, model_.vocab));
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

void TreeVerifyGraphs::CopyWindowTensors(const Call::Jacobi& call, bool greedy,
                                         Entry& e) const {
  if (call.carried_q.defined() && call.carried_q.size(0) > 0) {
    e.carried_q.narrow(0, 0, call.carried_q.size(0)).copy_(call.carried_q);
  }
  if (call.extras_q.defined() && call.extras_q.size(0) > 0) {
    e.extras_q.narrow(0, 0, call.extras_q.size(0)).copy_(call.extras_q);
  }
  if (!greedy) e.drafter.copy_(call.drafter_uniforms);
}

StatusOr<TreeVerifyGraphs::Output> TreeVerifyGraphs::Run(const Call& call) const {
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
  if (jacobi) {
    MULO_RETURN_IF_ERROR(CheckWindow(call.jacobi));
  }
  const bool drawn = shape_.drawn() && !jacobi;
  if (call.q.defined() != drawn || call.valid.defined() != drawn) {
    return InvalidArgumentError(drawn ? "TreeVerifyGraphs::Run: a static tree needs q and valid"
                                      : "TreeVerifyGraphs::Run: q and valid are a static tree's");
  }
  Entry* e = entries_.at(KeyOf(*call.cache, call.sampling)).get();
  return GuardTorch("TreeVerifyGraphs::Run", [&]() -> StatusOr<Output> {
    at::NoGradGuard no_grad;
    std::vector<int64_t> ints = {call.cache->first_slot(), call.cache->first_slot() + 1,
                                 call.cache->length(), call.root_token, call.root_position,
                                 0, 0, 0, 0, call.sampling.top_k};
    double* const params = reinterpret_cast<double*>(ints.data() + 5);
    static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
    params[0] = call.sampling.cfg_scale;
    params[1] = call.sampling.temperature;
    params[2] = call.relaxation_bound;
    params[3] = call.sampling.top_p;
    if (jacobi) AppendWindowInts(call.jacobi, ints);
    UploadInto(e->ints, torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())},
                                         torch::kInt64));
    if (jacobi) {  // the tree's tokens, q and valid are made in the graph
      CopyWindowTensors(call.jacobi, greedy, *e);
    } else if (drawn) {  // the layout is the graphs' own
      e->tokens.copy_(call.tokens);
      e->q.copy_(call.q);
      e->valid.copy_(call.valid);
    } else {
      e->tokens.copy_(call.tokens);
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
    // Copies: the next replay (another request's step, in an engine loop) rewrites them.
    out.path_features = e->path_features.clone();
    if (jacobi) {
      out.path_p = e->path_p.clone();
      out.sibling_q = e->sibling_q.clone();
    }
    return out;
  });
}

}  // namespace mulo::engine
