#include "engine/decode/kv_pools.h"

#include <algorithm>
#include <functional>

#include "engine/decode/draft_tree.h"
#include "engine/decode/dynamic_tree.h"
#include "engine/decode/eagle_tree_graphs.h"
#include "engine/decode/pac_tree.h"
#include "engine/decode/zipar_chain_rows.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/row_graphs.h"
#include "engine/model/verify_graphs.h"

namespace mulo::engine {
namespace {

// Prompt-id conditions (Janus-Pro) may be as long as the language model's context, which no
// prompt comes near: slots hold this many condition rows, and a longer prompt's cache
// overflows into memory of its own (kv_pool.h).
constexpr int64_t kPooledConditionRows = 512;

struct PoolPlan {
  std::string component;
  const void* model;
  KvCache prototype;
  int64_t slot_rows;
  // Captures the model's batched graphs over its pool (null: the model runs without graphs).
  std::function<StatusOr<std::shared_ptr<PoolGraphs>>(const KvPool&)> capture_graphs;
  // Captures its graphs of whole decode steps (row_graphs.h: the target's ar rows, the chain
  // drafter's chains; verify_graphs.h: the target's verifications of speculative's chains and
  // SJD's windows); none when null / empty.
  std::function<StatusOr<std::shared_ptr<RowGraphs>>(const KvPool&)> capture_rows = nullptr;
  std::vector<std::function<StatusOr<std::shared_ptr<VerifyGraphs>>(const KvPool&)>>
      capture_verify = {};
  // The head's graphs of EAGLE's whole drafting step (eagle_tree_graphs.h), one set per
  // tree depth (and, for the static tree, per draw); none when empty.
  std::vector<std::function<StatusOr<std::shared_ptr<EagleTreeGraphs>>(const KvPool&)>>
      capture_trees = {};
  // The target's graphs verifying those trees (tree_verify_graphs.h), one set per shape.
  std::vector<std::function<StatusOr<std::shared_ptr<TreeVerifyGraphs>>(const KvPool&)>>
      capture_tree_verify = {};
  // The target's graphs of MuLo-SD's verification (mulo_verify_graphs.h); none when null.
  std::function<StatusOr<std::shared_ptr<MuloVerifyGraphs>>(const KvPool&)> capture_mulo_verify =
      nullptr;
  // The graphs of ZipAR's forwards over the pool (zipar_graphs.h: ZipAR's target, MuLo-SD's
  // drafter); none when null.
  std::function<StatusOr<std::shared_ptr<ZipArGraphs>>(const KvPool&)> capture_zipar = nullptr;
};

// Rows a slot holds: a request's longest cache and the draft rows after it, in whole graph
// spans when graphs read the slots (a graph attends over whole spans).
int64_t SlotRows(int64_t cache_rows, bool graphs) {
  const int64_t rows = cache_rows + KvPools::kDraftRows;
  return graphs ? ForwardGraphs::RoundUpToSpan(rows) : rows;
}

// The EAGLE-2 trees the family's requests draft by default (family.json's method_defaults, else
// EagleOptions'), and the same cut to every shorter depth (the last steps of an image): what
// the tree graphs are captured for.
std::vector<DynamicTreeOptions> FamilyTrees(const DynamicTreeOptions& full) {
  std::vector<DynamicTreeOptions> trees;
  for (int64_t depth = 0; depth <= full.depth; ++depth) {
    trees.push_back({full.total_tokens, depth, full.top_k});
  }
  return trees;
}

// PEANUT's trees that padded drafting graphs grow (eagle_tree_graphs.h), as those graphs'
// keys: the depth, the width rounded up to a multiple of kPaddedWidthStep (within the
// vocabulary) and the nodes chosen; none for the family's own trees (graphs of their own).
// Multiples of 8 rather than powers of two: a frontier's pad nodes take head cache rows and
// compute, and PEANUT's widths at depth 1 reach total_tokens (a width of 34 pads to 40, not
// 64: the deep trees' rows then fit the head slot's spans). The default family's
// PEANUT trees take 99 keys (PeanutShapes::Reachable: 308 trees).
constexpr int64_t kPaddedWidthStep = 8;

std::vector<DynamicTreeOptions> PaddedPeanutTrees(const KvPools::GraphedShapes& shapes,
                                                  int64_t vocab) {
  const std::vector<DynamicTreeOptions> own = FamilyTrees(shapes.eagle_tree);
  std::vector<DynamicTreeOptions> padded;
  for (const DynamicTreeOptions& tree : shapes.peanut_trees) {
    const bool exact = std::any_of(own.begin(), own.end(), [&](const DynamicTreeOptions& o) {
      return o.total_tokens == tree.total_tokens && o.depth == tree.depth && o.top_k == tree.top_k;
    });
    const int64_t width = std::min(
        vocab, (tree.top_k + kPaddedWidthStep - 1) / kPaddedWidthStep * kPaddedWidthStep);
    if (exact || tree.top_k > vocab) continue;
    const DynamicTreeOptions key{ChosenNodes(tree, vocab), tree.depth, width};
    const bool known = std::any_of(padded.begin(), padded.end(), [&](const DynamicTreeOptions& o) {
      return o.total_tokens == key.total_tokens && o.depth == key.depth && o.top_k == key.top_k;
    });
    if (!known) padded.push_back(key);
  }
  return padded;
}

// The depths EAGLE-1's static tree is drafted at: the whole tree and each cut (the last steps
// of an image).
int64_t StaticTreeDepth() { return StaticTree57().max_depth(); }

// The verify graphs' shape of the static tree cut to `depth` levels.
TreeVerifyGraphs::Shape StaticVerifyShape(int64_t depth) {
  const TreeShape tree = StaticTree57Cut(depth);
  int64_t widest = 0;
  for (int64_t node = -1; node < tree.size(); ++node) {
    widest = std::max<int64_t>(widest, tree.Children(node).size());
  }
  TreeVerifyGraphs::Shape shape;
  shape.nodes = tree.size();
  shape.max_depth = depth;
  shape.max_children = widest;
  shape.parents = tree.parents;
  return shape;
}

// The verify graphs' shape of EAGLE-2's dynamic tree `tree` (its size: min(total_tokens, the
// nodes recorded)).
TreeVerifyGraphs::Shape DynamicVerifyShape(const DynamicTreeOptions& tree, int64_t vocab) {
  TreeVerifyGraphs::Shape shape;
  shape.nodes = ChosenNodes(tree, vocab);
  shape.max_depth = tree.depth + 1;
  return shape;
}

// The same shape judged with a relaxation (LANTERN on the dynamic trees, LANTERN++ on the
// static ones), for greedy or sampled requests.
TreeVerifyGraphs::Shape Relaxed(TreeVerifyGraphs::Shape shape, Pooling kind, int64_t k,
                                int64_t sibling_bound, bool greedy) {
  shape.relaxation = kind;
  shape.k = k;
  shape.greedy = greedy;
  if (!shape.drawn()) shape.max_children = sibling_bound;
  return shape;
}

// Every tree the head's graphs draft, verified and judged in one replay: EAGLE-2's dynamic
// trees and EAGLE-1's static ones (drawn with q) at every depth; with the family's latent
// neighbours (`relaxed`), the same judged by LANTERN's (additive, dynamic trees) and
// LANTERN++'s (multiplicative, static trees) relaxations at the family's k, greedy and sampled
// apart; and PEANUT's trees, judged by the lossless rule (its LANTERN combination is off by
// default), each key once.
std::vector<TreeVerifyGraphs::Shape> TreeVerifyShapes(const KvPools::GraphedShapes& shapes,
                                                      int64_t vocab, bool relaxed) {
  std::vector<TreeVerifyGraphs::Shape> verify_shapes;
  const std::vector<DynamicTreeOptions> trees = FamilyTrees(shapes.eagle_tree);
  for (const DynamicTreeOptions& tree : trees) {
    verify_shapes.push_back(DynamicVerifyShape(tree, vocab));
  }
  for (int64_t depth = 1; depth <= StaticTreeDepth(); ++depth) {
    verify_shapes.push_back(StaticVerifyShape(depth));
  }
  if (relaxed) {
    const int64_t lantern_k = shapes.lantern_k, plus_k = shapes.lantern_plus_plus_k;
    const int64_t siblings = trees.back().top_k;  // the dynamic trees' bound
    const size_t lossless = verify_shapes.size();
    for (bool greedy : {false, true}) {
      for (size_t i = 0; i < lossless; ++i) {
        const bool drawn = verify_shapes[i].drawn();
        verify_shapes.push_back(Relaxed(verify_shapes[i],
                                        drawn ? Pooling::kMultiplicative : Pooling::kAdditive,
                                        drawn ? plus_k : lantern_k, siblings, greedy));
      }
    }
  }
  for (const DynamicTreeOptions& tree : shapes.peanut_trees) {
    const TreeVerifyGraphs::Shape shape = DynamicVerifyShape(tree, vocab);
    const bool known =
        std::any_of(verify_shapes.begin(), verify_shapes.end(),
                    [&](const TreeVerifyGraphs::Shape& s) { return s.SameKey(shape); });
    if (!known) verify_shapes.push_back(shape);
  }
  // Sampled requests that filter by top-k or top-p (LlamaGen's published settings) too.
  for (TreeVerifyGraphs::Shape& shape : verify_shapes) shape.filters = true;
  return verify_shapes;
}

// The rows before raster token 0 of the longest condition a pool's slots for `model` hold.
int64_t PrefixRows(const TokenModel& model) {
  const int64_t condition = std::min<int64_t>(model.condition_shape().rows, kPooledConditionRows);
  return model.CacheRows(condition) - model.num_image_tokens();
}

// ZipAR's forwards and draws in one replay over `model`'s pool (ZipAR's target, MuLo-SD's
// drafter), for any window; with `chain_rows` > 0, also the chains of a drafter completing
// that many rows per step (zipar_chain_rows.h).
std::function<StatusOr<std::shared_ptr<ZipArGraphs>>(const KvPool&)> ZipArCapture(
    const TokenModel* model, const std::optional<RowGraphs::Model>& steps, int64_t chain_rows = 0) {
  return [steps, model, chain_rows](const KvPool& pool) {
    const int64_t grid = model->grid_size();
    return ZipArGraphs::Capture(pool, grid, *steps, /*filters=*/true,
                                ZipArChainRows(grid, chain_rows));
  };
}

// The target's step graphs (`steps` set): ar's rows, the chains' and Jacobi windows'
// verifications, the trees', MuLo-SD's and ZipAR's. `chain`: whether the family has
// speculative's chain drafter (whose chains the target's graphs then verify).
void PlanTargetSteps(const TokenModel* model, const ModelSet& models,
                     const KvPools::GraphedShapes& shapes, bool chain,
                     const std::optional<RowGraphs::Model>& steps, PoolPlan& plan) {
  const int64_t gamma = shapes.chain;
  // A row of the image's grid per replay (ar); the chain methods' graphs also in a copy
  // that filters by top-k and top-p, the published settings of LlamaGen and SJD.
  plan.capture_rows = [steps, model](const KvPool& pool) {
    return RowGraphs::Capture(
        pool, {model->grid_size(), /*drafts=*/false, /*read=*/true, /*filters=*/true}, *steps);
  };
  if (chain) {
    plan.capture_verify.push_back([steps, gamma](const KvPool& pool) {
      return VerifyGraphs::Capture(
          pool, {gamma, /*redraw=*/false, /*group_size=*/0, /*couple=*/false, /*filters=*/true},
          *steps);
    });
  }
  // The Jacobi methods' windows (the target alone: every family): SJD's, GSD's with its
  // groups, MC-SJD's re-drawn by the coupling.
  const VerifyGraphs::Shape sjd{shapes.sjd_window, /*redraw=*/true, /*group_size=*/0,
                                /*couple=*/false, /*filters=*/true};
  const VerifyGraphs::Shape gsd{shapes.gsd_window, /*redraw=*/true, shapes.gsd_group,
                                /*couple=*/false, /*filters=*/true};
  const VerifyGraphs::Shape mc_sjd{shapes.mc_sjd_window, /*redraw=*/true,
                                   /*group_size=*/0, /*couple=*/true, /*filters=*/true};
  if (models.eagle != nullptr && models.eagle->uses_cuda_graphs()) {
    const bool neighbours =
        models.neighbors != nullptr && models.neighbors->codebook_size() == steps->vocab;
    const torch::Tensor table =
        neighbours ? models.neighbors->TableOn(steps->options.device()) : torch::Tensor();
    for (const TreeVerifyGraphs::Shape& shape :
         TreeVerifyShapes(shapes, steps->vocab, neighbours)) {
      plan.capture_tree_verify.push_back([steps, shape, table](const KvPool& pool) {
        return TreeVerifyGraphs::Capture(pool, shape, *steps,
                                         shape.relaxed() ? table : torch::Tensor());
      });
    }
  }
  // SJD-PAC's window: its tree verified and the next window drafted in one replay.
  if (shapes.sjd_pac_window > 0) {
    TreeVerifyGraphs::Shape pac =
        PacVerifyShape(shapes.sjd_pac_window, shapes.sjd_pac_width, shapes.sjd_pac_depth);
    pac.filters = true;
    plan.capture_tree_verify.push_back(
        [steps, pac](const KvPool& pool) { return TreeVerifyGraphs::Capture(pool, pac, *steps); });
  }
  // MuLo-SD's U_r, verification, expansion and re-draws in one replay, for the family's
  // defaults (step graphs, which draft too, are captured once the drafter's pool is made);
  // where the defaults draft in the step, also for the steps that cannot (a ZipAR
  // drafter, a prefix to re-feed), which then draft apart and up-sample and verify here.
  const std::optional<MuloVerifyGraphs::Shape>& mulo = shapes.mulo_verify;
  if (mulo && models.neighbors != nullptr && models.neighbors->codebook_size() == steps->vocab &&
      models.upsampler != nullptr && models.drafter != nullptr) {
    const LatentNeighbors* neighbors = models.neighbors.get();
    MuloVerifyGraphs::Shape verify = *mulo;
    verify.draft = false;
    verify.upsample = true;
    MuloVerifyGraphs::Drafting upsampling;
    upsampling.upsampler = models.upsampler;
    upsampling.grid = models.drafter->grid_size();
    upsampling.target_prefix_rows = PrefixRows(*models.target);
    plan.capture_mulo_verify = [steps, verify, neighbors, upsampling](const KvPool& pool) {
      return MuloVerifyGraphs::Capture(pool, verify, *steps, neighbors, upsampling);
    };
  }
  plan.capture_zipar = ZipArCapture(model, steps);
  for (const VerifyGraphs::Shape& shape : {sjd, gsd, mc_sjd}) {
    plan.capture_verify.push_back([steps, shape, model](const KvPool& pool) {
      return VerifyGraphs::Capture(
          pool, shape, *steps,
          shape.group_size > 1 ? model->token_embedding_weight() : torch::Tensor());
    });
  }
}

// `chain`: as PlanTargetSteps'.
void PlanModel(const std::string& component, const TokenModel* model, const ModelSet& models,
               const KvPools::GraphedShapes& shapes, bool chain, std::vector<PoolPlan>& plans) {
  if (model == nullptr) return;
  const int64_t condition_rows =
      std::min<int64_t>(model->condition_shape().rows, kPooledConditionRows);
  const bool graphs = model->uses_cuda_graphs();
  PoolPlan plan{component, model, model->NewCache(1, 1),
                SlotRows(model->CacheRows(condition_rows), graphs), nullptr};
  if (graphs) {
    plan.capture_graphs = [model](const KvPool& pool) { return model->CapturePoolGraphs(pool); };
    const std::optional<RowGraphs::Model> steps = model->StepGraphModel();
    const int64_t gamma = shapes.chain;
    if (steps && component == "target") PlanTargetSteps(model, models, shapes, chain, steps, plan);
    if (steps && component == "drafter") {
      // MuLo-SD's drafter rows (its default count of whole low-resolution rows per step),
      // drawn and fed in one replay and left on the device for its up-sampler.
      const int64_t tokens = model->grid_size() * shapes.mulo_draft_rows;
      plan.capture_rows = [steps, tokens](const KvPool& pool) {
        return RowGraphs::Capture(
            pool, {tokens, /*drafts=*/false, /*read=*/false, /*filters=*/true}, *steps);
      };
      // MuLo-SD x ZipAR: a step's wavefront forwards and their draws in one replay, for any
      // mulo.zipar_window (one set serves every window, as the target's), for steps of the
      // family's default rows.
      if (models.upsampler != nullptr) {
        plan.capture_zipar = ZipArCapture(model, steps, shapes.mulo_draft_rows);
      }
    }
    if (steps && component == "chain") {
      plan.capture_rows = [steps, gamma](const KvPool& pool) {
        return RowGraphs::Capture(
            pool, {gamma, /*drafts=*/true, /*read=*/true, /*filters=*/true}, *steps);
      };
    }
  }
  plans.push_back(std::move(plan));
}

std::vector<PoolPlan> Plan(const ModelSet& models, const KvPools::GraphedShapes& shapes) {
  std::vector<PoolPlan> plans;
  const bool chain = models.chain != nullptr;
  PlanModel("target", models.target.get(), models, shapes, chain, plans);
  PlanModel("drafter", models.drafter.get(), models, shapes, chain, plans);
  PlanModel("chain", models.chain.get(), models, shapes, chain, plans);
  if (models.eagle != nullptr && models.target != nullptr) {
    // The head's cache holds the image's tokens and the draft tree's rows.
    const EagleHead* head = models.eagle.get();
    const bool graphs = head->uses_cuda_graphs();
    PoolPlan plan{"eagle", head, head->NewCache(1, 1),
                  SlotRows(models.target->num_image_tokens(), graphs), nullptr};
    if (graphs) {
      plan.capture_graphs = [head](const KvPool& pool) { return head->CapturePoolGraphs(pool); };
      const std::optional<RowGraphs::Model> steps = models.target->StepGraphModel();
      if (steps) {
        // EAGLE-2's drafting (the catch-up, the tree's expansions and its choice) in one replay,
        // for the family's default tree.
        const std::vector<DynamicTreeOptions> trees = FamilyTrees(shapes.eagle_tree);
        // A step feeds the pairs the step before committed (its depth and the next token),
        // whichever tree it drafted (PEANUT's change from step to step).
        int64_t deepest = trees.back().depth;
        for (const DynamicTreeOptions& tree : shapes.peanut_trees) {
          deepest = std::max(deepest, tree.depth);
        }
        const int64_t max_pairs = deepest + 2;
        const TokenModel* target = models.target.get();
        EagleTreeGraphs::Model model{head->SlotForward(), steps->embed,
                                     [target](const torch::Tensor& hidden) {
                                       return target->HeadLogits(hidden);
                                     },
                                     steps->dim,
                                     steps->vocab,
                                     steps->options,
                                     steps->emulated};
        for (const DynamicTreeOptions& tree : trees) {
          plan.capture_trees.push_back([model, tree, max_pairs](const KvPool& pool) {
            return EagleTreeGraphs::Capture(pool, tree, max_pairs, model, /*filters=*/true);
          });
        }
        for (const DynamicTreeOptions& tree : PaddedPeanutTrees(shapes, steps->vocab)) {
          plan.capture_trees.push_back([model, tree, max_pairs](const KvPool& pool) {
            return EagleTreeGraphs::CapturePadded(pool, tree, max_pairs, model, /*filters=*/true);
          });
        }
        // EAGLE-1's: the static tree at every depth, greedy and sampled draws apart (filtered
        // copies for the sampled). A step commits at most the tree's depth and the next token.
        const int64_t static_pairs = StaticTreeDepth() + 2;
        for (int64_t depth = 1; depth <= StaticTreeDepth(); ++depth) {
          for (bool greedy : {false, true}) {
            const EagleTreeGraphs::StaticTree tree{depth, greedy};
            plan.capture_trees.push_back([model, tree, static_pairs](const KvPool& pool) {
              return EagleTreeGraphs::CaptureStatic(pool, tree, static_pairs, model,
                                                    /*filters=*/true);
            });
          }
        }
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace

std::optional<KvCache> KvReservation::Take(const void* model, int64_t batch) {
  for (Run& run : runs_) {
    if (run.model != model || run.taken || run.slots->count() < batch) continue;
    run.taken = true;
    return run.pool->CacheOver(run.slots, batch);
  }
  ++unreserved_;
  return std::nullopt;
}

StatusOr<std::unique_ptr<KvPools>> KvPools::Make(const std::vector<Family>& families,
                                                 int64_t requests) {
  auto pools = std::make_unique<KvPools>();
  for (const Family& family : families) {
    for (PoolPlan& plan : Plan(*family.models, family.shapes)) {
      const bool graphs = plan.capture_graphs != nullptr;
      MULO_ASSIGN_OR_RETURN(std::shared_ptr<KvPool> pool,
                            KvPool::Make(plan.prototype, 2 * requests, plan.slot_rows, graphs));
      if (graphs) {
        MULO_ASSIGN_OR_RETURN(std::shared_ptr<PoolGraphs> captured, plan.capture_graphs(*pool));
        pool->SetGraphs(std::move(captured));
      }
      if (graphs && plan.capture_rows != nullptr) {
        MULO_ASSIGN_OR_RETURN(std::shared_ptr<RowGraphs> rows, plan.capture_rows(*pool));
        pool->SetRowGraphs(std::move(rows));
      }
      for (const auto& capture_verify : plan.capture_verify) {
        MULO_ASSIGN_OR_RETURN(std::shared_ptr<VerifyGraphs> verify, capture_verify(*pool));
        pool->AddVerifyGraphs(std::move(verify));
      }
      for (const auto& capture_tree_verify : plan.capture_tree_verify) {
        MULO_ASSIGN_OR_RETURN(std::shared_ptr<TreeVerifyGraphs> verify,
                              capture_tree_verify(*pool));
        pools->tree_verify_graphs_.push_back(std::move(verify));
      }
      if (plan.capture_zipar != nullptr) {
        MULO_ASSIGN_OR_RETURN(std::shared_ptr<ZipArGraphs> zipar, plan.capture_zipar(*pool));
        pools->zipar_graphs_.push_back(std::move(zipar));
      }
      if (plan.capture_mulo_verify != nullptr) {
        MULO_ASSIGN_OR_RETURN(std::shared_ptr<MuloVerifyGraphs> verify,
                              plan.capture_mulo_verify(*pool));
        pools->mulo_verify_graphs_.push_back(std::move(verify));
      }
      for (const auto& capture_tree : plan.capture_trees) {
        MULO_ASSIGN_OR_RETURN(std::shared_ptr<EagleTreeGraphs> tree, capture_tree(*pool));
        pools->tree_graphs_.push_back(std::move(tree));
      }
      pools->Add(family.name, plan.component, plan.model, std::move(pool));
    }
    // MuLo-SD's U_r on the drafter's grid (its every row count), where the target replays
    // graphs: one replay per step instead of the up-sampler's operators.
    const ModelSet& models = *family.models;
    const std::optional<RowGraphs::Model> steps =
        models.target != nullptr && models.target->uses_cuda_graphs()
            ? models.target->StepGraphModel()
            : std::nullopt;
    if (steps && models.upsampler != nullptr && models.drafter != nullptr) {
      const int64_t grid = models.drafter->grid_size();
      MULO_ASSIGN_OR_RETURN(
          std::shared_ptr<ResamplerGraphs> graphs,
          ResamplerGraphs::Capture(models.upsampler, grid, grid, requests,
                                   steps->options.device(), steps->emulated));
      pools->resampler_graphs_.push_back(std::move(graphs));
    }
    MULO_RETURN_IF_ERROR(pools->CaptureMuloStepGraphs(family, steps));
  }
  return pools;
}

Status KvPools::CaptureMuloStepGraphs(const Family& family,
                                      const std::optional<RowGraphs::Model>& target_steps) {
  const ModelSet& models = *family.models;
  const std::optional<MuloVerifyGraphs::Shape>& shape = family.shapes.mulo_verify;
  if (!target_steps || !shape || !shape->draft || models.drafter == nullptr ||
      models.upsampler == nullptr || !models.drafter->uses_cuda_graphs() ||
      models.neighbors == nullptr || models.neighbors->codebook_size() != target_steps->vocab) {
    return OkStatus();
  }
  const Entry* target = Find(models.target.get());
  const Entry* drafter = Find(models.drafter.get());
  const std::optional<RowGraphs::Model> drafter_steps = models.drafter->StepGraphModel();
  if (target == nullptr || drafter == nullptr || !drafter_steps) return OkStatus();
  MuloVerifyGraphs::Drafting drafting{drafter->pool.get(),        *drafter_steps,
                                      models.upsampler,           models.drafter->grid_size(),
                                      PrefixRows(*models.target), PrefixRows(*models.drafter)};
  MULO_ASSIGN_OR_RETURN(std::shared_ptr<MuloVerifyGraphs> graphs,
                        MuloVerifyGraphs::Capture(*target->pool, *shape, *target_steps,
                                                  models.neighbors.get(), std::move(drafting)));
  mulo_verify_graphs_.push_back(std::move(graphs));
  return OkStatus();
}

int64_t KvPools::RequestBytes(const std::vector<Family>& families) {
  int64_t bytes = 0;
  for (const Family& family : families) {
    for (const PoolPlan& plan : Plan(*family.models, family.shapes)) {
      bytes += 2 * KvPool::SlotBytes(plan.prototype, plan.slot_rows);
    }
  }
  return bytes;
}

void KvPools::Add(std::string family, std::string component, const void* model,
                  std::shared_ptr<KvPool> pool) {
  pools_.push_back({std::move(family), std::move(component), model, std::move(pool)});
}

const KvPools::Entry* KvPools::Find(const void* model) const {
  for (const Entry& entry : pools_) {
    if (entry.model == model) return &entry;
  }
  return nullptr;
}

bool KvPools::CanReserve(const KvDemand& demand) const {
  for (const KvDemand::Need& need : demand.needs) {
    const Entry* entry = Find(need.model);
    if (entry != nullptr && !entry->pool->CanTake(need.streams)) return false;
  }
  return true;
}

std::unique_ptr<KvReservation> KvPools::Reserve(const KvDemand& demand) {
  auto reservation = std::make_unique<KvReservation>();
  reservation->pools_ = this;
  for (const KvDemand::Need& need : demand.needs) {
    const Entry* entry = Find(need.model);
    if (entry == nullptr) continue;
    std::shared_ptr<KvSlots> slots = entry->pool->Take(need.streams);
    if (slots == nullptr) return nullptr;  // the runs taken so far return with `reservation`
    reservation->runs_.push_back({need.model, entry->pool.get(), std::move(slots)});
  }
  return reservation;
}

std::vector<KvPools::Usage> KvPools::usage() const {
  std::vector<Usage> out;
  for (const Entry& entry : pools_) {
    // The pool's forward graphs and its graphs of whole steps, together.
    PoolGraphs::Counts graphs;
    if (entry.pool->graphs() != nullptr) graphs.Add(entry.pool->graphs()->counts());
    if (entry.pool->row_graphs() != nullptr) graphs.Add(entry.pool->row_graphs()->counts());
    for (const auto& verify : entry.pool->verify_graphs()) graphs.Add(verify->counts());
    for (const auto& tree : tree_graphs_) {
      if (&tree->pool() == entry.pool.get()) graphs.Add(tree->counts());
    }
    for (const auto& verify : tree_verify_graphs_) {
      if (&verify->pool() == entry.pool.get()) graphs.Add(verify->counts());
    }
    for (const auto& verify : mulo_verify_graphs_) {
      if (&verify->pool() == entry.pool.get()) graphs.Add(verify->counts());
    }
    for (const auto& zipar : zipar_graphs_) {
      if (&zipar->pool() == entry.pool.get()) graphs.Add(zipar->counts());
    }
    out.push_back({entry.family, entry.component, entry.pool->slots(), entry.pool->used_slots(),
                   entry.pool->slot_rows(), entry.pool->MemoryBytes(), entry.pool->overflows(),
                   graphs});
  }
  return out;
}

PoolGraphs::Counts KvPools::graph_counts() const {
  PoolGraphs::Counts total;
  for (const Usage& pool : usage()) total.Add(pool.graphs);
  for (const auto& graphs : resampler_graphs_) total.Add(graphs->counts());
  return total;
}

const ResamplerGraphs* KvPools::resampler_graphs(const Resampler& resampler) const {
  for (const auto& graphs : resampler_graphs_) {
    if (&graphs->resampler() == &resampler) return graphs.get();
  }
  return nullptr;
}

const ResamplerGraphs* KvReservation::GraphsOf(const Resampler& resampler) const {
  return pools_ != nullptr ? pools_->resampler_graphs(resampler) : nullptr;
}

const EagleTreeGraphs* KvPools::tree_graphs(const EagleHead& head,
                                            const DynamicTreeOptions& tree) const {
  const Entry* entry = Find(&head);
  if (entry == nullptr) return nullptr;
  // The tree's own graphs, else the narrowest padded ones that grow it.
  const EagleTreeGraphs* padded = nullptr;
  for (const auto& graphs : tree_graphs_) {
    if (&graphs->pool() != entry->pool.get() || !graphs->Grows(tree)) continue;
    if (!graphs->padded()) return graphs.get();
    if (padded == nullptr || graphs->tree().top_k < padded->tree().top_k) padded = graphs.get();
  }
  return padded;
}

const EagleTreeGraphs* KvReservation::TreeGraphsOf(const EagleHead& head,
                                                   const DynamicTreeOptions& tree) const {
  return pools_ != nullptr ? pools_->tree_graphs(head, tree) : nullptr;
}

const EagleTreeGraphs* KvPools::static_tree_graphs(const EagleHead& head, int64_t depth,
                                                   bool greedy) const {
  const Entry* entry = Find(&head);
  if (entry == nullptr) return nullptr;
  for (const auto& graphs : tree_graphs_) {
    const auto& own = graphs->static_tree();
    if (&graphs->pool() == entry->pool.get() && own && own->depth == depth &&
        own->greedy == greedy) {
      return graphs.get();
    }
  }
  return nullptr;
}

const EagleTreeGraphs* KvReservation::StaticTreeGraphsOf(const EagleHead& head, int64_t depth,
                                                         bool greedy) const {
  return pools_ != nullptr ? pools_->static_tree_graphs(head, depth, greedy) : nullptr;
}

const TreeVerifyGraphs* KvPools::tree_verify_graphs(const TokenModel& target,
                                                    const TreeVerifyGraphs::Shape& key) const {
  const Entry* entry = Find(&target);
  if (entry == nullptr) return nullptr;
  for (const auto& graphs : tree_verify_graphs_) {
    if (&graphs->pool() == entry->pool.get() && graphs->shape().SameKey(key)) {
      return graphs.get();
    }
  }
  return nullptr;
}

const TreeVerifyGraphs* KvReservation::TreeVerifyGraphsOf(
    const TokenModel& target, const TreeVerifyGraphs::Shape& key) const {
  return pools_ != nullptr ? pools_->tree_verify_graphs(target, key) : nullptr;
}

const MuloVerifyGraphs* KvPools::mulo_verify_graphs(const TokenModel& target,
                                                    const MuloVerifyGraphs::Shape& shape) const {
  const Entry* entry = Find(&target);
  if (entry == nullptr) return nullptr;
  for (const auto& graphs : mulo_verify_graphs_) {
    if (&graphs->pool() == entry->pool.get() && graphs->shape() == shape) return graphs.get();
  }
  return nullptr;
}

const MuloVerifyGraphs* KvReservation::MuloVerifyGraphsOf(
    const TokenModel& target, const MuloVerifyGraphs::Shape& shape) const {
  return pools_ != nullptr ? pools_->mulo_verify_graphs(target, shape) : nullptr;
}

const ZipArGraphs* KvPools::zipar_graphs(const TokenModel& model) const {
  const Entry* entry = Find(&model);
  if (entry == nullptr) return nullptr;
  for (const auto& graphs : zipar_graphs_) {
    if (&graphs->pool() == entry->pool.get()) return graphs.get();
  }
  return nullptr;
}

const ZipArGraphs* KvReservation::ZipArGraphsOf(const TokenModel& model) const {
  return pools_ != nullptr ? pools_->zipar_graphs(model) : nullptr;
}

int64_t KvPools::MemoryBytes() const {
  int64_t bytes = 0;
  for (const Entry& entry : pools_) bytes += entry.pool->MemoryBytes();
  return bytes;
}

}  // namespace mulo::engine
