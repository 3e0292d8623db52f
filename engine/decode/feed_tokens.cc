#include "engine/decode/feed_tokens.h"

namespace mulo::engine {

StatusOr<torch::Tensor> FeedTokens(const Transformer& model, KvCache& cache,
                                   const std::vector<int64_t>& tokens, int64_t from, int64_t to,
                                   LogitsMode mode) {
  std::vector<int64_t> ids(tokens.begin() + from, tokens.begin() + to);
  auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).expand({cache.batch(), -1}).contiguous();
  auto positions =
      torch::arange(model.TokenPosition(from), model.TokenPosition(to), torch::kInt64);
  MULO_ASSIGN_OR_RETURN(ForwardOutput out, model.ForwardTokens(cache, input, positions, mode));
  return out.logits;
}

}  // namespace mulo::engine
