#include "engine/decode/jacobi_window.h"

#include <algorithm>

namespace mulo::engine {

const char* JacobiInitName(JacobiInit init) {
  return init == JacobiInit::kRandom ? "random" : "repeat_horizon";
}

void FillJacobiTokens(DecodeSession& session, JacobiInit init, const std::vector<int64_t>& x,
                      int64_t length, std::vector<int64_t>& tokens) {
  tokens.resize(std::min<int64_t>(tokens.size(), length));
  const int64_t n = static_cast<int64_t>(x.size()), grid = session.grid();
  const int64_t vocab = session.models().target->vocab_size();
  while (static_cast<int64_t>(tokens.size()) < length) {
    const int64_t position = n + static_cast<int64_t>(tokens.size());
    int64_t token;
    if (init == JacobiInit::kRepeatHorizon && position >= grid) {
      const int64_t above = position - grid;
      token = above < n ? x[above] : tokens[above - n];
    } else {
      Rng& rng = session.rng(RngStream::kDrafter);
      token = std::min<int64_t>(vocab - 1, static_cast<int64_t>(rng.Uniform() * vocab));
    }
    tokens.push_back(token);
  }
}

void FillJacobiWindow(DecodeSession& session, JacobiInit init, const std::vector<int64_t>& x,
                      int64_t length, JacobiWindow& window) {
  const size_t carried = std::min<size_t>(window.tokens.size(), length);
  window.q.resize(carried);
  FillJacobiTokens(session, init, x, length, window.tokens);
  const int64_t vocab = session.models().target->vocab_size();
  for (size_t i = carried; i < window.tokens.size(); ++i) {
    torch::Tensor one_hot =
        torch::zeros({vocab}, torch::dtype(torch::kFloat32).device(session.device()));
    one_hot[window.tokens[i]] = 1.0f;
    window.q.push_back(one_hot);
  }
}

}  // namespace mulo::engine
