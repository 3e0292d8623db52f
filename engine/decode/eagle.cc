#include "engine/decode/eagle.h"

#include <algorithm>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/decode/dynamic_tree.h"
#include "engine/decode/eagle_proposer.h"
#include "engine/decode/kv_pools.h"
#include "engine/model/tree_verify_graphs.h"
#include "engine/sampling/exact_verifier.h"
#include "engine/sampling/relaxed_tree_rejection.h"
#include "engine/sampling/tree_rejection.h"
#include "engine/sampling/tree_verifier.h"

namespace mulo::engine {
namespace {

class EagleState : public SteppedMethod::State {
 public:
  EagleState(ModelStream* target, std::unique_ptr<EagleProposer> proposer,
             const EagleOptions& options, std::shared_ptr<const LatentNeighbors> neighbors,
             std::unique_ptr<PeanutShapes> shapes)
      : target_(target),
        proposer_(std::move(proposer)),
        verifier_(options.accept, TreeRelaxation{options.relaxation, std::move(neighbors)},
                  options.hooks),
        options_(options),
        shapes_(std::move(shapes)) {}

  // Invariant: the target has been fed every committed token but the last (the root), and
  // the proposer has been handed the pair of every committed token.
  Status Step(DecodeSession& session) override {
    const int64_t n = static_cast<int64_t>(session.committed().size());
    // Nodes at positions n .. end - 2: a node is fed to the target, and nothing is fed at the
    // last position (no token follows it); the verifier draws the last token itself.
    const int64_t max_depth = session.num_tokens() - n - 1;
    // PEANUT: this step's depth and width from the neighbours' trees.
    const DynamicTreeOptions shape = shapes_ ? shapes_->ShapeAt(n) : options_.dynamic;
    if (max_depth > 0 && VerifiesOnDevice(session, shape, max_depth)) {
      return StepOnDevice(session, shape, max_depth);
    }
    std::vector<int64_t> x = session.committed();
    TreeDraft tree;
    bool drafted = false;
    if (max_depth > 0 && options_.static_tree && RuleOnDevice()) {
      // EAGLE-1's step in two replays when the worker's graphs fit it: the tree drawn in one,
      // verified, judged and committed in the other (eagle_tree_graphs.h, tree_verify_graphs.h).
      std::optional<EagleTreeGraphs::Draft> draft;
      {
        auto timer = session.Time(Phase::kDraft);
        MULO_ASSIGN_OR_RETURN(draft, proposer_->ProposeStaticOnGraphs(session, max_depth));
      }
      if (draft) {
        const int64_t length = draft->tree.size();
        TreeVerifyGraphs::Shape key;
        key.nodes = length;
        key.max_depth = draft->tree.max_depth;
        key.max_children = draft->max_children;
        key.parents = StaticTree57Cut(key.max_depth).parents;
        const TreeVerifyGraphs* graphs = session.reservation()->TreeVerifyGraphsOf(
            *session.models().target, Relaxed(std::move(key), session));
        if (graphs != nullptr && target_->CanVerifyTree(*graphs, length, draft->tree.max_depth,
                                                        session.sampling())) {
          // A queued verification waits while other requests' drafting replays rewrite the
          // graphs' outputs this draft views.
          if (target_->queued()) draft = draft->Owned();
          return VerifyOnGraphs(session, *graphs, draft->tree, shape, draft->q, draft->valid);
        }
        auto timer = session.Time(Phase::kDraft);
        // The read yields to the engine loop, whose other requests may replay the graphs.
        MULO_ASSIGN_OR_RETURN(tree, proposer_->ReadStatic(session, draft->Owned()));
        drafted = true;
      }
    }
    if (max_depth > 0 && !drafted) {  // 1. The head grows a tree after x_{n-1}.
      auto timer = session.Time(Phase::kDraft);
      if (options_.static_tree) {
        MULO_ASSIGN_OR_RETURN(tree, proposer_->ProposeStatic(session, max_depth));
      } else {
        MULO_ASSIGN_OR_RETURN(tree, proposer_->ProposeDynamic(session, shape, max_depth));
      }
    }
    ForwardOutput out;
    Verdict verdict;
    MULO_RETURN_IF_ERROR(VerifyOnHost(session, x.back(), tree, out, verdict));
    return CommitPath(session, std::move(x), tree, PathFeatures(out.hidden, verdict), verdict,
                      shape);
  }

 private:
  // 2. One target forward: the root x_{n-1} at n - 1, node i at n - 1 + depth_i; 3. recursive
  // rejection from the root. Sets the forward's output and the verdict.
  Status VerifyOnHost(DecodeSession& session, int64_t root, const TreeDraft& tree,
                      ForwardOutput& out, Verdict& verdict) {
    const int64_t n = static_cast<int64_t>(session.committed().size());
    const int64_t length = tree.drafts.size();
    const int64_t root_row = target_->cache().length();  // the verify forward's first row
    {
      auto timer = session.Time(Phase::kVerify);
      std::vector<int64_t> ids = {root}, positions = {n - 1}, parents = {-1};
      for (int64_t i = 0; i < length; ++i) {
        ids.push_back(tree.drafts.tokens[i]);
        positions.push_back(n - 1 + tree.shape.depths[i]);
        parents.push_back(tree.drafts.parents[i] + 1);  // the root is node 0 here
      }
      MULO_ASSIGN_OR_RETURN(TreeShape with_root, TreeFromParents(parents));
      MULO_ASSIGN_OR_RETURN(out,
                            target_->FeedSet(ids, positions, TreeAttentionMask(with_root, root_row),
                                             LogitsMode::kAll));
      ++session.stats().verify_steps;
      // 3. Recursive rejection from the root: p after node i is row 1 + i, after the root row
      // 0 (the verifier wants it last). Greedy relaxed verification pools the untempered
      // distribution (the request's own is one-hot at temperature 0).
      const torch::Tensor p = options_.relaxation.kind == Pooling::kNone
                                  ? session.Probabilities(out.logits)
                                  : session.RankingProbabilities(out.logits);
      MULO_ASSIGN_OR_RETURN(
          verdict,
          verifier_.Verify({tree.drafts, torch::cat({p.narrow(0, 1, length), p.narrow(0, 0, 1)}),
                            session.greedy()},
                           session.verifier_rngs()));
    }
    return OkStatus();
  }

  // The target features that predicted the committed tokens x_n, x_n+1, ...
  // [batch, accepted + 1, dim]: the root's row of the verify forward's `hidden`
  // [batch, 1 + L, dim], then each accepted node's.
  static torch::Tensor PathFeatures(const torch::Tensor& hidden, const Verdict& verdict) {
    std::vector<int64_t> rows = {0};
    for (int64_t node : verdict.accepted) rows.push_back(1 + node);
    return hidden.index_select(1, torch::tensor(rows, torch::kInt64).to(hidden.device()));
  }

  // A deterministic tree (EAGLE-2's, PEANUT's, LANTERN's) is verified on the device, by the
  // lossless rules (tree_rejection.h) or LANTERN's relaxation (relaxed_tree_rejection.h); a
  // static tree (EAGLE-1's, LANTERN++'s) only inside the verify graphs (Step), and the tests'
  // broken rules always walk on the host. A target with graphs of its own (not a pool's)
  // keeps its replayed tree forward, which takes host ids.
  bool VerifiesOnDevice(const DecodeSession& session, const DynamicTreeOptions& shape,
                        int64_t max_depth) const {
    if (options_.static_tree || !RuleOnDevice() || target_->cache().graphs() != nullptr) {
      return false;
    }
    // LANTERN's relaxed walk pays on the device inside its verify graphs: eagerly its residual
    // chain over every sibling rank costs more than the host walk (+14% to +28% per image on
    // the CPU against EAGLE-2's, 2026-11-30), so without the pools' graphs it walks on the host.
    return !relaxed() || HasRelaxedGraphs(session, shape, max_depth);
  }

  // Whether the pools hold relaxed verify graphs for this step's tree: the dynamic tree cut to
  // the rows left, min(total_tokens, the nodes recorded) drafts.
  bool HasRelaxedGraphs(const DecodeSession& session, const DynamicTreeOptions& shape,
                        int64_t max_depth) const {
    if (session.reservation() == nullptr) return false;
    const int64_t depth = std::min(shape.depth, max_depth - 1);
    TreeVerifyGraphs::Shape key;
    key.nodes = ChosenNodes({shape.total_tokens, depth, shape.top_k},
                            session.models().target->vocab_size());
    key.max_depth = depth + 1;
    key.max_children = SiblingBound(shape);
    return session.reservation()->TreeVerifyGraphsOf(*session.models().target,
                                                     Relaxed(std::move(key), session)) != nullptr;
  }

  // The rules the device's walks make (JudgeTree, JudgeRelaxedTree): the exact ones or
  // LANTERN's relaxations, not a test's broken rule.
  bool RuleOnDevice() const {
    return !options_.accept && !options_.hooks.residual && !options_.hooks.keep_longest_path;
  }
  bool relaxed() const { return options_.relaxation.kind != Pooling::kNone; }
  // delta (additive) or lambda - 1 (multiplicative): JudgeRelaxedTree's bound.
  double RelaxationBound() const {
    return options_.relaxation.kind == Pooling::kAdditive ? options_.relaxation.delta
                                                          : options_.relaxation.lambda - 1.0;
  }
  // The dynamic tree's bound on one node's children: its top_k.
  static int64_t SiblingBound(const DynamicTreeOptions& shape) { return shape.top_k; }
  // The verify graphs' key of a tree judged by this method's rule.
  TreeVerifyGraphs::Shape Relaxed(TreeVerifyGraphs::Shape key,
                                  const DecodeSession& session) const {
    if (!relaxed()) return key;
    key.relaxation = options_.relaxation.kind;
    key.k = options_.relaxation.k;
    key.greedy = session.greedy();
    return key;
  }
  // The acceptance numbers a walk may use: one per draft, two when relaxed.
  int64_t NumbersFor(int64_t length) const { return relaxed() ? 2 * length : length; }

  // The step with one host read: the head grows the tree on the device, the target scores it
  // from there, the walk judges it there, and the tree comes back with the verdict.
  Status StepOnDevice(DecodeSession& session, const DynamicTreeOptions& shape,
                      int64_t max_depth) {
    Stats& stats = session.stats();
    std::vector<int64_t> x = session.committed();
    const int64_t n = static_cast<int64_t>(x.size());
    DeviceDynamicTree::ChosenTree chosen;
    {
      auto timer = session.Time(Phase::kDraft);
      MULO_ASSIGN_OR_RETURN(chosen, proposer_->ProposeDynamicOnDevice(session, shape, max_depth));
    }
    const int64_t length = chosen.size();
    const int64_t root_row = target_->cache().length();
    TreeVerifyGraphs::Shape key;
    key.nodes = length;
    key.max_depth = chosen.max_depth;
    if (relaxed()) key.max_children = SiblingBound(shape);
    const TreeVerifyGraphs* graphs =
        session.reservation() != nullptr
            ? session.reservation()->TreeVerifyGraphsOf(*session.models().target,
                                                        Relaxed(std::move(key), session))
            : nullptr;
    if (graphs != nullptr &&
        target_->CanVerifyTree(*graphs, length, chosen.max_depth, session.sampling())) {
      // A queued verification waits while other requests' drafting replays rewrite the
      // graphs' outputs a borrowed `chosen` views.
      if (target_->queued()) chosen = chosen.Owned();
      return VerifyOnGraphs(session, *graphs, chosen, shape);
    }
    // The eager forward yields to the engine loop, whose other requests may replay the
    // drafting graphs (whose outputs a borrowed `chosen` views).
    chosen = chosen.Owned();
    ForwardOutput out;
    TreeDraft tree;
    Verdict verdict;
    {
      auto timer = session.Time(Phase::kVerify);
      const auto longs = chosen.tokens.options();
      // The root x_{n-1} at n - 1, node i at n - 1 + depth_i; each attends the prefix, the
      // root, its ancestors and itself.
      const torch::Tensor ids = torch::cat({torch::full({1}, x.back(), longs), chosen.tokens});
      const torch::Tensor positions = torch::constant_pad_nd(chosen.depths, {1, 0}, 0) + (n - 1);
      torch::Tensor mask =
          torch::constant_pad_nd(chosen.ancestors, {root_row + 1, 0, 1, 0}, 0);
      mask.narrow(1, 0, root_row + 1).fill_(true);
      MULO_ASSIGN_OR_RETURN(out, target_->FeedSetOnDevice(ids, positions, mask));
      ++stats.verify_steps;
      const VerifierRngs rngs = session.verifier_rngs();
      // Greedy relaxed verification pools the untempered distribution (the request's own is
      // one-hot at temperature 0), as the host step does.
      TreeCall call{relaxed() ? session.RankingProbabilities(out.logits)
                              : session.Probabilities(out.logits),
                    chosen.tokens, chosen.parents, torch::Tensor(), torch::Tensor(),
                    session.greedy(), chosen.max_depth, chosen.ancestors};
      if (!session.greedy()) {
        const ChainNumbers numbers =
            PeekChainNumbers(rngs, NumbersFor(length), session.device());
        call.accept_uniforms = numbers.accept;
        call.draw_uniform = numbers.draw;
      }
      torch::Tensor judged;
      if (relaxed()) {
        call.max_children = SiblingBound(shape);
        const LatentNeighbors& neighbours = *session.models().neighbors;
        judged = JudgeRelaxedTree(
            {call, neighbours.TableOn(session.device()), options_.relaxation.kind,
             options_.relaxation.k,
             torch::full({1}, RelaxationBound(),
                         torch::dtype(torch::kFloat64).device(session.device()))});
      } else {
        judged = JudgeTree(call);
      }
      // The step's one read: the tree's tokens and parents, then the verdict.
      MULO_ASSIGN_OR_RETURN(const std::vector<int64_t> host,
                            session.ReadIds(torch::cat({chosen.tokens, chosen.parents, judged})));
      MULO_RETURN_IF_ERROR(
          TakeVerdict(session, rngs, host, length, chosen.max_depth, &tree, &verdict));
    }
    return CommitPath(session, std::move(x), tree, PathFeatures(out.hidden, verdict), verdict,
                      shape);
  }

  // A tree's verification from one replay of the target pool's tree graphs: the tree
  // forward, p, the walk and the path's features, read once. `q`, `valid`: a static tree's
  // draws (undefined for a deterministic tree).
  Status VerifyOnGraphs(DecodeSession& session, const TreeVerifyGraphs& graphs,
                        const DeviceDynamicTree::ChosenTree& chosen,
                        const DynamicTreeOptions& shape, const torch::Tensor& q = {},
                        const torch::Tensor& valid = {}) {
    std::vector<int64_t> x = session.committed();
    const int64_t length = chosen.size();
    TreeDraft tree;
    Verdict verdict;
    torch::Tensor features;  // the path's rows of the verify graphs' output
    {
      auto timer = session.Time(Phase::kVerify);
      TreeVerifyGraphs::Call call;
      call.root_token = x.back();
      call.tokens = chosen.tokens;
      call.parents = chosen.parents;
      call.depths = chosen.depths;
      call.ancestors = chosen.ancestors;
      call.q = q;
      call.valid = valid;
      call.relaxation_bound = RelaxationBound();
      call.sampling = session.sampling();
      const VerifierRngs rngs = session.verifier_rngs();
      if (!session.greedy()) {
        const ChainNumbers numbers =
            PeekChainNumbers(rngs, NumbersFor(length), session.device());
        call.accept_uniforms = numbers.accept;
        call.draw_uniform = numbers.draw;
      }
      MULO_ASSIGN_OR_RETURN(TreeVerifyGraphs::Output out, target_->VerifyTree(graphs, call));
      ++session.stats().verify_steps;
      MULO_RETURN_IF_ERROR(
          TakeVerdict(session, rngs, out.host, length, chosen.max_depth, &tree, &verdict));
      features = out.path_features;
    }
    return CommitPath(session, std::move(x), tree, features, verdict, shape,
                      /*path_in_place=*/true);
  }

  // The step's one read (the tree's tokens and parents, then JudgeTree's or
  // JudgeRelaxedTree's values) as the tree and its verdict; the streams move by the numbers
  // the host walk would have drawn.
  Status TakeVerdict(DecodeSession& session, const VerifierRngs& rngs,
                     const std::vector<int64_t>& host, int64_t length, int64_t max_depth,
                     TreeDraft* tree, Verdict* verdict) const {
    tree->drafts.tokens.assign(host.begin(), host.begin() + length);
    tree->drafts.parents.assign(host.begin() + length, host.begin() + 2 * length);
    MULO_ASSIGN_OR_RETURN(tree->shape, TreeFromParents(tree->drafts.parents));
    const std::vector<int64_t> values(host.begin() + 2 * length, host.end());
    TreeDecision decision;
    if (relaxed()) {
      MULO_ASSIGN_OR_RETURN(RelaxedTreeDecision judged,
                            RelaxedTreeDecisionFromHost(values, length, max_depth));
      decision = std::move(judged.decision);
      verdict->relaxed = judged.relaxed;
      verdict->pooled_drafts = judged.pooled_drafts;
      verdict->pooled_neighbors = judged.pooled_neighbors;
    } else {
      MULO_ASSIGN_OR_RETURN(decision, TreeDecisionFromHost(values, length, max_depth));
    }
    if (!session.greedy()) {
      rngs.accept->Skip(static_cast<uint64_t>(decision.tries));
      rngs.draw->Skip(1);
    }
    verdict->accepted = std::move(decision.accepted);
    verdict->next_token = decision.next_token;
    return OkStatus();
  }

  // 4. The target keeps the root and the accepted path; the head gets their features.
  // `features` [batch, >= accepted + 1, dim]: the target features that predicted x_n,
  // x_n+1, ... (PathFeatures, or the verify graphs' path);
  // `path_in_place`: the target's cache already holds the accepted path right after the root
  // (the tree verify graphs move it).
  Status CommitPath(DecodeSession& session, std::vector<int64_t> x, const TreeDraft& tree,
                    const torch::Tensor& features, const Verdict& verdict,
                    const DynamicTreeOptions& shape, bool path_in_place = false) {
    Stats& stats = session.stats();
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t length = tree.drafts.size();
    const int64_t tree_depth =
        length > 0 ? *std::max_element(tree.shape.depths.begin(), tree.shape.depths.end()) : 0;
    stats.drafted_tree_depth += tree_depth;
    stats.drafted_tree_width += options_.static_tree ? 0 : shape.top_k;
    stats.drafted_tokens += length;
    const int64_t root_row = target_->cache().length() - (length + 1);
    const int64_t accepted = static_cast<int64_t>(verdict.accepted.size());
    std::vector<int64_t> rows(root_row + 1);
    for (int64_t r = 0; r <= root_row; ++r) rows[r] = r;
    for (int64_t node : verdict.accepted) {
      rows.push_back(path_in_place ? static_cast<int64_t>(rows.size()) : root_row + 1 + node);
      x.push_back(tree.drafts.tokens[node]);
    }
    MULO_RETURN_IF_ERROR(target_->Keep(rows, x));
    const bool room = static_cast<int64_t>(x.size()) < session.num_tokens();
    if (verdict.next_token >= 0 && room) x.push_back(verdict.next_token);
    const int64_t pushed = static_cast<int64_t>(x.size()) - n;
    proposer_->Push(std::vector<int64_t>(x.begin() + n, x.end()), features.narrow(1, 0, pushed));
    stats.CountAcceptedPath(accepted);
    stats.relaxed_accepted_tokens += verdict.relaxed_accepts();
    stats.pooled_drafts += verdict.pooled_drafts;
    stats.pooled_neighbors += verdict.pooled_neighbors;
    // The next token replaced rejected children (rather than extending a leaf).
    const int64_t last = accepted > 0 ? verdict.accepted.back() : -1;
    const bool redrawn =
        std::count(tree.drafts.parents.begin(), tree.drafts.parents.end(), last) > 0;
    stats.resampled_tokens += redrawn;
    session.commit_map().Path(n, accepted, verdict.RelaxedPlaces(), redrawn);
    if (shapes_ && tree_depth > 0) {  // alpha = accepted length / tree depth
      shapes_->Record(n, static_cast<int64_t>(x.size()) - n, shape,
                      static_cast<double>(accepted) / static_cast<double>(tree_depth));
    }
    session.Commit(std::move(x));
    return OkStatus();
  }

  ModelStream* target_;
  std::unique_ptr<EagleProposer> proposer_;
  TreeVerifier verifier_;
  EagleOptions options_;
  std::unique_ptr<PeanutShapes> shapes_;  // PEANUT only
};

}  // namespace

Status ValidateEagleOptions(const EagleOptions& options, const std::string& prefix) {
  const DynamicTreeOptions& d = options.dynamic;
  auto in = [&](const char* name, int64_t value, int64_t max) -> Status {
    if (value >= 1 && value <= max) return OkStatus();
    return InvalidArgumentError(prefix + "." + name + ": must be in [1, " +
                                std::to_string(max) + "]");
  };
  MULO_RETURN_IF_ERROR(in("total_tokens", d.total_tokens, kMaxTreeTokens));
  MULO_RETURN_IF_ERROR(in("depth", d.depth, kMaxTreeDepth));
  MULO_RETURN_IF_ERROR(in("top_k", d.top_k, kMaxTreeTopK));
  return OkStatus();
}

Status EagleDecoder::Validate(const ModelSet& models) const {
  if (models.target == nullptr || models.eagle == nullptr) {
    return FailedPreconditionError(name() + ": the model family has no EAGLE head");
  }
  if (options_.relaxation.kind != Pooling::kNone && models.neighbors == nullptr) {
    return FailedPreconditionError(name() + ": the model family has no latent neighbour table");
  }
  return ValidateEagleOptions(options_);
}

StatusOr<std::unique_ptr<SteppedMethod::State>> EagleDecoder::Begin(DecodeSession& session) const {
  const ModelSet& models = session.models();
  MULO_ASSIGN_OR_RETURN(ModelStream * target, session.Open(*models.target, StreamRole::kTarget));
  // Token 0 comes straight from the target's prefill, as in AR; its feature starts the head.
  session.Append(session.Draw(target->next_logits(), RngStream::kTarget));
  int64_t top_k = options_.dynamic.top_k, depth = options_.dynamic.depth;
  std::unique_ptr<PeanutShapes> shapes;
  if (options_.peanut) {
    top_k = std::max(top_k, options_.peanut->max_top_k);
    depth = std::max(depth, options_.peanut->max_depth);
    shapes = std::make_unique<PeanutShapes>(*options_.peanut, options_.dynamic,
                                            session.grid(), session.sampling().seed);
  }
  const int64_t tree_rows = std::max<int64_t>(64, top_k * (depth + 1));
  auto proposer = std::make_unique<EagleProposer>(
      *models.eagle, *models.target,
      session.NewCache(*models.eagle, target->cache().batch(), session.num_tokens() + tree_rows));
  proposer->Push({session.committed().back()}, target->next_hidden().unsqueeze(1));
  return std::unique_ptr<State>(
      std::make_unique<EagleState>(target, std::move(proposer), options_, models.neighbors,
                                   std::move(shapes)));
}

}  // namespace mulo::engine
