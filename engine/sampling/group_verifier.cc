#include "engine/sampling/group_verifier.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace mulo::engine {

GroupVerifier::GroupVerifier(GroupRule rule, const torch::Tensor& embeddings, AcceptRule accept,
                             ResidualRule residual)
    : ExactVerifier(std::move(accept), std::move(residual)),
      rule_(rule),
      embeddings_(embeddings.to(torch::kCPU, torch::kFloat32).contiguous()) {}

std::vector<int64_t> GroupVerifier::Group(const torch::Tensor& p, int64_t x) const {
  std::vector<int64_t> group = {x};
  if (rule_.size <= 1) return group;
  // x's place in the target's order, most likely first (ties by token id, so it is unique).
  const auto order = std::get<1>(p.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  const int64_t* ids = order.data_ptr<int64_t>();
  const int64_t vocab = order.size(0);
  const int64_t rank = std::find(ids, ids + vocab, x) - ids;
  const int64_t less_likely = rule_.size / 2, more_likely = rule_.size - 1 - less_likely;
  const float* prob = p.data_ptr<float>();
  // Squared distances on the host rows directly: a handful of candidates per judged draft,
  // each a dim-long loop, cheaper than a tensor expression per candidate.
  const int64_t dim = embeddings_.size(1);
  const float* table = embeddings_.data_ptr<float>();
  const float* e_x = table + x * dim;
  for (int64_t r = std::max<int64_t>(0, rank - more_likely);
       r <= std::min(vocab - 1, rank + less_likely); ++r) {
    const int64_t y = ids[r];
    if (y == x || std::abs(prob[y] - prob[x]) >= rule_.max_probability_gap) continue;
    const float* e_y = table + y * dim;
    double distance = 0.0;
    for (int64_t i = 0; i < dim; ++i) {
      const double d = static_cast<double>(e_y[i]) - e_x[i];
      distance += d * d;
    }
    if (distance < rule_.max_embedding_distance) group.push_back(y);
  }
  return group;
}

ExactVerifier::Judgement GroupVerifier::Judge(const torch::Tensor& p, const torch::Tensor& q,
                                              int64_t x, Rng& accept) const {
  const std::vector<int64_t> group = Group(p, x);
  double p_group = 0.0, q_group = 0.0;
  const float* p_data = p.data_ptr<float>();
  const float* q_data = q.data_ptr<float>();
  for (int64_t y : group) {
    p_group += p_data[y];
    q_group += q_data[y];
  }
  const double u = accept.Uniform();
  Judgement judgement;
  judgement.keep = Keeps(p_group, q_group, u);
  judgement.relaxed = judgement.keep && !Keeps(p_data[x], q_data[x], u);
  judgement.pooled = static_cast<int64_t>(group.size()) - 1;
  return judgement;
}

}  // namespace mulo::engine
