#include "engine/decode/eagle_tree_graphs.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/device_upload.h"
#include "engine/core/torch_guard.h"
#include "engine/decode/draft_tree.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"
#include "engine/sampling/row_sampler.h"
#include "engine/sampling/tree_rejection.h"
#include "engine/sampling/without_replacement.h"

namespace mulo::engine {

namespace {

// A request's ints (its lane), after every lane's two head slots: its cache length and the
// pairs it feeds, then their tokens (max_pairs(), padded with token 0), then kTrailingInts:
// cfg_scale and temperature (float64 bits), a padded tree's width, top_p (float64 bits) and
// top_k.
constexpr int64_t kLaneFixed = 2;
constexpr int64_t kTrailingInts = 5;
// The most head rows (streams x rows of the widest forward) one replay feeds: the engine
// loop's default row budget per batch (--max_batch_tokens), as tree_verify_graphs.cc bounds
// its batches. Each batch size is another graph per span and kind of ranking (captured at
// load), so sizes no default batch takes are not captured.
constexpr int64_t kMaxReplayRows = 256;

// The span's columns as a request's tree nodes see them, made once per replay.
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

// One request's tree nodes in a head forward: m nodes taking the next slots after the `slots`
// fed ones (head cache rows committed + slots ..): `tokens` int64 [m], `inputs` [2, m, dim]
// their parents' predicted features, `attends` bool [m, slots] their ancestors' slots.
struct NodeFeed {
  const TreeColumns* columns = nullptr;
  torch::Tensor tokens, inputs, attends;
};

// One masked head forward over every request's nodes (each request's two streams in turn):
// each node sees its request's committed rows, its ancestors' slots and its own row. Returns
// the predicted features [2 x requests, m, dim]. Shared by the dynamic tree's expansions and
// the static tree's levels.
torch::Tensor FeedNodes(const EagleTreeGraphs::Model& model, KvCache& view, int64_t slots,
                        const std::vector<NodeFeed>& feeds) {
  const int64_t span = feeds[0].columns->columns.size(0);
  std::vector<torch::Tensor> ids, rows, masks, inputs;
  for (const NodeFeed& feed : feeds) {
    const TreeColumns& c = *feed.columns;
    const int64_t m = feed.tokens.size(0);
    const torch::Tensor lane_rows = c.committed + slots + torch::arange(m, c.columns.options());
    torch::Tensor mask = c.before_tree | (c.columns.unsqueeze(0) == lane_rows.unsqueeze(1));
    if (slots > 0) {
      const torch::Tensor in_tree = (c.relative >= 0) & (c.relative < slots);
      mask = mask |
             (feed.attends.index_select(1, c.relative.clamp(0, slots - 1)) & in_tree.unsqueeze(0));
    }
    ids.push_back(feed.tokens.unsqueeze(0).expand({2, m}));
    rows.push_back(lane_rows.unsqueeze(0).expand({2, m}));
    masks.push_back(mask.unsqueeze(0).expand({2, m, span}));
    inputs.push_back(feed.inputs);
  }
  PoolGraphs::Inputs in;
  in.span = span;
  in.rows = torch::cat(rows);
  in.positions = in.rows;
  in.mask = torch::cat(masks);
  in.inputs = {model.embed(torch::cat(ids)), torch::cat(inputs)};
  return model.head(view, in)[0];
}

bool SameTree(const DynamicTreeOptions& a, const DynamicTreeOptions& b) {
  return a.total_tokens == b.total_tokens && a.depth == b.depth && a.top_k == b.top_k;
}

}  // namespace

// The static inputs of replays of `requests` requests, filled per replay (shared by every
// span's graph of that many requests: one worker replays them one at a time):
//   ints: every lane's two head slots, then each lane's fields (kLaneFixed + max_pairs() +
//     kTrailingInts);
//   features [2 x requests, max_pairs, dim]: lane l's pairs' target features in rows 2l, 2l + 1;
//   numbers float64 [requests, nodes]: a sampled static tree's (undefined for other graphs).
struct EagleTreeGraphs::Inputs {
  int64_t requests = 0;
  torch::Tensor ints, features, numbers;
  // Each lane's rows of features and numbers, made once (a replay's copies then take no view
  // operators beyond the lone graphs').
  std::vector<torch::Tensor> lane_features, lane_numbers;
  std::optional<KvCache> view;  // the pool's slots as the ints' first 2 x requests index them
  int64_t bytes = 0;            // counted with the first graph that reads them
  bool counted = false;

  torch::Tensor LaneFields(int64_t lane, int64_t width) const {
    return ints.narrow(0, 2 * requests + lane * width, width);
  }
};

struct EagleTreeGraphs::Entry {
  Inputs* inputs = nullptr;
  // Written by every replay, per request: the dynamic tree's choice, or the static tree's
  // tokens (in tree.tokens), q and valid.
  std::vector<Draft> drafts;
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

// A request's part of a replay: its fields as tensors, and what its tree has fed so far.
struct EagleTreeGraphs::Lane {
  torch::Tensor length, pairs, width;  // int64 [1] each
  Numbers numbers;
  std::optional<TreeColumns> columns;  // after the catch-up
  torch::Tensor fed;  // [2, 1 + slots, dim]: the root's and every slot's predicted features
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
  raw->PlanRequests();
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

void EagleTreeGraphs::PlanRequests() {
  // Requests in powers of two, as many as the pool holds (two slots each), while the smallest
  // batch that needs the next size (one request more than this one) fits kMaxReplayRows.
  const int64_t most = std::max<int64_t>(1, PoolGraphs::Bucket(pool_.slots()) / 2);
  while (2 * max_requests_ <= most && (max_requests_ + 1) * 2 * lane_rows() <= kMaxReplayRows) {
    max_requests_ *= 2;
  }
}

int64_t EagleTreeGraphs::lane_ints() const { return kLaneFixed + max_pairs() + kTrailingInts; }

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

EagleTreeGraphs::Lane EagleTreeGraphs::LaneOf(const Inputs& in, int64_t lane, bool filtered) const {
  const torch::Tensor fields = in.LaneFields(lane, lane_ints());
  const torch::Tensor trailing = fields.narrow(0, kLaneFixed + max_pairs(), kTrailingInts);
  const torch::Tensor params = trailing.narrow(0, 0, 2).view(torch::kFloat64);
  Lane l;
  l.length = fields.narrow(0, 0, 1);
  l.pairs = fields.narrow(0, 1, 1);
  l.width = trailing.narrow(0, 2, 1);
  l.numbers = {params.narrow(0, 0, 1).to(torch::kFloat32),
               params.narrow(0, 1, 1).to(torch::kFloat32), std::nullopt};
  if (filtered) {
    l.numbers.filters = RowFilters{trailing.narrow(0, 4, 1).view({1, 1}),
                                   trailing.narrow(0, 3, 1).view(torch::kFloat64).view({1, 1})};
  }
  return l;
}

void EagleTreeGraphs::Body(Entry& e, int64_t span, bool filtered) const {
  at::NoGradGuard no_grad;
  Inputs& in = *e.inputs;
  const int64_t pairs_max = max_pairs();
  const auto longs = torch::dtype(torch::kInt64).device(model_.options.device());
  const torch::Tensor columns = torch::arange(span, longs);
  // 1. Every request's catch-up in one head forward (a read of its weights for all): pair j
  // at cache row length + j, causal (pads past the pairs included).
  std::vector<Lane> lanes;
  std::vector<torch::Tensor> ids, rows;
  for (int64_t lane = 0; lane < in.requests; ++lane) {
    lanes.push_back(LaneOf(in, lane, filtered));
    const torch::Tensor tokens = in.LaneFields(lane, lane_ints()).narrow(0, kLaneFixed, pairs_max);
    ids.push_back(tokens.unsqueeze(0).expand({2, pairs_max}));
    rows.push_back((lanes.back().length + torch::arange(pairs_max, longs))
                       .unsqueeze(0)
                       .expand({2, pairs_max}));
  }
  PoolGraphs::Inputs catch_up;
  catch_up.span = span;
  catch_up.rows = torch::cat(rows);
  catch_up.positions = catch_up.rows;
  catch_up.mask = columns.view({1, 1, span}) <= catch_up.rows.unsqueeze(2);
  catch_up.inputs = {model_.embed(torch::cat(ids)), in.features};
  const torch::Tensor out = model_.head(*in.view, catch_up)[0];
  for (int64_t lane = 0; lane < in.requests; ++lane) {
    Lane& l = lanes[lane];
    // The root's prediction: the last real pair's.
    l.fed = out.narrow(0, 2 * lane, 2).index_select(1, l.pairs - 1);
    l.columns.emplace(columns, l.length + l.pairs);
  }
  e.drafts.assign(in.requests, Draft());
  if (static_tree_) {
    DrawStatic(e, lanes);
  } else {
    GrowDynamic(e, lanes);
  }
}

void EagleTreeGraphs::GrowDynamic(Entry& e, std::vector<Lane>& lanes) const {
  // 2. Each request's tree, as EagleProposer::GrowDynamic grows it, its frontier fed with the
  // other requests' in one head forward per expansion.
  std::vector<DeviceDynamicTree> trees;
  for (Lane& l : lanes) {
    trees.emplace_back(tree_, padded_ ? l.width : torch::Tensor());
    trees.back().Start(Ranking(l.fed, l.numbers).log()[0]);
  }
  while (trees[0].expansions_left() > 0) {
    std::vector<NodeFeed> feeds;
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      const DeviceDynamicTree::Feed feed = trees[lane].NextFeed();
      feeds.push_back({&*lanes[lane].columns, feed.tokens,
                       lanes[lane].fed.index_select(1, feed.parent_slot + 1), feed.attends});
    }
    const torch::Tensor predicted = FeedNodes(model_, *e.inputs->view, trees[0].slots_fed(), feeds);
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      const torch::Tensor own = predicted.narrow(0, 2 * static_cast<int64_t>(lane), 2);
      lanes[lane].fed = torch::cat({lanes[lane].fed, own}, 1);
      trees[lane].Expand(Ranking(own, lanes[lane].numbers).log());
    }
  }
  for (size_t lane = 0; lane < lanes.size(); ++lane) {
    StatusOr<DeviceDynamicTree::ChosenTree> chosen = trees[lane].ChosenTreeOnDevice();
    if (!chosen.ok()) throw std::runtime_error(std::string(chosen.status().message()));
    e.drafts[lane].tree = *std::move(chosen);
  }
}

void EagleTreeGraphs::DrawStatic(Entry& e, std::vector<Lane>& lanes) const {
  const Inputs& in = *e.inputs;
  const int64_t length = static_shape_.parents.size(0);
  const auto longs = torch::dtype(torch::kInt64).device(model_.options.device());
  const bool greedy = static_tree_->greedy;
  // Each request's draws so far, and the ranking after the nodes it fed last (the root's
  // first: [parents, vocab]).
  struct Drawn {
    torch::Tensor tokens, valid, q, after;
  };
  std::vector<Drawn> drawn;
  for (const Lane& l : lanes) {
    drawn.push_back({torch::zeros({length}, longs),
                     torch::zeros({length}, longs.dtype(torch::kBool)), torch::Tensor(),
                     Ranking(l.fed, l.numbers)});
  }
  int64_t slots = 0;
  for (const StaticLevel& level : static_levels_) {
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      // EagleProposer::DrawChildren: every parent's children at once.
      Drawn& d = drawn[lane];
      const torch::Tensor uniforms = greedy ? torch::Tensor()
                                            : in.numbers.select(0, static_cast<int64_t>(lane))
                                                  .index_select(0, level.number_index)
                                                  .view({level.parents, level.widest});
      const SiblingDrawsOnDevice draws =
          DrawSiblingsOnDevice(d.after, level.widest, uniforms, greedy);
      if (!d.q.defined()) d.q = torch::zeros({length, d.after.size(1)}, d.after.options());
      d.tokens.index_copy_(0, level.to, draws.tokens.flatten().index_select(0, level.from));
      d.valid.index_copy_(0, level.to, draws.valid.flatten().index_select(0, level.from));
      d.q.index_copy_(0, level.to,
                      draws.q.flatten(0, 1).index_select(0, level.from).to(d.q.scalar_type()));
    }
    if (level.fed == 0) break;
    // The level's nodes with children (EagleProposer::FeedTreeNodes), every request's in one
    // head forward.
    std::vector<NodeFeed> feeds;
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      feeds.push_back({&*lanes[lane].columns, drawn[lane].tokens.index_select(0, level.fed_nodes),
                       lanes[lane].fed.index_select(1, level.parent_slot), level.attends});
    }
    const torch::Tensor predicted = FeedNodes(model_, *e.inputs->view, slots, feeds);
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      const torch::Tensor own = predicted.narrow(0, 2 * static_cast<int64_t>(lane), 2);
      lanes[lane].fed = torch::cat({lanes[lane].fed, own}, 1);
      drawn[lane].after = Ranking(own, lanes[lane].numbers);
    }
    slots += level.fed;
  }
  for (size_t lane = 0; lane < lanes.size(); ++lane) {
    e.drafts[lane].tree.tokens = drawn[lane].tokens;
    e.drafts[lane].q = drawn[lane].q;
    e.drafts[lane].valid = drawn[lane].valid;
  }
}

std::vector<int64_t> EagleTreeGraphs::PadLane() const {
  // The scratch slot's lane: length 0, one pair, greedy (cfg_scale and temperature 0.0,
  // top_p 1.0), the widest tree, so that a pad (and the capture's warm-up) writes nowhere a
  // request reads.
  std::vector<int64_t> fields(lane_ints(), 0);
  fields[1] = 1;
  fields[kLaneFixed + max_pairs() + 2] = tree_.top_k;
  reinterpret_cast<double*>(fields.data() + kLaneFixed + max_pairs())[3] = 1.0;
  return fields;
}

EagleTreeGraphs::Inputs& EagleTreeGraphs::InputsFor(int64_t requests) {
  std::unique_ptr<Inputs>& made = inputs_[requests];
  if (made != nullptr) return *made;
  made = std::make_unique<Inputs>();
  Inputs& in = *made;
  const torch::Device device = model_.options.device();
  in.requests = requests;
  std::vector<int64_t> ints(2 * requests, pool_.scratch_slot());
  const std::vector<int64_t> pad = PadLane();
  for (int64_t lane = 0; lane < requests; ++lane) ints.insert(ints.end(), pad.begin(), pad.end());
  in.ints = torch::tensor(ints, torch::kInt64).to(device);
  in.features = torch::zeros({2 * requests, max_pairs(), model_.dim}, model_.options);
  const int64_t nodes = static_tree_ ? static_shape_.parents.size(0) : 0;
  if (static_tree_ && !static_tree_->greedy) {
    in.numbers = torch::zeros({requests, nodes}, torch::dtype(torch::kFloat64).device(device));
  }
  for (int64_t lane = 0; lane < requests; ++lane) {
    in.lane_features.push_back(in.features.narrow(0, 2 * lane, 2));
    if (in.numbers.defined()) in.lane_numbers.push_back(in.numbers.select(0, lane));
  }
  in.view.emplace(pool_.SlotIndexedView(in.ints.narrow(0, 0, 2 * requests)));
  in.bytes = in.ints.numel() * 8 + in.features.numel() * in.features.element_size() +
             (in.numbers.defined() ? in.numbers.numel() * 8 : 0);
  return in;
}

Status EagleTreeGraphs::CaptureSpan(int64_t span, bool filtered) {
  return GuardTorch("EagleTreeGraphs::Capture", [&]() -> Status {
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

bool EagleTreeGraphs::FitsCall(const KvCache& cache, int64_t pairs,
                               const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  if (pairs < 1 || pairs > max_pairs()) return false;
  const int64_t span = SpanOf(cache);
  return span <= pool_.slot_rows() && entries_.count(Key(1, span, Filtered(sampling))) > 0;
}

bool EagleTreeGraphs::Filtered(const SamplingParams& sampling) const {
  // The ranking distribution is the request's own when it samples, filtered; greedy it is
  // untempered and unfiltered.
  return sampling.temperature != 0.0 && HasFilters(sampling, model_.vocab);
}

int64_t EagleTreeGraphs::SpanOf(const KvCache& cache) const {
  return ForwardGraphs::RoundUpToSpan(cache.length() + rows_written());
}

int64_t EagleTreeGraphs::lane_rows() const {
  if (!static_tree_) return std::max(max_pairs(), tree_.top_k);
  int64_t widest = 0;
  for (const StaticLevel& level : static_levels_) widest = std::max(widest, level.fed);
  return std::max(max_pairs(), widest);
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

Status EagleTreeGraphs::Check(const Call& call) const {
  const int64_t pairs = static_cast<int64_t>(call.tokens.size());
  const bool fits =
      call.cache != nullptr &&
      (static_tree_ ? FitsStatic(*call.cache, pairs, static_tree_->depth, call.sampling)
                    : Fits(*call.cache, pairs, call.tree, call.sampling));
  if (!fits) {
    return InvalidArgumentError("EagleTreeGraphs::Run: the call does not fit the tree graphs");
  }
  if (!call.features.defined() || call.features.dim() != 3 || call.features.size(0) != 2 ||
      call.features.size(1) != pairs || call.features.size(2) != model_.dim) {
    return InvalidArgumentError("EagleTreeGraphs::Run: features: expected [2, " +
                                std::to_string(pairs) + ", " + std::to_string(model_.dim) + "]");
  }
  if (static_tree_ && !static_tree_->greedy) {
    const int64_t nodes = static_shape_.parents.size(0);
    if (!call.numbers.defined() || call.numbers.numel() != nodes) {
      return InvalidArgumentError("EagleTreeGraphs::Run: numbers: expected " +
                                  std::to_string(nodes) + " for the sampled tree");
    }
  }
  return OkStatus();
}

StatusOr<std::vector<EagleTreeGraphs::Draft>> EagleTreeGraphs::Run(
    const std::vector<Call>& calls) const {
  for (const Call& call : calls) MULO_RETURN_IF_ERROR(Check(call));
  // Plain and filtered rankings replay apart, each in batches of at most max_requests().
  return RunInBatches<Draft>(
      calls, max_requests_, [this](const Call& call) { return Filtered(call.sampling); },
      [this](const std::vector<const Call*>& batch, bool filtered) {
        return RunBatch(batch, filtered);
      });
}

std::vector<int64_t> EagleTreeGraphs::ReplayInts(const std::vector<const Call*>& calls,
                                                 int64_t requests) const {
  // Every lane's two slots (pads: the scratch slot), then each lane's fields (pads: the
  // capture's, which the graph was made with).
  std::vector<int64_t> ints(2 * requests, pool_.scratch_slot());
  const std::vector<int64_t> pad = PadLane();
  for (int64_t lane = 0; lane < requests; ++lane) {
    const size_t at = ints.size();
    ints.insert(ints.end(), pad.begin(), pad.end());
    if (lane >= static_cast<int64_t>(calls.size())) continue;
    const Call& call = *calls[lane];
    ints[2 * lane] = call.cache->first_slot();
    ints[2 * lane + 1] = call.cache->first_slot() + 1;
    ints[at] = call.cache->length();
    ints[at + 1] = static_cast<int64_t>(call.tokens.size());
    std::copy(call.tokens.begin(), call.tokens.end(), ints.begin() + at + kLaneFixed);
    const size_t trailing = at + kLaneFixed + max_pairs();
    double* const params = reinterpret_cast<double*>(ints.data() + trailing);
    static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
    params[0] = call.sampling.cfg_scale;
    params[1] = call.sampling.temperature;
    ints[trailing + 2] = static_tree_ ? 0 : call.tree.top_k;
    params[3] = call.sampling.top_p;
    ints[trailing + 4] = call.sampling.top_k;
  }
  return ints;
}

EagleTreeGraphs::Draft EagleTreeGraphs::DraftOf(const Draft& written) const {
  Draft draft;
  if (static_tree_) {
    // The shape's tensors are constants nothing writes; the draws are views.
    draft.tree = static_shape_;
    draft.tree.tokens = written.tree.tokens;
    draft.q = written.q;
    draft.valid = written.valid;
    draft.max_children = static_widest_;
    draft.head_forwards = 1;
    for (const StaticLevel& level : static_levels_) draft.head_forwards += level.fed > 0;
  } else {
    draft.tree = written.tree;
    draft.head_forwards = 1 + tree_.depth;  // the catch-up, each expansion
  }
  // Views: a step copies them into the verify graphs' upload before anything replays these
  // graphs again (another request's step, in an engine loop); four copies per step saved.
  draft.tree.borrowed = true;
  return draft;
}

StatusOr<std::vector<EagleTreeGraphs::Draft>> EagleTreeGraphs::RunBatch(
    const std::vector<const Call*>& calls, bool filtered) const {
  const int64_t n = static_cast<int64_t>(calls.size());
  const int64_t requests = PoolGraphs::Bucket(2 * n) / 2;
  int64_t span = 0;
  for (const Call* call : calls) span = std::max(span, SpanOf(*call->cache));
  const auto it = entries_.find(Key(requests, span, filtered));
  if (it == entries_.end() && n > 1) {
    // A batch whose key failed to capture: each call alone (Fits holds the lone key).
    return RunEachAlone<Draft>(
        calls, [&](const std::vector<const Call*>& one) { return RunBatch(one, filtered); });
  }
  if (it == entries_.end()) {
    return FailedPreconditionError("EagleTreeGraphs::Run: no " +
                                   std::string(filtered ? "filtered " : "") + "graph over " +
                                   std::to_string(span) + " rows");
  }
  Entry* e = it->second.get();
  Inputs& in = *e->inputs;
  return GuardTorch("EagleTreeGraphs::Run", [&]() -> StatusOr<std::vector<Draft>> {
    at::NoGradGuard no_grad;
    std::vector<int64_t> ints = ReplayInts(calls, requests);
    UploadInto(in.ints,
               torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())}, torch::kInt64));
    for (int64_t lane = 0; lane < n; ++lane) {
      const Call& call = *calls[lane];
      // Pad pairs keep stale features: only pad rows, which nothing attends, read them.
      in.lane_features[lane].narrow(1, 0, call.features.size(1)).copy_(call.features);
      if (in.numbers.defined()) in.lane_numbers[lane].copy_(call.numbers.view({-1}));
    }
    e->graph->Replay();
    set_.CountReplay(n);
    std::vector<Draft> drafts;
    for (int64_t lane = 0; lane < n; ++lane) {
      calls[lane]->cache->Advance(static_cast<int64_t>(calls[lane]->tokens.size()));
      drafts.push_back(DraftOf(e->drafts[lane]));
    }
    return drafts;
  });
}

EagleTreeGraphs::Draft EagleTreeGraphs::Draft::Owned() const {
  if (!tree.borrowed) return *this;
  Draft owned = *this;
  if (valid.defined()) {
    // A static tree: the layout's tensors are constants, shared; the draws are copied.
    owned.tree.tokens = tree.tokens.clone();
    owned.tree.borrowed = false;
    owned.q = q.clone();
    owned.valid = valid.clone();
  } else {
    owned.tree = tree.Owned();
  }
  return owned;
}

}  // namespace mulo::engine
