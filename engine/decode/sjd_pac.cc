#include "engine/decode/sjd_pac.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/core/device_upload.h"
#include "engine/decode/draft_tree.h"
#include "engine/decode/pac_tree.h"
#include "engine/decode/pac_tree_size.h"
#include "engine/sampling/exact_verifier.h"
#include "engine/sampling/tree_rejection.h"
#include "engine/sampling/tree_verifier.h"
#include "engine/sampling/without_replacement.h"

namespace mulo::engine {
namespace {

McSjdOptions ContinuationOf(const SjdPacOptions& o) {
  McSjdOptions mc;
  mc.window = o.window;
  mc.init = o.init;
  mc.coupling = o.coupling;
  mc.coupled_residual = o.coupled_residual;
  mc.carried_q = o.carried_q;
  return mc;
}

// One iteration's drafts as a tree (pac_tree.h's layout) and its tokens.
struct PacTree : PacTreeLayout {
  std::vector<int64_t> tokens;
};

PacTree BuildTree(const std::vector<int64_t>& window,
                  const std::vector<std::vector<int64_t>>& extra, int64_t width) {
  const int64_t length = static_cast<int64_t>(window.size());
  std::vector<int64_t> counts, table = window;
  for (const std::vector<int64_t>& level : extra) {
    counts.push_back(static_cast<int64_t>(level.size()));
    table.insert(table.end(), level.begin(), level.end());
    table.resize(table.size() + (width - 1) - level.size(), 0);  // the level's table rows
  }
  PacTree tree;
  static_cast<PacTreeLayout&>(tree) = LayoutPacTree(length, counts, width);
  for (int64_t candidate : tree.candidates) tree.tokens.push_back(table[candidate]);
  return tree;
}

class PacState : public SteppedMethod::State {
 public:
  PacState(const SjdPacDecoder* method, ModelStream* target, const SjdPacOptions& options)
      : method_(method),
        target_(target),
        verifier_(options.accept, {}, options.hooks),
        options_(options),
        // The graphs hold the exact rules with the maximal coupling everywhere, not a test's.
        rules_in_graphs_(options.coupling == 1.0 && !options.accept && !options.hooks.residual &&
                         !options.hooks.keep_longest_path && !options.sibling_q &&
                         !options.coupled_residual && !options.carried_q),
        graph_shape_(PacVerifyShape(options.window, options.width, options.depth)) {}

  // Invariant: the target has been fed every committed token but the last; window_ holds the
  // drafts carried for the positions right after the committed prefix and their q (in the
  // graphs, carried_q_ holds the q), extra_ the extra candidates of the first positions and
  // extra_q_ theirs.
  Status Step(DecodeSession& session) override {
    if (const TreeVerifyGraphs* graphs = Graphs(session)) return StepInGraphs(session, *graphs);
    if (carried_q_.defined()) {  // leaving the graphs: q by rows
      window_.q = carried_q_.unbind(0);
      carried_q_ = torch::Tensor();
    }
    Stats& stats = session.stats();
    std::vector<int64_t> x = session.committed();
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t length = std::min<int64_t>(options_.window, session.num_tokens() - n);
    PacTree tree;
    torch::Tensor q;
    {  // 1. The window (carried drafts, then new initial tokens) and its tree.
      auto timer = session.Time(Phase::kDraft);
      FillJacobiWindow(session, options_.init, x, length, window_);
      extra_.resize(std::min<int64_t>(extra_.size(), length));
      tree = BuildTree(window_.tokens, extra_, options_.width);
      CountTree(stats, tree.size(), length);
      torch::Tensor table = torch::stack(window_.q);
      if (!extra_.empty()) {
        const int64_t levels = static_cast<int64_t>(extra_.size());
        table = torch::cat({table, extra_q_.narrow(0, 0, levels).reshape({-1, table.size(1)})});
      }
      q = table.index_select(0, Upload(torch::tensor(tree.candidates), table.device()));
    }
    const int64_t nodes = static_cast<int64_t>(tree.tokens.size());
    // Nodes at the image's last position are leaves that are judged but not fed (no token
    // follows them); they come last, their level being the deepest.
    const int64_t fed = static_cast<int64_t>(
        std::count_if(tree.levels.begin(), tree.levels.end(),
                      [&](int64_t l) { return n + l < session.num_tokens() - 1; }));
    const int64_t root_row = target_->cache().length();
    DraftBatch drafts{tree.tokens, tree.parents, q};
    Verdict verdict;
    torch::Tensor p;
    {  // 2. One tree-masked forward: the root x_{n-1} at n - 1, node i at n + level_i; 3.
       //    recursive rejection from the root.
      auto timer = session.Time(Phase::kVerify);
      std::vector<int64_t> ids = {x.back()}, positions = {n - 1}, parents = {-1};
      for (int64_t i = 0; i < fed; ++i) {
        ids.push_back(tree.tokens[i]);
        positions.push_back(n + tree.levels[i]);
        parents.push_back(tree.parents[i] + 1);  // the root is row 0 here
      }
      MULO_ASSIGN_OR_RETURN(TreeShape shape, TreeFromParents(parents));
      MULO_ASSIGN_OR_RETURN(ForwardOutput out,
                            target_->FeedSet(ids, positions, TreeAttentionMask(shape, root_row),
                                             LogitsMode::kAll));
      ++stats.verify_steps;
      p = session.Probabilities(out.logits);  // row 0 after the root, row 1 + i after node i
      // The verifier wants a row after every node and the root's last; an unfed leaf's row is
      // only read to draw a token past the image, which is dropped.
      std::vector<torch::Tensor> rows = {p.narrow(0, 1, fed)};
      if (fed < nodes) rows.push_back(p.narrow(0, 0, 1).expand({nodes - fed, p.size(1)}));
      rows.push_back(p.narrow(0, 0, 1));
      MULO_ASSIGN_OR_RETURN(verdict, verifier_.Verify({drafts, torch::cat(rows), session.greedy()},
                                                      session.verifier_rngs()));
    }
    // 4. The target keeps the root and the accepted path (fed nodes only).
    const int64_t accepted = static_cast<int64_t>(verdict.accepted.size());
    std::vector<int64_t> path_tokens, path_rows;
    for (int64_t node : verdict.accepted) {
      path_tokens.push_back(tree.tokens[node]);
      path_rows.push_back(node < fed ? root_row + 1 + node : -1);
    }
    MULO_RETURN_IF_ERROR(
        KeepPath(session, root_row, path_tokens, path_rows, verdict.next_token, x));
    stats.CountAcceptedPath(accepted);
    const int64_t last = accepted > 0 ? verdict.accepted.back() : -1;
    const bool redrawn = std::count(tree.parents.begin(), tree.parents.end(), last) > 0;
    stats.resampled_tokens += redrawn;
    session.commit_map().Path(n, accepted, {}, redrawn);
    {  // 5. Adaptive continuation along the carried path, then the next tree's candidates.
      auto timer = session.Time(Phase::kSampling);
      MULO_RETURN_IF_ERROR(
          Continue(session, p, tree, n, length, static_cast<int64_t>(x.size()) - n));
    }
    session.Commit(std::move(x));
    return OkStatus();
  }

 private:
  // The target keeps its rows through the root's and the kept path's fed rows (`path_rows`:
  // each kept draft's cache row, -1 for one at the image's last position, never fed); x takes
  // the path's tokens and, when a position is left, the token after them.
  Status KeepPath(DecodeSession& session, int64_t root_row, const std::vector<int64_t>& tokens,
                  const std::vector<int64_t>& path_rows, int64_t next_token,
                  std::vector<int64_t>& x) {
    std::vector<int64_t> rows(root_row + 1);
    for (int64_t r = 0; r <= root_row; ++r) rows[r] = r;
    for (size_t i = 0; i < tokens.size(); ++i) {
      x.push_back(tokens[i]);
      if (path_rows[i] >= 0) rows.push_back(path_rows[i]);
    }
    MULO_RETURN_IF_ERROR(target_->Keep(
        rows, std::vector<int64_t>(x.begin(), x.begin() + (static_cast<int64_t>(rows.size()) -
                                                           target_->condition_rows()))));
    if (next_token >= 0 && static_cast<int64_t>(x.size()) < session.num_tokens()) {
      x.push_back(next_token);
    }
    return OkStatus();
  }

  void CountTree(Stats& stats, int64_t nodes, int64_t length) const {
    stats.drafted_tokens += nodes;
    stats.drafted_tree_depth += length;
    stats.drafted_tree_width += extra_.empty() ? 1 : 1 + static_cast<int64_t>(extra_[0].size());
  }

  // The pools' graphs of this request's tree, or null when its rules, sampling or cache keep
  // the step eager.
  const TreeVerifyGraphs* Graphs(DecodeSession& session) const {
    if (!rules_in_graphs_ || session.reservation() == nullptr) return nullptr;
    const TreeVerifyGraphs* graphs =
        session.reservation()->TreeVerifyGraphsOf(*session.models().target, graph_shape_);
    return graphs != nullptr && target_->CanVerifyTree(*graphs, graph_shape_.nodes,
                                                       graph_shape_.max_depth,
                                                       session.sampling())
               ? graphs
               : nullptr;
  }

  // Step's iteration as one replay of the pools' tree verify graphs and one host read (issue
  // 61): the tree (its tokens, q and which nodes are real made in the graph from the window,
  // the extras and their q), its forward, the walk, the kept path's cache rows, and the Jacobi
  // update of the next window with its extra candidates (tree_jacobi_update.h). Given the same
  // numbers, Step's decisions: the graph's tree is the whole shape, the nodes the eager tree
  // lacks (extras not drawn, levels past a shorter window or past the branching levels) never
  // kept or walked into.
  Status StepInGraphs(DecodeSession& session, const TreeVerifyGraphs& graphs) {
    Stats& stats = session.stats();
    std::vector<int64_t> x = session.committed();
    const int64_t n = static_cast<int64_t>(x.size()), window = options_.window;
    const int64_t length = std::min<int64_t>(window, session.num_tokens() - n);
    const bool bonus = n + length < session.num_tokens();
    const TreeVerifyGraphs::Shape& shape = graphs.shape();
    const int64_t nodes = shape.nodes, max_depth = shape.max_depth;
    const int64_t levels = shape.jacobi.levels, more = shape.jacobi.extras;
    {  // 1. The window: carried drafts, then new initial tokens (their q made in the graph).
      auto timer = session.Time(Phase::kDraft);
      if (!window_.q.empty()) {  // coming from an eager step: q as one tensor
        carried_q_ = torch::stack(window_.q);
        window_.q.clear();
      }
      FillJacobiTokens(session, options_.init, x, length, window_.tokens);
      if (carried_q_.defined() && carried_q_.size(0) > length) {
        carried_q_ = carried_q_.narrow(0, 0, length);
      }
      extra_.resize(std::min<int64_t>(extra_.size(), length));
      std::vector<int64_t> counts;
      for (const std::vector<int64_t>& level : extra_) counts.push_back(level.size());
      CountTree(stats, LayoutPacTree(length, counts, options_.width).size(), length);
    }
    TreeVerifyGraphs::Output out;
    const VerifierRngs rngs = session.verifier_rngs();
    {  // 2-5. The forward, the walk, the kept rows and the next window, in one replay.
      auto timer = session.Time(Phase::kVerify);
      TreeVerifyGraphs::Call call;
      call.root_token = x.back();
      call.sampling = session.sampling();
      call.jacobi.drafts = window_.tokens;
      call.jacobi.drafts.resize(window, 0);
      call.jacobi.extras = extra_;
      call.jacobi.carried_q = carried_q_;
      if (!extra_.empty()) call.jacobi.extras_q = extra_q_.narrow(0, 0, extra_.size());
      call.jacobi.length = length;
      call.jacobi.bonus = bonus;
      if (!session.greedy()) {
        const ChainNumbers numbers = PeekChainNumbers(rngs, nodes + window, session.device());
        call.accept_uniforms = numbers.accept;
        call.draw_uniform = numbers.draw;
        call.jacobi.drafter_uniforms =
            session.uniforms(RngStream::kDrafter).Peek(window + 1 + levels * more);
      }
      MULO_ASSIGN_OR_RETURN(out, target_->VerifyTree(graphs, std::move(call)));
      ++stats.verify_steps;
    }
    const std::vector<int64_t>& host = out.host;
    MULO_ASSIGN_OR_RETURN(
        const TreeDecision decision,
        TreeDecisionFromHost(std::vector<int64_t>(host.begin() + 2 * nodes,
                                                  host.begin() + 2 * nodes + 3 + max_depth),
                             nodes, max_depth));
    // The target keeps the root and the kept path, already in place (fed nodes only).
    const int64_t accepted = static_cast<int64_t>(decision.accepted.size());
    const int64_t root_row = target_->cache().length() - nodes - 1;
    std::vector<int64_t> path_tokens, path_rows;  // the path's rows: in place after the root's
    for (int64_t i = 0; i < accepted; ++i) {
      path_tokens.push_back(host[decision.accepted[i]]);
      path_rows.push_back(n + i < session.num_tokens() - 1 ? root_row + 1 + i : -1);
    }
    MULO_RETURN_IF_ERROR(
        KeepPath(session, root_row, path_tokens, path_rows, decision.next_token, x));
    stats.CountAcceptedPath(accepted);
    // A token was re-drawn from a residual when the path's last node (the root) had children.
    const int64_t branching = static_cast<int64_t>(extra_.size());
    const int64_t last = accepted > 0 ? decision.accepted.back() : -1;
    const bool redrawn =
        accepted == 0 ||
        (accepted < length && (accepted < branching || last == shape.jacobi.main[accepted - 1]));
    stats.resampled_tokens += redrawn;
    session.commit_map().Path(n, accepted, {}, redrawn);
    TakeNextWindow(session, rngs, graphs.shape(), out, decision.tries, length, bonus,
                   static_cast<int64_t>(x.size()) - n);
    session.Commit(std::move(x));
    return OkStatus();
  }

  // The next window from a replay's read and p (rows `first` .. of the re-draws, the first
  // levels' extras and their q); the streams move by the numbers the step used: the walk's
  // `tries` and its draw, the coupling's keep tests (one per carried draft past the prefix),
  // the re-draws and the extras' draws.
  void TakeNextWindow(DecodeSession& session, const VerifierRngs& rngs,
                      const TreeVerifyGraphs::Shape& shape, const TreeVerifyGraphs::Output& out,
                      int64_t tries, int64_t length, bool bonus, int64_t first) {
    const int64_t levels = shape.jacobi.levels, more = shape.jacobi.extras;
    const int64_t redrawn = std::max<int64_t>(0, length + (bonus ? 1 : 0) - first);
    const int64_t next_levels =
        options_.width > 1 && !session.greedy() ? std::min(options_.depth - 1, redrawn) : 0;
    if (!session.greedy()) {
      rngs.accept->Skip(static_cast<uint64_t>(tries));
      rngs.draw->Skip(1);
      if (redrawn > 0) {
        rngs.accept->Skip(static_cast<uint64_t>(std::max<int64_t>(0, length - first)));
      }
      session.rng(RngStream::kDrafter).Skip(static_cast<uint64_t>(redrawn + next_levels * more));
    }
    const std::vector<int64_t>& host = out.host;
    const size_t redraws = 2 * shape.nodes + 3 + shape.max_depth;
    window_.tokens.assign(host.begin() + redraws + first,
                          host.begin() + redraws + first + redrawn);
    carried_q_ = redrawn > 0 ? out.path_p.narrow(0, first, redrawn) : torch::Tensor();
    extra_.assign(next_levels, {});
    const size_t siblings = redraws + shape.jacobi.window + 1, valid = siblings + levels * more;
    for (int64_t l = 0; l < next_levels; ++l) {
      for (int64_t k = 0; k < more && host[valid + l * more + k] != 0; ++k) {
        extra_[l].push_back(host[siblings + l * more + k]);
      }
    }
    extra_q_ = out.sibling_q;
  }

  // The drafts past the new prefix (`first` rows after n) from the carried path's
  // distributions, and for the next window's first depth - 1 positions width - 1 candidates
  // more, drawn without replacement from the same q after the draft: one host read
  // (DecodeSession::ReadIds: batched with other requests' in a loop).
  Status Continue(DecodeSession& session, const torch::Tensor& p, const PacTree& tree, int64_t n,
                  int64_t length, int64_t first) {
    // p at the carried path's positions, n .. n + length - 1, and the one after when a
    // position follows: exactly the rows SJD's chain forward gives.
    std::vector<int64_t> path_rows = {0};
    const bool bonus = n + length < session.num_tokens();
    for (int64_t l = 0; l + 1 < length + (bonus ? 1 : 0); ++l) path_rows.push_back(1 + tree.main[l]);
    const torch::Tensor path_p =
        p.index_select(0, Upload(torch::tensor(path_rows), p.device()));
    const int64_t rows = path_p.size(0) - first;
    const int64_t carried = std::max<int64_t>(0, length - first);
    const std::vector<int64_t> carried_tokens(window_.tokens.end() - carried,
                                              window_.tokens.end());
    const std::vector<torch::Tensor> carried_q(window_.q.end() - carried, window_.q.end());
    window_ = JacobiWindow();
    extra_.clear();
    if (rows <= 0) return OkStatus();
    const torch::Tensor drafts =
        method_->RedrawOnDevice(session, path_p, first, carried_tokens, carried_q);
    const int64_t levels =
        options_.width > 1 && !session.greedy() ? std::min(options_.depth - 1, rows) : 0;
    std::vector<int64_t> read;
    if (levels > 0) {
      const int64_t more = options_.width - 1;
      const torch::Tensor q = path_p.narrow(0, first, levels);
      const torch::Tensor without_draft =
          q.scatter(1, drafts.narrow(0, 0, levels).unsqueeze(1), 0.0f);
      const SiblingDrawsOnDevice extra = DrawSiblingsOnDevice(
          without_draft, more,
          session.uniforms(RngStream::kDrafter).Take(levels * more).view({levels, more}),
          /*greedy=*/false);
      extra_q_ = options_.sibling_q ? options_.sibling_q(extra.q, q) : extra.q;
      MULO_ASSIGN_OR_RETURN(read, session.ReadIds(torch::cat({drafts, extra.tokens.flatten(),
                                                              extra.valid.to(torch::kInt64)
                                                                  .flatten()})));
      extra_.assign(levels, {});
      for (int64_t l = 0; l < levels; ++l) {
        // Draws past the tokens with mass are invalid; the valid ones come first.
        for (int64_t k = 0; k < more; ++k) {
          if (read[rows + levels * more + l * more + k] == 0) break;
          extra_[l].push_back(read[rows + l * more + k]);
        }
      }
      read.resize(rows);
    } else {
      MULO_ASSIGN_OR_RETURN(read, session.ReadIds(drafts));
    }
    window_.tokens = std::move(read);
    window_.q = method_->NextQ(path_p, first, window_.tokens, carried_tokens, carried_q);
    return OkStatus();
  }

  const SjdPacDecoder* method_;  // outlives its states (they run inside its Generate)
  ModelStream* target_;
  TreeVerifier verifier_;
  SjdPacOptions options_;
  JacobiWindow window_;
  std::vector<std::vector<int64_t>> extra_;  // level l's extra candidates, in draw order
  torch::Tensor extra_q_;                    // [levels, width - 1, V]: what each was drawn from
  torch::Tensor carried_q_;  // in the graphs: [carried drafts, V], the window's q
  const bool rules_in_graphs_;
  const TreeVerifyGraphs::Shape graph_shape_;  // the pools' graphs of this request's tree
};

}  // namespace

SjdPacDecoder::SjdPacDecoder(SjdPacOptions options)
    : McSjdDecoder(ContinuationOf(options)), pac_(std::move(options)) {}

Status SjdPacDecoder::Validate(const ModelSet& models) const {
  // Each option's range is its spec's (sjd_pac_spec.cc, checked by MakeMethod); the tree they
  // make together is bounded here.
  const int64_t nodes = PacTreeNodes(pac_.width, pac_.depth);
  if (nodes > kMaxPacTreeNodes) {
    return InvalidArgumentError(
        "sjd_pac.depth: width " + std::to_string(pac_.width) + " and depth " +
        std::to_string(pac_.depth) + " make " + std::to_string(nodes) +
        " tree nodes; at most " + std::to_string(kMaxPacTreeNodes));
  }
  return McSjdDecoder::Validate(models);
}

StatusOr<std::unique_ptr<SteppedMethod::State>> SjdPacDecoder::Begin(
    DecodeSession& session) const {
  session.stats().accepted_per_position.assign(pac_.window, 0);
  MULO_ASSIGN_OR_RETURN(ModelStream * target,
                        session.Open(*session.models().target, StreamRole::kTarget));
  // Token 0 comes straight from the target's prefill, as in AR.
  session.Append(session.Draw(target->next_logits(), RngStream::kTarget));
  return std::unique_ptr<State>(std::make_unique<PacState>(this, target, pac_));
}

}  // namespace mulo::engine
