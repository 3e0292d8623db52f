#include "engine/model/caption_condition.h"

#include <string>

#include "engine/core/torch_guard.h"

namespace mulo::engine {

StatusOr<Condition> T5CaptionCondition(const T5Encoder& encoder, const std::vector<int64_t>& ids,
                                       const std::vector<int64_t>& mask, int64_t cls_token_num) {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n != cls_token_num) {
    return InvalidArgumentError("caption_ids: " + std::to_string(n) + " tokens; the family's "
                                "condition takes " + std::to_string(cls_token_num));
  }
  if (static_cast<int64_t>(mask.size()) != n) {
    return InvalidArgumentError("caption_mask: one entry per caption_ids token is needed");
  }
  int64_t real = 0;
  while (real < n && mask[real] != 0) ++real;
  for (int64_t i = real; i < n; ++i) {
    if (mask[i] != 0) {
      return InvalidArgumentError("caption_mask: the real tokens must come first, then padding");
    }
  }
  if (real == 0) return InvalidArgumentError("caption_mask: no real token");
  MULO_ASSIGN_OR_RETURN(
      torch::Tensor features,
      encoder.Encode(torch::tensor(ids, torch::kInt64).unsqueeze(0),
                     torch::tensor(mask, torch::kInt64).unsqueeze(0)));
  return GuardTorch("T5CaptionCondition", [&]() -> StatusOr<Condition> {
    const torch::Tensor rows = features.squeeze(0);
    Condition condition;
    // Padded rows first (zeroed, as upstream multiplies by the flipped mask), real ones last.
    condition.features = torch::cat({torch::zeros_like(rows.narrow(0, real, n - real)),
                                     rows.narrow(0, 0, real)});
    condition.caption_length = real;
    return condition;
  });
}

}  // namespace mulo::engine
