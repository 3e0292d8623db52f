// The KV-cache pools of one worker and what a request reserves of them.
//
// A worker has one pool (kv_pool.h) per model that holds caches, for every family it serves:
// the target, the MuLo-SD drafter, the speculative chain drafter and the EAGLE head. They are
// allocated at load, sized in requests: each pool has two slots (a request's two guidance
// streams) per request. When the models run from CUDA graphs, each pool's batched graphs are
// captured at load too (pool_graphs.h), with its graphs of whole steps (row_graphs.h,
// verify_graphs.h) and, beside the pools, the graphs of each family's up-sampler (MuLo-SD's
// U_r, resampler_graphs.h), which a request finds through its reservation. A request reserves, before it starts, the slots the
// most it can open needs (its target's guidance streams, two for each drafting model its
// method needs); its session takes its caches from the reservation, and the slots return
// when it ends. The server admits a request only when its reservation fits
// (server/scheduler.h): memory, not a count of requests, is what admission runs out of.
//
// A family's Tar MLLM stage (a text stage decoded before the image) keeps caches of its own.
#ifndef MULO_ENGINE_DECODE_KV_POOLS_H_
#define MULO_ENGINE_DECODE_KV_POOLS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/dynamic_tree.h"
#include "engine/decode/mulo_verify_graphs.h"
#include "engine/decode/zipar_graphs.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model_set.h"
#include "engine/model/pool_graphs.h"
#include "engine/model/resampler_graphs.h"
#include "engine/model/tree_verify_graphs.h"

namespace mulo::engine {

// The slots a request may take: streams per model (TokenModel or EagleHead, by address);
// RequestKvDemand (kv_demand.h) says what a request's method opens.
struct KvDemand {
  struct Need {
    const void* model = nullptr;
    int64_t streams = 0;
  };
  std::vector<Need> needs;
};

class KvPools;
class EagleTreeGraphs;  // eagle_tree_graphs.h

// One request's reserved slots; its caches are taken from them.
class KvReservation {
 public:
  // A cache of `batch` streams of `model` over the slots reserved for it (each model's once),
  // or nullopt when there are none or fewer than `batch`: the caller makes a cache of its own,
  // counted in unreserved().
  std::optional<KvCache> Take(const void* model, int64_t batch);
  // Caches the request made outside its reservation (a test checks every method makes none).
  int64_t unreserved() const { return unreserved_; }
  // The worker's graphs of `resampler` (MuLo-SD's U_r, kv_pools.h's Make), or null.
  const ResamplerGraphs* GraphsOf(const Resampler& resampler) const;
  // The worker's graphs of EAGLE-2's whole drafting of `tree` with `head`
  // (eagle_tree_graphs.h), or null.
  const EagleTreeGraphs* TreeGraphsOf(const EagleHead& head, const DynamicTreeOptions& tree) const;
  // The worker's graphs of EAGLE-1's drafting of its static tree cut to `depth` levels, with
  // greedy or sampled draws, or null.
  const EagleTreeGraphs* StaticTreeGraphsOf(const EagleHead& head, int64_t depth,
                                            bool greedy) const;
  // The worker's graphs verifying trees of the shape `key` with `target`
  // (tree_verify_graphs.h: TreeVerifyGraphs::Shape::SameKey), or null.
  const TreeVerifyGraphs* TreeVerifyGraphsOf(const TokenModel& target,
                                             const TreeVerifyGraphs::Shape& key) const;
  // The worker's graphs of MuLo-SD's verification of `shape` with `target`
  // (mulo_verify_graphs.h), or null.
  const MuloVerifyGraphs* MuloVerifyGraphsOf(const TokenModel& target,
                                             const MuloVerifyGraphs::Shape& shape) const;
  // The worker's graphs of ZipAR's forwards with `model` (zipar_graphs.h), or null.
  const ZipArGraphs* ZipArGraphsOf(const TokenModel& model) const;

 private:
  friend class KvPools;
  struct Run {
    const void* model;
    KvPool* pool;
    std::shared_ptr<KvSlots> slots;
    bool taken = false;
  };
  std::vector<Run> runs_;
  const KvPools* pools_ = nullptr;
  int64_t unreserved_ = 0;
};

class KvPools {
 public:
  // Rows a slot holds beyond the longest request's cache: a draft tree or window appended
  // after the image's last committed token (a cache that needs more overflows, kv_pool.h).
  static constexpr int64_t kDraftRows = 256;
  // The methods' own lengths, which the step graphs are captured for at load unless the
  // family's method_defaults set others (GraphedShapes; another length steps eagerly):
  // speculative's gamma (speculative.h), SJD's and GSD's window (sjd.h, gsd.h), GSD's group
  // size (group_verifier.h's GroupRule), MC-SJD's window (mc_sjd.h), MuLo-SD's drafter rows
  // per step (MuloOptions::draft_rows), the relaxed trees' neighbours.
  static constexpr int64_t kGraphedChain = 4;
  static constexpr int64_t kGraphedWindow = 16;
  static constexpr int64_t kGraphedGroup = 14;
  static constexpr int64_t kGraphedCoupledWindow = 64;
  // LANTERN's and LANTERN++'s k (LanternOptions, LanternPlusPlusOptions: lantern.h, which
  // depends on this file; kv_pools_test checks they agree).
  static constexpr int64_t kGraphedLanternK = 1000;
  static constexpr int64_t kGraphedLanternPlusPlusK = 10;

  // The step shapes the pools capture graphs for: what a family's requests take by default
  // (graphed_shapes.h reads them through the method registry; a request with other options
  // steps eagerly). Each default here is the methods' own.
  struct GraphedShapes {
    int64_t chain = kGraphedChain;  // speculative's gamma
    int64_t sjd_window = kGraphedWindow;
    int64_t gsd_window = kGraphedWindow;
    int64_t gsd_group = kGraphedGroup;
    int64_t mc_sjd_window = kGraphedCoupledWindow;
    // SJD-PAC's window and tree (SjdPacOptions' own defaults; 0 = none captured).
    int64_t sjd_pac_window = 64, sjd_pac_width = 4, sjd_pac_depth = 3;
    DynamicTreeOptions eagle_tree;  // EAGLE-2's (LANTERN's and PEANUT's first) tree
    // Every tree PEANUT's steps may draft (PeanutShapes::Reachable): drafted from padded
    // graphs (EagleTreeGraphs::CapturePadded), verified by graphs of their own.
    std::vector<DynamicTreeOptions> peanut_trees;
    int64_t lantern_k = kGraphedLanternK;
    int64_t lantern_plus_plus_k = kGraphedLanternPlusPlusK;
    int64_t mulo_draft_rows = 1;  // MuLo-SD's drafter rows per step
    // MuLo-SD's verification (none: its steps re-sample otherwise, on the host).
    std::optional<MuloVerifyGraphs::Shape> mulo_verify;
  };
  struct Family {
    Family(std::string name, const ModelSet* models, GraphedShapes shapes)
        : name(std::move(name)), models(models), shapes(std::move(shapes)) {}
    std::string name;
    const ModelSet* models = nullptr;
    GraphedShapes shapes;
  };
  // One pool per caching model of every family, each with 2 * `requests` slots.
  // FAILED_PRECONDITION when the memory cannot be allocated.
  static StatusOr<std::unique_ptr<KvPools>> Make(const std::vector<Family>& families,
                                                 int64_t requests);
  // The bytes of one request's worth of slots (two per caching model) over `families`: what
  // a memory budget divides by to size the pools in requests.
  static int64_t RequestBytes(const std::vector<Family>& families);

  // Adds `pool` as `model`'s (Make adds one per caching model; tests add their own).
  void Add(std::string family, std::string component, const void* model,
           std::shared_ptr<KvPool> pool);

  // The graphs of `resampler` captured at load (a family's up-sampler, when its target runs
  // from graphs), or null.
  const ResamplerGraphs* resampler_graphs(const Resampler& resampler) const;
  // The graphs of EAGLE-2's drafting of `tree` with `head` captured at load (over its pool,
  // when the target and the head run from graphs: the family's tree and its cuts), or null.
  const EagleTreeGraphs* tree_graphs(const EagleHead& head, const DynamicTreeOptions& tree) const;
  // The graphs of the static tree's drafting (EAGLE-1's StaticTree57 cut to `depth`, greedy or
  // sampled draws) with `head` captured at load, or null.
  const EagleTreeGraphs* static_tree_graphs(const EagleHead& head, int64_t depth,
                                            bool greedy) const;
  // The graphs verifying trees of the shape `key` with `target`, captured over its pool at
  // load, or null.
  const TreeVerifyGraphs* tree_verify_graphs(const TokenModel& target,
                                             const TreeVerifyGraphs::Shape& key) const;
  // The graphs of MuLo-SD's verification of `shape` with `target`, captured over its pool at
  // load for the family's MuLo-SD defaults (when they re-sample from the verify forward), or
  // null.
  const MuloVerifyGraphs* mulo_verify_graphs(const TokenModel& target,
                                             const MuloVerifyGraphs::Shape& shape) const;
  // The graphs of ZipAR's forwards with `model` (ZipAR's target, or MuLo-SD's drafter for
  // its wavefront), captured over its pool at load (every window), or null.
  const ZipArGraphs* zipar_graphs(const TokenModel& model) const;

  bool CanReserve(const KvDemand& demand) const;
  // The demand's slots, taken; null when they do not all fit (nothing is taken then). A need
  // of a model without a pool (a test's, a text stage's) is left out.
  std::unique_ptr<KvReservation> Reserve(const KvDemand& demand);

  struct Usage {
    std::string family, component;  // component: target, drafter, chain, eagle
    int64_t slots = 0, used = 0, slot_rows = 0, bytes = 0, overflows = 0;
    PoolGraphs::Counts graphs;  // its forward and row graphs together; zero without graphs
  };
  std::vector<Usage> usage() const;
  // The batched CUDA graphs (or emulated graphs) captured over the pools at load and how they
  // served since, summed over every pool. Read while no request runs (tests, benchmarks) or
  // for the start-up log.
  PoolGraphs::Counts graph_counts() const;
  int64_t MemoryBytes() const;

 private:
  struct Entry {
    std::string family, component;
    const void* model;
    std::shared_ptr<KvPool> pool;
  };
  const Entry* Find(const void* model) const;
  // MuLo-SD's step graphs of `family` (mulo_verify_graphs.h, Shape::draft) over its target's
  // and drafter's pools, made before, where its defaults draft from the drafter's own tokens
  // and both models replay graphs.
  Status CaptureMuloStepGraphs(const Family& family,
                               const std::optional<RowGraphs::Model>& target_steps);
  std::vector<Entry> pools_;
  std::vector<std::shared_ptr<ResamplerGraphs>> resampler_graphs_;
  std::vector<std::shared_ptr<EagleTreeGraphs>> tree_graphs_;
  std::vector<std::shared_ptr<TreeVerifyGraphs>> tree_verify_graphs_;
  std::vector<std::shared_ptr<MuloVerifyGraphs>> mulo_verify_graphs_;
  std::vector<std::shared_ptr<ZipArGraphs>> zipar_graphs_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_KV_POOLS_H_
