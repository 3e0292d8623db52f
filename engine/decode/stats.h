// Statistics every decoding method reports, so methods compare like for like
// (docs/design.md, "Stats and metrics"). Step compression = tokens / target forward passes.
#ifndef MULO_ENGINE_DECODE_STATS_H_
#define MULO_ENGINE_DECODE_STATS_H_

#include <torch/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mulo::engine {

enum class Phase {
  kPrefill,        // condition positions through the target
  kTargetForward,  // plain AR steps
  kSampling,       // logits processing and draws
  kDraft,          // proposer forwards (drafter, draft model, tree expansion)
  kVerify,         // target forward over drafts + acceptance rule
  kResample,       // re-sampling rejected positions
  kUpsample,       // MuLo-SD U_r
  kDownsample,     // MuLo-SD D_r
  kTextStage,      // the prompt's stage before the image tokens: Tar's MLLM writing TA-Tok ids
  kImageDecode,    // VQ decoder
};
inline constexpr int kNumPhases = static_cast<int>(Phase::kImageDecode) + 1;
const char* PhaseName(Phase phase);

struct Stats {
  int64_t tokens = 0;
  int64_t target_forward_passes = 0;
  int64_t draft_forward_passes = 0;
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  int64_t resampled_tokens = 0;
  // Relaxed methods: accepted drafts the exact rule would not have kept (kept by pooling).
  int64_t relaxed_accepted_tokens = 0;
  // Latent relaxations (LANTERN family): drafts whose pooled set A was formed, and the
  // neighbours pooled for them (|A| - 1 summed); their ratio is the mean pooled set size.
  int64_t pooled_drafts = 0;
  int64_t pooled_neighbors = 0;
  // MuLo-SD: re-sampled positions that were accepted themselves but neighbour a rejection.
  int64_t expansion_resampled_tokens = 0;
  // MuLo-SD: drafter prefix tokens that are the drafter's own draws, and those re-derived
  // from the committed target tokens by D_r.
  int64_t prefix_own_tokens = 0;
  int64_t prefix_downsampled_tokens = 0;
  // accepted_per_position[i]: drafts accepted at depth i (chain and tree methods).
  std::vector<int64_t> accepted_per_position;
  // Decoding rounds after the prefill: target verification forwards (draft-and-verify
  // methods), or parallel steps (ZipAR). The wire's Stats.iterations.
  int64_t verify_steps = 0;
  // Tree methods: the drafted trees' depths (deepest node) and widths (top-k of a dynamic
  // tree), summed over verify steps (PEANUT adapts both).
  int64_t drafted_tree_depth = 0;
  int64_t drafted_tree_width = 0;
  // Device -> host reads the decoding made (engine/core/host_read.h): host synchronisations
  // on a GPU, counted on every device. Prefill and steps; not the image decode.
  int64_t host_syncs = 0;
  // Operators dispatched over the same span (engine/core/op_count.h): all of them, and those
  // that are about one kernel launch each on a GPU. Zero unless the caller counts operators
  // (an OpCounting scope on the decoding thread, as methods_bench --count_ops makes). Those a
  // CUDA graph replays are not dispatched by the host and not counted, emulated graphs
  // included: these are the operators outside graphs.
  int64_t dispatched_ops = 0;
  int64_t kernel_ops = 0;
  // CUDA graphs replayed over the same span (real or emulated), counted always. Forwards a
  // loop batches run on the loop's thread and count there, not here.
  int64_t graph_replays = 0;
  // The condition's decoding stage (Tar's MLLM writing TA-Tok ids): its tokens and its
  // model's forward passes, apart from the image's counters above.
  int64_t text_stage_tokens = 0;
  int64_t text_stage_forward_passes = 0;
  std::array<double, kNumPhases> phase_seconds{};
  double total_seconds = 0.0;
  // How each image token was committed, one code per token in raster order (commit_map.h):
  // the target's own draw, a re-draw, or a draft kept at its depth (relaxed or not).
  std::vector<uint8_t> commit_map;

  // One verify step kept a path (chain prefix or tree path) of `accepted` drafts: counts them
  // per depth (accepted_per_position grows as needed) and in accepted_tokens.
  void CountAcceptedPath(int64_t accepted) {
    if (static_cast<int64_t>(accepted_per_position.size()) < accepted) {
      accepted_per_position.resize(accepted, 0);
    }
    for (int64_t i = 0; i < accepted; ++i) ++accepted_per_position[i];
    accepted_tokens += accepted;
  }

  double StepCompression() const {
    return target_forward_passes ? static_cast<double>(tokens) / target_forward_passes : 0.0;
  }
  double AcceptanceRate() const {
    return drafted_tokens ? static_cast<double>(accepted_tokens) / drafted_tokens : 0.0;
  }
  double MeanAcceptedLength() const {
    return verify_steps ? static_cast<double>(accepted_tokens) / verify_steps : 0.0;
  }
  double MeanDraftedTreeDepth() const {
    return verify_steps ? static_cast<double>(drafted_tree_depth) / verify_steps : 0.0;
  }
  double MeanDraftedTreeWidth() const {
    return verify_steps ? static_cast<double>(drafted_tree_width) / verify_steps : 0.0;
  }
  double MeanPooledNeighbors() const {
    return pooled_drafts ? static_cast<double>(pooled_neighbors) / pooled_drafts : 0.0;
  }
  double PhaseSeconds(Phase p) const { return phase_seconds[static_cast<int>(p)]; }

  // "tokens=256 target_forwards=257 ... prefill=0.01s ..." for logs and benchmarks.
  std::string ToString() const;
};

// Adds the wall time of a scope to stats->phase_seconds[phase]. With `synchronize` on a CUDA
// device it first waits for this thread's stream, so that asynchronous kernels are charged to
// the phase that launched them (benchmarks' phase tables); without, a phase's time is the
// host's time in it and the device runs ahead, as a server wants. Never a device-wide
// synchronisation: that fails while another worker captures a CUDA graph (docs/gpu.md).
class PhaseTimer {
 public:
  PhaseTimer(Stats* stats, Phase phase, const torch::Device& device, bool synchronize);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  Stats* stats_;
  Phase phase_;
  torch::Device device_;
  bool synchronize_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_STATS_H_
