#include "engine/decode/stats.h"

#include <exception>
#include <sstream>

#include "engine/core/device_stream.h"

namespace mulo::engine {

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kPrefill: return "prefill";
    case Phase::kTargetForward: return "target_forward";
    case Phase::kSampling: return "sampling";
    case Phase::kDraft: return "draft";
    case Phase::kVerify: return "verify";
    case Phase::kResample: return "resample";
    case Phase::kUpsample: return "upsample";
    case Phase::kDownsample: return "downsample";
    case Phase::kTextStage: return "text_stage";
    case Phase::kImageDecode: return "image_decode";
  }
  return "unknown";
}

std::string Stats::ToString() const {
  std::ostringstream out;
  out << "tokens=" << tokens << " target_forwards=" << target_forward_passes
      << " draft_forwards=" << draft_forward_passes << " iterations=" << verify_steps
      << " drafted=" << drafted_tokens
      << " accepted=" << accepted_tokens << " resampled=" << resampled_tokens
      << " relaxed_accepted=" << relaxed_accepted_tokens
      << " expansion_resampled=" << expansion_resampled_tokens
      << " pooled_drafts=" << pooled_drafts << " pooled_neighbors=" << pooled_neighbors
      << " prefix_own=" << prefix_own_tokens << " prefix_downsampled=" << prefix_downsampled_tokens
      << " host_syncs=" << host_syncs << " step_compression=" << StepCompression()
      << " total=" << total_seconds << "s";
  for (int i = 0; i < kNumPhases; ++i) {
    if (phase_seconds[i] > 0) {
      out << " " << PhaseName(static_cast<Phase>(i)) << "=" << phase_seconds[i] << "s";
    }
  }
  return out.str();
}

PhaseTimer::PhaseTimer(Stats* stats, Phase phase, const torch::Device& device,
                       bool synchronize)
    : stats_(stats),
      phase_(phase),
      device_(device),
      synchronize_(synchronize),
      start_(std::chrono::steady_clock::now()) {}

PhaseTimer::~PhaseTimer() {
  if (synchronize_) {
    try {
      WaitForThisThread(device_);
    } catch (const std::exception&) {
      // A destructor must not throw; the device's error resurfaces at the next operation.
    }
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
  stats_->phase_seconds[static_cast<int>(phase_)] += elapsed.count();
}

}  // namespace mulo::engine
