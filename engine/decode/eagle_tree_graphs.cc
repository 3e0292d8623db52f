#include "engine/decode/eagle_tree_graphs.h"

#include "engine/decode/draft_tree.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/torch_guard.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"
#include "engine/sampling/row_sampler.h"
#include "engine/sampling/tree_rejection.h"
#include "engine/sampling/without_replacement.h"

namespace mulo::engine {

namespace {

// The ints before the pairs' tokens: the two head slots, the cache length, the pairs fed.
constexpr int64_t kFixedInts = 4;
// After the pairs' tokens: cfg_scale and temperature (float64 bits), a padded tree's width, then
// top_p (float64 bits) and top_k.
constexpr int64_t kTrailingInts = 5;

// One masked head forward over m tree nodes taking the next slots after `slots` fed ones
// (head cache rows committed + slots ..): `tokens` int64 [m], `inputs` [2, m, dim] their
// parents' predicted features, `attends` bool [m, slots] their ancestors' slots. Each node sees
// the committed rows, its ancestors' slots and its own row. Returns the predicted features
// [2, m, dim]. Shared by the dynamic tree's expansions and the static tree's levels.
// The span's columns as the tree's nodes see them, made once per replay.
struct TreeColumns {
  TreeColumns(const torch::Tensor& span_columns, const torch::Tensor& committed_rows)
      : columns(span_columns),
        committed(committed_rows),
        relative(span_columns - committed_rows),
        before_tree((relative < 0).unsqueeze(0)) {}
  torch::Tensor columns;      // int64 [span]
  torch::Tensor committed;    // int64 [1]: the head cache rows before the tree
  torch::Tensor relative;     // column c is tree slot c - committed
  torch::Tensor before_tree;  // bool [1, span]: the committed rows
};

torch::Tensor FeedNodes(const EagleTreeGraphs::Model& model, KvCache& view,
                        const TreeColumns& c, int64_t slots, const torch::Tensor& tokens,
                        const torch::Tensor& inputs, const torch::Tensor& attends) {
  const int64_t m = tokens.size(0), span = c.columns.size(0);
  const torch::Tensor& relative = c.relative;
  const torch::Tensor rows = c.committed + slots + torch::arange(m, c.columns.options());
  torch::Tensor mask = c.before_tree | (c.columns.unsqueeze(0) == rows.unsqueeze(1));
  if (slots > 0) {
    const torch::Tensor in_tree = (relative >= 0) & (relative < slots);
    mask = mask | (attends.index_select(1, relative.clamp(0, slots - 1)) & in_tree.unsqueeze(0));
  }
  PoolGraphs::Inputs in;
  in.span = span;
  in.rows = rows.unsqueeze(0).expand({2, m});
  in.positions = in.rows;
  in.mask = mask.unsqueeze(0).expand({2, m, span});
  in.inputs = {model.embed(tokens.unsqueeze(0).expand({2, m}).contiguous()), inputs};
  return model.head(view, in)[0];
}

bool SameTree(const DynamicTreeOptions& a, const DynamicTreeOptions& b) {
  return a.total_tokens == b.total_tokens && a.depth == b.depth && a.top_k == b.top_k;
}

}  // namespace

struct EagleTreeGraphs::Entry {
  // Static inputs on the device, filled per replay:
  //   ints [kFixedInts + max_pairs + kTrailingInts] int64: slots, length, pairs, the pairs'
  //     tokens, then cfg_scale and temperature as float64 bits, a padded tree's width, top_p
  //     as float64 bits and top_k;
  //   features [2, max_pairs, dim]: the pairs' target features;
  //   numbers [nodes] float64: a sampled static tree's (undefined for other graphs).
  torch::Tensor ints, features, numbers;
  std::optional<KvCache> view;  // the head pool's slots as the ints' first two index them
  // Written by every replay: the dynamic tree's choice, or the static tree's tokens (in
  // chosen.tokens), q and valid.
  DeviceDynamicTree::ChosenTree chosen;
  torch::Tensor q, valid;
  std::unique_ptr<ReplayableGraph> graph;
};

// One level of a static tree, as EagleProposer::ProposeStatic draws and feeds it, in tensors
// made before capture: the children of `parents` nodes (the level above's nodes with children,
// the root alone for the first level) drawn, then this level's nodes with children fed.
struct EagleTreeGraphs::StaticLevel {
  int64_t parents = 0, widest = 0;  // the draw's rows and the most children of one
  torch::Tensor number_index;  // int64 [parents * widest]: each draw's number (pads: 0)
  torch::Tensor from, to;      // int64: the drawn cells (parent * widest + rank), their nodes
  int64_t fed = 0;             // this level's nodes with children (0: the last level)
  torch::Tensor fed_nodes;     // int64 [fed]
  torch::Tensor parent_slot;   // int64 [fed]: each one's parent's slot + 1 (0: the root)
  torch::Tensor attends;       // bool [fed, slots before]: its ancestors' slots
};

// The request's numbers, as tensors read from a replay's upload.
struct EagleTreeGraphs::Numbers {
  torch::Tensor cfg, temperature;  // float32 [1]
  std::optional<RowFilters> filters;  // the filtered copies' top_k and top_p, [1, 1] each
};

EagleTreeGraphs::EagleTreeGraphs(const KvPool& pool, DynamicTreeOptions tree, int64_t max_pairs,
                                 Model model, bool filters, bool padded)
    : pool_(pool),
      tree_(tree),
      padded_(padded),
      filters_(filters),
      max_pairs_(max_pairs),
      model_(std::move(model)) {}

EagleTreeGraphs::~EagleTreeGraphs() = default;

StatusOr<std::shared_ptr<EagleTreeGraphs>> EagleTreeGraphs::Capture(const KvPool& pool,
                                                                    DynamicTreeOptions tree,
                                                                    int64_t max_pairs,
                                                                    Model model, bool filters) {
  if (tree.depth < 0 || tree.top_k < 1 || tree.total_tokens < 1 || max_pairs < 1) {
    return InvalidArgumentError("EagleTreeGraphs: a tree needs a top_k, tokens and pairs");
  }
  return CaptureAll(std::shared_ptr<EagleTreeGraphs>(
      new EagleTreeGraphs(pool, tree, max_pairs, std::move(model), filters)));
}

StatusOr<std::shared_ptr<EagleTreeGraphs>> EagleTreeGraphs::CapturePadded(const KvPool& pool,
                                                                          DynamicTreeOptions tree,
                                                                          int64_t max_pairs,
                                                                          Model model,
                                                                          bool filters) {
  if (tree.depth < 0 || tree.top_k < 1 || tree.top_k > model.vocab || tree.total_tokens < 1 ||
      tree.total_tokens > ChosenNodes(tree, model.vocab) || max_pairs < 1) {
    return InvalidArgumentError(
        "EagleTreeGraphs: a padded tree needs a top_k within the vocabulary, at most as many "
        "tokens as it records, and pairs");
  }
  return CaptureAll(std::shared_ptr<EagleTreeGraphs>(
      new EagleTreeGraphs(pool, tree, max_pairs, std::move(model), filters, /*padded=*/true)));
}

StatusOr<std::shared_ptr<EagleTreeGraphs>> EagleTreeGraphs::CaptureStatic(const KvPool& pool,
                                                                          StaticTree tree,
                                                                          int64_t max_pairs,
                                                                          Model model,
                                                                          bool filters) {
  const int64_t deepest = StaticTree57().max_depth();
  if (tree.depth < 1 || tree.depth > deepest || max_pairs < 1) {
    return InvalidArgumentError("EagleTreeGraphs: a static tree needs a depth in [1, " +
                                std::to_string(deepest) + "] and pairs");
  }
  std::shared_ptr<EagleTreeGraphs> graphs(
      new EagleTreeGraphs(pool, DynamicTreeOptions(), max_pairs, std::move(model),
                          filters && !tree.greedy));
  graphs->static_tree_ = tree;
  MULO_RETURN_IF_ERROR(GuardTorch("EagleTreeGraphs::CaptureStatic", [&]() -> Status {
    graphs->PlanStatic();
    return OkStatus();
  }));
  return CaptureAll(std::move(graphs));
}

StatusOr<std::shared_ptr<EagleTreeGraphs>> EagleTreeGraphs::CaptureAll(
    std::shared_ptr<EagleTreeGraphs> graphs) {
  if (graphs->pool_.scratch_slot() < 0) {
    return InvalidArgumentError("EagleTreeGraphs: the pool needs a scratch slot");
  }
  EagleTreeGraphs* const raw = graphs.get();
  MULO_RETURN_IF_ERROR(graphs->set_.CaptureSpans(
      graphs->pool_, graphs->rows_written(), graphs->model_.options.device(),
      [raw](int64_t span) {
        MULO_RETURN_IF_ERROR(raw->CaptureSpan(span, /*filtered=*/false));
        return raw->filters_ ? raw->CaptureSpan(span, /*filtered=*/true) : OkStatus();
      }));
  return graphs;
}

void EagleTreeGraphs::PlanStatic() {
  at::NoGradGuard no_grad;
  const TreeShape shape = StaticTree57Cut(static_tree_->depth);
  const int64_t length = shape.size();
  const torch::Device device = model_.options.device();
  const auto onto = [&](const std::vector<int64_t>& values) {
    return torch::tensor(values, torch::kInt64).to(device);
  };
  // The layout JudgeTree and the verify graphs read: parents, depths, ancestors.
  std::vector<int64_t> slot(length, -1);
  static_shape_.parents = onto(shape.parents);
  static_shape_.depths = onto(shape.depths);
  static_shape_.ancestors = TreeAncestors(static_shape_.parents, shape.max_depth());
  static_shape_.max_depth = shape.max_depth();
  // Level by level as ProposeStatic goes: the numbers in draw order (parent by parent, child
  // by child), the level's nodes with children fed in index order, each taking the next slot.
  std::vector<int64_t> expanding = {-1};
  int64_t drawn = 0, slots = 0;
  for (int64_t depth = 1; !expanding.empty(); ++depth) {
    StaticLevel level;
    level.parents = static_cast<int64_t>(expanding.size());
    for (int64_t parent : expanding) {
      level.widest = std::max<int64_t>(level.widest, shape.Children(parent).size());
    }
    static_widest_ = std::max(static_widest_, level.widest);
    std::vector<int64_t> number_index(level.parents * level.widest, 0), from, to;
    for (int64_t p = 0; p < level.parents; ++p) {
      const std::vector<int64_t> children = shape.Children(expanding[p]);
      for (size_t r = 0; r < children.size(); ++r) {
        number_index[p * level.widest + static_cast<int64_t>(r)] = drawn++;
        from.push_back(p * level.widest + static_cast<int64_t>(r));
        to.push_back(children[r]);
      }
    }
    level.number_index = onto(number_index);
    level.from = onto(from);
    level.to = onto(to);
    expanding.clear();
    for (int64_t i = 0; i < length; ++i) {
      if (shape.depths[i] == depth && !shape.Children(i).empty()) expanding.push_back(i);
    }
    level.fed = static_cast<int64_t>(expanding.size());
    if (level.fed > 0) {
      std::vector<int64_t> parent_slot;
      auto attends = torch::zeros({level.fed, std::max<int64_t>(slots, 1)}, torch::kBool);
      auto attend = attends.accessor<bool, 2>();
      for (int64_t j = 0; j < level.fed; ++j) {
        const int64_t parent = shape.parents[expanding[j]];
        parent_slot.push_back(parent < 0 ? 0 : slot[parent] + 1);
        for (int64_t a = parent; a >= 0; a = shape.parents[a]) attend[j][slot[a]] = true;
      }
      for (int64_t j = 0; j < level.fed; ++j) slot[expanding[j]] = slots + j;
      slots += level.fed;
      level.fed_nodes = onto(expanding);
      level.parent_slot = onto(parent_slot);
      level.attends = attends.to(device);
    }
    static_levels_.push_back(std::move(level));
  }
}

int64_t EagleTreeGraphs::rows_written() const {
  if (!static_tree_) return max_pairs() + tree_.depth * tree_.top_k;
  int64_t fed = 0;
  for (const StaticLevel& level : static_levels_) fed += level.fed;
  return max_pairs() + fed;
}

torch::Tensor EagleTreeGraphs::Ranking(const torch::Tensor& features,
                                       const Numbers& numbers) const {
  // DecodeSession::RankingProbabilities with the request's numbers as tensors: MixCfg, then
  // ToProbabilities' tempering (by 1 when greedy), filtering (never when greedy) and softmax.
  const torch::Tensor logits = model_.logits(features);
  return GuidedProbabilities(logits.select(0, 0), logits.select(0, 1), numbers.cfg,
                             numbers.temperature, /*one_hot_greedy=*/false,
                             numbers.filters ? &*numbers.filters : nullptr);
}

void EagleTreeGraphs::Body(Entry& e, int64_t span, bool filtered) const {
  at::NoGradGuard no_grad;
  const int64_t pairs_max = max_pairs();
  const auto longs = torch::dtype(torch::kInt64).device(model_.options.device());
  const torch::Tensor length = e.ints.narrow(0, 2, 1);
  const torch::Tensor pairs = e.ints.narrow(0, 3, 1);
  const torch::Tensor trailing = e.ints.narrow(0, kFixedInts + pairs_max, kTrailingInts);
  const torch::Tensor params = trailing.narrow(0, 0, 2).view(torch::kFloat64);
  const torch::Tensor width = trailing.narrow(0, 2, 1);
  Numbers numbers{params.narrow(0, 0, 1).to(torch::kFloat32),
                  params.narrow(0, 1, 1).to(torch::kFloat32), std::nullopt};
  if (filtered) {
    numbers.filters = RowFilters{trailing.narrow(0, 4, 1).view({1, 1}),
                                 trailing.narrow(0, 3, 1).view(torch::kFloat64).view({1, 1})};
  }
  const torch::Tensor columns = torch::arange(span, longs);
  // 1. The catch-up: pair j at cache row length + j, causal (pads past the pairs included).
  PoolGraphs::Inputs in;
  in.span = span;
  {
    const torch::Tensor ids =
        e.ints.narrow(0, kFixedInts, pairs_max).unsqueeze(0).expand({2, pairs_max}).contiguous();
    in.rows = (length + torch::arange(pairs_max, longs)).unsqueeze(0).expand({2, pairs_max});
    in.positions = in.rows;
    in.mask = columns.view({1, 1, span}) <= in.rows.unsqueeze(2);
    in.inputs = {model_.embed(ids), e.features};
  }
  // The root's prediction: the last real pair's.
  torch::Tensor fed = model_.head(*e.view, in)[0].index_select(1, pairs - 1);
  const torch::Tensor committed = length + pairs;
  if (static_tree_) {
    DrawStatic(e, fed, committed, columns, numbers);
    return;
  }
  // 2. The tree, as EagleProposer::GrowDynamic grows it; `fed`: the root's and every slot's
  // predicted features, in slot order.
  const TreeColumns tree_columns(columns, committed);
  DeviceDynamicTree tree(tree_, padded_ ? width : torch::Tensor());
  tree.Start(Ranking(fed, numbers).log()[0]);
  while (tree.expansions_left() > 0) {
    const DeviceDynamicTree::Feed feed = tree.NextFeed();
    const torch::Tensor predicted =
        FeedNodes(model_, *e.view, tree_columns, tree.slots_fed(), feed.tokens,
                  fed.index_select(1, feed.parent_slot + 1), feed.attends);
    fed = torch::cat({fed, predicted}, 1);
    tree.Expand(Ranking(predicted, numbers).log());
  }
  StatusOr<DeviceDynamicTree::ChosenTree> chosen = tree.ChosenTreeOnDevice();
  if (!chosen.ok()) throw std::runtime_error(std::string(chosen.status().message()));
  e.chosen = *std::move(chosen);
}

void EagleTreeGraphs::DrawStatic(Entry& e, torch::Tensor fed, const torch::Tensor& committed,
                                 const torch::Tensor& columns, const Numbers& numbers) const {
  const int64_t length = static_shape_.parents.size(0);
  const auto longs = columns.options();
  const bool greedy = static_tree_->greedy;
  const TreeColumns tree_columns(columns, committed);
  torch::Tensor tokens = torch::zeros({length}, longs);
  torch::Tensor valid = torch::zeros({length}, longs.dtype(torch::kBool));
  torch::Tensor q;
  torch::Tensor after = Ranking(fed, numbers);  // [parents, vocab], the root's first
  int64_t slots = 0;
  for (const StaticLevel& level : static_levels_) {
    // EagleProposer::DrawChildren: every parent's children at once.
    const torch::Tensor uniforms =
        greedy ? torch::Tensor()
               : e.numbers.index_select(0, level.number_index).view({level.parents, level.widest});
    const SiblingDrawsOnDevice draws = DrawSiblingsOnDevice(after, level.widest, uniforms, greedy);
    if (!q.defined()) q = torch::zeros({length, after.size(1)}, after.options());
    tokens.index_copy_(0, level.to, draws.tokens.flatten().index_select(0, level.from));
    valid.index_copy_(0, level.to, draws.valid.flatten().index_select(0, level.from));
    q.index_copy_(0, level.to,
                  draws.q.flatten(0, 1).index_select(0, level.from).to(q.scalar_type()));
    if (level.fed == 0) break;
    // The level's nodes with children (EagleProposer::FeedTreeNodes).
    const torch::Tensor predicted =
        FeedNodes(model_, *e.view, tree_columns, slots, tokens.index_select(0, level.fed_nodes),
                  fed.index_select(1, level.parent_slot), level.attends);
    fed = torch::cat({fed, predicted}, 1);
    slots += level.fed;
    after = Ranking(predicted, numbers);
  }
  e.chosen.tokens = tokens;
  e.q = q;
  e.valid = valid;
}

Status EagleTreeGraphs::CaptureSpan(int64_t span, bool filtered) {
  return GuardTorch("EagleTreeGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
    const torch::Device device = model_.options.device();
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    // Until the first call fills them: the scratch slot, length 0, one pair, greedy (cfg_scale
    // and temperature 0.0, top_p 1.0), so that the capture's warm-up writes nowhere a request
    // reads.
    e->ints = torch::zeros({kFixedInts + max_pairs() + kTrailingInts},
                           torch::dtype(torch::kInt64).device(device));
    e->ints.narrow(0, 0, 2).fill_(pool_.scratch_slot());
    e->ints.narrow(0, 3, 1).fill_(1);
    e->ints.narrow(0, kFixedInts + max_pairs() + 2, 1).fill_(tree_.top_k);
    e->ints.narrow(0, kFixedInts + max_pairs() + 3, 1).view(torch::kFloat64).fill_(1.0);
    e->features = torch::zeros({2, max_pairs(), model_.dim}, model_.options);
    const int64_t nodes = static_tree_ ? static_shape_.parents.size(0) : 0;
    if (static_tree_ && !static_tree_->greedy) {
      e->numbers = torch::zeros({nodes}, torch::dtype(torch::kFloat64).device(device));
    }
    e->view.emplace(pool_.SlotIndexedView(e->ints.narrow(0, 0, 2)));
    e->graph = set_.Make(
        device, [this, e, span, filtered] { Body(*e, span, filtered); }, model_.emulated,
        e->ints.numel() * 8 + e->features.numel() * e->features.element_size() + nodes * 8);
    if (e->graph != nullptr) entries_[Key(span, filtered)] = std::move(entry);
    return OkStatus();
  });
}

bool EagleTreeGraphs::FitsCall(const KvCache& cache, int64_t pairs,
                               const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  if (pairs < 1 || pairs > max_pairs()) return false;
  const Key key = KeyOf(cache, sampling);
  return key.first <= pool_.slot_rows() && entries_.count(key) > 0;
}

EagleTreeGraphs::Key EagleTreeGraphs::KeyOf(const KvCache& cache,
                                            const SamplingParams& sampling) const {
  // The ranking distribution is the request's own when it samples, filtered; greedy it is
  // untempered and unfiltered.
  return Key(SpanOf(cache),
             sampling.temperature != 0.0 && HasFilters(sampling, model_.vocab));
}

int64_t EagleTreeGraphs::SpanOf(const KvCache& cache) const {
  return ForwardGraphs::RoundUpToSpan(cache.length() + rows_written());
}

bool EagleTreeGraphs::Grows(const DynamicTreeOptions& options) const {
  if (static_tree_) return false;
  if (!padded_) return SameTree(options, tree_);
  return options.depth == tree_.depth && options.top_k >= 1 && options.top_k <= tree_.top_k &&
         ChosenNodes(options, model_.vocab) == tree_.total_tokens;
}

bool EagleTreeGraphs::Fits(const KvCache& cache, int64_t pairs, const DynamicTreeOptions& options,
                           const SamplingParams& sampling) const {
  return Grows(options) && FitsCall(cache, pairs, sampling);
}

bool EagleTreeGraphs::FitsStatic(const KvCache& cache, int64_t pairs, int64_t depth,
                                 const SamplingParams& sampling) const {
  return static_tree_ && static_tree_->depth == depth &&
         static_tree_->greedy == (sampling.temperature == 0.0) &&
         FitsCall(cache, pairs, sampling);
}

StatusOr<EagleTreeGraphs::Entry*> EagleTreeGraphs::Replay(const Call& call) const {
  const int64_t pairs = static_cast<int64_t>(call.tokens.size());
  if (!call.features.defined() || call.features.dim() != 3 || call.features.size(0) != 2 ||
      call.features.size(1) != pairs || call.features.size(2) != model_.dim) {
    return InvalidArgumentError("EagleTreeGraphs::Run: features: expected [2, " +
                                std::to_string(pairs) + ", " + std::to_string(model_.dim) + "]");
  }
  const Key key = KeyOf(*call.cache, call.sampling);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return FailedPreconditionError("EagleTreeGraphs::Run: no " +
                                   std::string(key.second ? "filtered " : "") + "graph over " +
                                   std::to_string(key.first) + " rows");
  }
  Entry* e = it->second.get();
  if (e->numbers.defined() &&
      (!call.numbers.defined() || call.numbers.numel() != e->numbers.numel())) {
    return InvalidArgumentError("EagleTreeGraphs::Run: numbers: expected " +
                                std::to_string(e->numbers.numel()) + " for the sampled tree");
  }
  return GuardTorch("EagleTreeGraphs::Run", [&]() -> StatusOr<Entry*> {
    at::NoGradGuard no_grad;
    std::vector<int64_t> ints(kFixedInts + max_pairs() + kTrailingInts, 0);
    ints[0] = call.cache->first_slot();
    ints[1] = call.cache->first_slot() + 1;
    ints[2] = call.cache->length();
    ints[3] = pairs;
    std::copy(call.tokens.begin(), call.tokens.end(), ints.begin() + kFixedInts);
    double* const params = reinterpret_cast<double*>(ints.data() + kFixedInts + max_pairs());
    static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
    params[0] = call.sampling.cfg_scale;
    params[1] = call.sampling.temperature;
    ints[kFixedInts + max_pairs() + 2] = static_tree_ ? 0 : call.tree.top_k;
    params[3] = call.sampling.top_p;
    ints[kFixedInts + max_pairs() + 4] = call.sampling.top_k;
    UploadInto(e->ints, torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())},
                                         torch::kInt64));
    // Pad pairs keep stale features: only pad rows, which nothing attends, read them.
    e->features.narrow(1, 0, pairs).copy_(call.features);
    if (e->numbers.defined()) e->numbers.copy_(call.numbers.view({-1}));
    e->graph->Replay();
    set_.CountReplay(1);
    call.cache->Advance(pairs);
    return e;
  });
}

StatusOr<DeviceDynamicTree::ChosenTree> EagleTreeGraphs::Run(const Call& call) const {
  const int64_t pairs = static_cast<int64_t>(call.tokens.size());
  if (call.cache == nullptr || !Fits(*call.cache, pairs, call.tree, call.sampling)) {
    return InvalidArgumentError("EagleTreeGraphs::Run: the call does not fit the tree graphs");
  }
  MULO_ASSIGN_OR_RETURN(Entry * e, Replay(call));
  // Views: the step copies them into the verify graphs' upload before anything replays these
  // graphs again (another request's step, in an engine loop); four copies per step saved.
  DeviceDynamicTree::ChosenTree chosen = e->chosen;
  chosen.borrowed = true;
  return chosen;
}

EagleTreeGraphs::StaticDraft EagleTreeGraphs::StaticDraft::Owned() const {
  StaticDraft owned = *this;
  owned.tree.tokens = tree.tokens.clone();  // the layout's tensors are constants: shared
  owned.tree.borrowed = false;
  owned.q = q.clone();
  owned.valid = valid.clone();
  return owned;
}

StatusOr<EagleTreeGraphs::StaticDraft> EagleTreeGraphs::RunStatic(const Call& call) const {
  const int64_t pairs = static_cast<int64_t>(call.tokens.size());
  if (call.cache == nullptr || !static_tree_ ||
      !FitsStatic(*call.cache, pairs, static_tree_->depth, call.sampling)) {
    return InvalidArgumentError("EagleTreeGraphs::RunStatic: the call does not fit the graphs");
  }
  MULO_ASSIGN_OR_RETURN(Entry * e, Replay(call));
  return GuardTorch("EagleTreeGraphs::RunStatic", [&]() -> StatusOr<StaticDraft> {
    StaticDraft draft;
    // The shape's tensors are constants nothing writes; the draws are views, as Run's.
    draft.tree = static_shape_;
    draft.tree.tokens = e->chosen.tokens;
    draft.tree.borrowed = true;
    draft.q = e->q;
    draft.valid = e->valid;
    draft.max_children = static_widest_;
    draft.head_forwards = 1;
    for (const StaticLevel& level : static_levels_) draft.head_forwards += level.fed > 0;
    return draft;
  });
}

}  // namespace mulo::engine
