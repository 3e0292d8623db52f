#include "engine/sampling/group_verifier.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace mulo::engine {
namespace {

// Ids in the low bits of the device path's order keys: vocabularies up to 16M ids.
constexpr int64_t kIdBits = 24;

}  // namespace

bool GroupVerifier::JudgesOnDevice() const {
  return ExactVerifier::JudgesOnDevice() && embeddings_.size(0) < (int64_t{1} << kIdBits);
}

GroupVerifier::GroupVerifier(GroupRule rule, const torch::Tensor& embeddings, AcceptRule accept,
                             ResidualRule residual)
    : ExactVerifier(std::move(accept), std::move(residual)),
      rule_(rule),
      embeddings_(embeddings.to(torch::kCPU, torch::kFloat32).contiguous()),
      device_embeddings_(embeddings.to(torch::kFloat32)) {}

PooledMasses GroupMasses(const torch::Tensor& p, const torch::Tensor& q, const torch::Tensor& tokens,
                         const torch::Tensor& embeddings, int64_t size,
                         const torch::Tensor& max_probability_gap,
                         const torch::Tensor& max_embedding_distance) {
  at::NoGradGuard no_grad;
  const torch::Tensor probs = p.to(torch::kFloat32), drafts = q.to(torch::kFloat32);
  const int64_t length = probs.size(0), vocab = probs.size(1);
  const auto long_options = torch::dtype(torch::kInt64).device(probs.device());
  const torch::Tensor x = tokens.to(long_options).view({length, 1});
  // The target's order (most likely first, ties by id) as one integer key per token, larger
  // first: a non-negative float's bits order as the float does, and the id breaks ties. G(x)'s
  // candidates are the more_likely keys just above x's and the less_likely just below: two
  // top-k's, where sorting every row cost the CPU 0.9 ms a step.
  const int64_t id_mask = (int64_t{1} << kIdBits) - 1;
  const torch::Tensor key =
      probs.contiguous().view(torch::kInt32).to(torch::kInt64).mul(int64_t{1} << kIdBits) +
      (id_mask - torch::arange(vocab, long_options)).view({1, -1});
  const torch::Tensor key_x = key.gather(1, x);
  const int64_t less_likely = size / 2, more_likely = size - 1 - less_likely;
  std::vector<torch::Tensor> keys, found;
  auto nearest = [&](const torch::Tensor& side, int64_t count, bool above) {
    if (count <= 0) return;
    const int64_t none = above ? std::numeric_limits<int64_t>::max()
                               : std::numeric_limits<int64_t>::min();
    const torch::Tensor candidates = torch::where(side, key, torch::full_like(key, none));
    const torch::Tensor nearest_keys =
        std::get<0>(candidates.topk(std::min(count, vocab), 1, /*largest=*/!above));
    keys.push_back(nearest_keys);
    found.push_back(nearest_keys.ne(none));
  };
  nearest(key.gt(key_x), more_likely, /*above=*/true);
  nearest(key.lt(key_x), less_likely, /*above=*/false);
  if (keys.empty()) {  // G(x) = {x}
    PooledMasses own;
    own.p = probs.gather(1, x).squeeze(1).to(torch::kFloat64);
    own.q = drafts.gather(1, x).squeeze(1).to(torch::kFloat64);
    own.neighbors = torch::zeros({length}, long_options);
    return own;
  }
  const torch::Tensor inside = torch::cat(found, 1);
  const torch::Tensor y = (id_mask - torch::cat(keys, 1).bitwise_and(id_mask)).clamp(0, vocab - 1);
  const torch::Tensor p_x = probs.gather(1, x), p_y = probs.gather(1, y);
  // The host's test, in its arithmetic: the float gap, then the double bound.
  const torch::Tensor close = (p_y - p_x).abs().to(torch::kFloat64).lt(max_probability_gap);
  const int64_t dim = embeddings.size(1);
  const torch::Tensor e_y =
      embeddings.index_select(0, y.flatten()).view({length, -1, dim}).to(torch::kFloat64);
  const torch::Tensor e_x =
      embeddings.index_select(0, x.flatten()).view({length, 1, dim}).to(torch::kFloat64);
  const torch::Tensor near = (e_y - e_x).square().sum(2).lt(max_embedding_distance);
  const torch::Tensor pooled = inside.logical_and(close).logical_and(near);
  const torch::Tensor weight = pooled.to(torch::kFloat64);
  PooledMasses masses;
  masses.p = p_x.squeeze(1).to(torch::kFloat64) + p_y.to(torch::kFloat64).mul(weight).sum(1);
  masses.q = drafts.gather(1, x).squeeze(1).to(torch::kFloat64) +
             drafts.gather(1, y).to(torch::kFloat64).mul(weight).sum(1);
  masses.neighbors = pooled.to(torch::kInt64).sum(1);
  return masses;
}

std::optional<PooledMasses> GroupVerifier::PooledMassesOnDevice(const torch::Tensor& p,
                                                                const torch::Tensor& q,
                                                                const torch::Tensor& tokens) const {
  const auto bound = [&](double value) {
    return torch::scalar_tensor(value, torch::dtype(torch::kFloat64));  // a CPU scalar
  };
  return GroupMasses(p, q, tokens, device_embeddings_, rule_.size,
                     bound(rule_.max_probability_gap), bound(rule_.max_embedding_distance));
}

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
