#include "engine/sampling/token_draw.h"

#include <map>
#include <string>
#include <tuple>

#include "engine/sampling/guidance.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {
namespace {

// [streams, k, V] whatever the call's shape.
torch::Tensor StreamRows(const torch::Tensor& logits) {
  return logits.dim() == 2 ? logits.unsqueeze(1) : logits;
}

// Calls whose rows may share one draw: the same sampling parameters, stream count, vocabulary,
// dtype and device (k may differ).
using DrawKey = std::tuple<double, double, int64_t, double, int64_t, int64_t, int, std::string>;

DrawKey KeyOf(const DrawCall& call) {
  const SamplingParams& s = call.sampling;
  const torch::Tensor& logits = call.logits;
  return {s.cfg_scale,   s.temperature,   s.top_k,
          s.top_p,       logits.size(0),  logits.size(-1),
          static_cast<int>(logits.scalar_type()), logits.device().str()};
}

}  // namespace

torch::Tensor DrawTokens(const DrawCall& call) {
  at::NoGradGuard no_grad;
  // No view for [streams, V]: a lone draw dispatches only the operators it always did.
  const int64_t k = call.count();
  return SampleRows(GuidedLogits(call.logits, call.sampling.cfg_scale).reshape({k, -1}),
                    call.sampling, call.uniforms);
}

std::vector<torch::Tensor> TokenDrawer::DrawBatch(const std::vector<DrawCall>& calls) const {
  at::NoGradGuard no_grad;
  std::map<DrawKey, std::vector<size_t>> groups;  // calls drawn together, in call order
  for (size_t i = 0; i < calls.size(); ++i) groups[KeyOf(calls[i])].push_back(i);
  std::vector<torch::Tensor> tokens(calls.size());
  for (const auto& [key, members] : groups) {
    if (members.size() == 1) {
      tokens[members[0]] = DrawTokens(calls[members[0]]);
      continue;
    }
    const DrawCall& first = calls[members[0]];
    std::vector<torch::Tensor> logits, uniforms;
    for (size_t i : members) {
      logits.push_back(StreamRows(calls[i].logits));
      if (calls[i].uniforms.defined()) uniforms.push_back(calls[i].uniforms);
    }
    DrawCall together;
    together.logits = torch::cat(logits, 1);  // [streams, sum k, V]
    together.sampling = first.sampling;
    if (!uniforms.empty()) together.uniforms = torch::cat(uniforms);
    const torch::Tensor drawn = DrawTokens(together);
    int64_t offset = 0;
    for (size_t i : members) {
      const int64_t k = calls[i].count();
      tokens[i] = drawn.narrow(0, offset, k);
      offset += k;
    }
  }
  return tokens;
}

}  // namespace mulo::engine
