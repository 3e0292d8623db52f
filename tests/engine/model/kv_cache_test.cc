// KV cache semantics: incremental decoding, rollback, compaction and tree attention must all
// give the logits of a plain forward over the same token sequence.
#include <gtest/gtest.h>

#include <vector>

#include "engine/model/transformer.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureCondition;
using testing::FixtureDir;
using testing::LoadFixtureModel;
using testing::MaxAbsDiff;
using testing::ReadAll;

constexpr double kTolerance = 1e-4;

class KvCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = LoadFixtureModel(GetParam());
    ASSERT_NE(model_, nullptr);
    auto expected = ReadAll(FixtureDir(GetParam()) + "/expected.safetensors");
    auto cond = model_->EmbedCondition(FixtureCondition(*model_, expected), true);
    ASSERT_OK(cond);
    condition_ = *cond;
    auto tokens = expected.at("tokens").to(torch::kInt64).flatten();
    tokens_.assign(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + tokens.numel());
  }

  int64_t cls() const { return model_->config().cls_token_num; }

  // A cache holding the condition and tokens[0, count).
  KvCache CacheWithPrefix(const std::vector<int64_t>& tokens, int64_t count) {
    KvCache cache = model_->NewCache(2, 16);  // small on purpose: exercises growth
    EXPECT_TRUE(model_->Prefill(cache, condition_, LogitsMode::kNone).ok());
    if (count > 0) {
      EXPECT_TRUE(Append(cache, tokens, 0, count).ok());
    }
    return cache;
  }

  // Appends tokens[first, first + count) causally at their raster positions.
  StatusOr<ForwardOutput> Append(KvCache& cache, const std::vector<int64_t>& tokens,
                                 int64_t first, int64_t count) {
    std::vector<int64_t> ids(tokens.begin() + first, tokens.begin() + first + count);
    auto t = torch::tensor(ids, torch::kInt64).unsqueeze(0).repeat({2, 1});
    auto pos = torch::arange(model_->TokenPosition(first), model_->TokenPosition(first + count),
                             torch::kInt64);
    return model_->ForwardTokens(cache, t, pos, LogitsMode::kAll);
  }

  // Logits of the last position after a fresh causal run over the condition + `tokens`.
  torch::Tensor FreshLastLogits(const std::vector<int64_t>& tokens) {
    KvCache cache = model_->NewCache(2, 16);
    auto prefill = model_->Prefill(cache, condition_, LogitsMode::kLast);
    EXPECT_TRUE(prefill.ok());
    if (tokens.empty()) return prefill->logits.select(1, 0);
    auto out = Append(cache, tokens, 0, static_cast<int64_t>(tokens.size()));
    EXPECT_TRUE(out.ok());
    return out->logits.select(1, out->logits.size(1) - 1);
  }

  std::shared_ptr<const Transformer> model_;
  torch::Tensor condition_;
  std::vector<int64_t> tokens_;
};

TEST_P(KvCacheTest, IncrementalDecodeEqualsFullForward) {
  const int64_t n = static_cast<int64_t>(tokens_.size());
  KvCache full = model_->NewCache(2, 16);
  auto prefill = model_->Prefill(full, condition_, LogitsMode::kAll);
  ASSERT_OK(prefill);
  auto all = Append(full, tokens_, 0, n);
  ASSERT_OK(all);

  KvCache step = model_->NewCache(2, 16);
  ASSERT_OK(model_->Prefill(step, condition_, LogitsMode::kNone));
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    auto out = Append(step, tokens_, i, 1);
    ASSERT_OK(out);
    worst = std::max(worst, MaxAbsDiff(out->logits.select(1, 0), all->logits.select(1, i)));
  }
  EXPECT_EQ(step.length(), cls() + n);
  EXPECT_LE(worst, kTolerance);
  for (int64_t layer = 0; layer < step.num_layers(); ++layer) {
    EXPECT_LE(MaxAbsDiff(step.Keys(layer), full.Keys(layer)), kTolerance);
    EXPECT_LE(MaxAbsDiff(step.Values(layer), full.Values(layer)), kTolerance);
  }
}

TEST_P(KvCacheTest, TruncateThenReappendEqualsFreshRun) {
  KvCache cache = CacheWithPrefix(tokens_, 12);
  ASSERT_OK(cache.Truncate(cls() + 5));
  EXPECT_EQ(cache.length(), cls() + 5);
  // Re-append different tokens after the rollback point.
  std::vector<int64_t> replaced(tokens_.begin(), tokens_.begin() + 12);
  for (int64_t i = 5; i < 12; ++i) replaced[i] = (replaced[i] + 17) % model_->config().vocab_size;
  auto out = Append(cache, replaced, 5, 7);
  ASSERT_OK(out);
  EXPECT_LE(MaxAbsDiff(out->logits.select(1, 6), FreshLastLogits(replaced)), kTolerance);
  EXPECT_FALSE(cache.Truncate(cache.length() + 1).ok());
  EXPECT_FALSE(cache.Truncate(-1).ok());
}

TEST_P(KvCacheTest, CompactKeepsExactlyTheChosenRows) {
  KvCache cache = CacheWithPrefix(tokens_, 10);
  const int64_t len = cache.length();
  std::vector<torch::Tensor> before;
  for (int64_t l = 0; l < cache.num_layers(); ++l) before.push_back(cache.Keys(l).clone());
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cls() + 3; ++i) keep.push_back(i);
  keep.push_back(cls() + 5);
  keep.push_back(len - 1);
  ASSERT_OK(cache.Compact(keep));
  ASSERT_EQ(cache.length(), static_cast<int64_t>(keep.size()));
  auto index = torch::tensor(keep, torch::kInt64);
  for (int64_t l = 0; l < cache.num_layers(); ++l) {
    EXPECT_TRUE(torch::equal(cache.Keys(l), before[l].index_select(2, index)));
  }
  EXPECT_FALSE(cache.Compact({1, 0}).ok());           // not increasing
  EXPECT_FALSE(cache.Compact({0, 1000}).ok());        // beyond the length
}

// Tree drafts: every node attends to the prefix and its ancestors only, at position
// prefix + depth. Each node's logits must equal a causal run of its root-to-node path.
TEST_P(KvCacheTest, TreeMaskGivesEveryNodeItsPathLogits) {
  const int64_t prefix = 6;
  const int64_t vocab = model_->config().vocab_size;
  //            node: 0  1  2  3  4  5  6
  const std::vector<int64_t> parent = {-1, -1, 0, 0, 1, 2, 2};
  std::vector<int64_t> node_token, depth;
  for (size_t i = 0; i < parent.size(); ++i) {
    node_token.push_back((tokens_[prefix + i] * 7 + 3) % vocab);
    depth.push_back(parent[i] < 0 ? 0 : depth[parent[i]] + 1);
  }
  const int64_t nodes = static_cast<int64_t>(parent.size());
  KvCache cache = CacheWithPrefix(tokens_, prefix);
  const int64_t len = cache.length();
  auto mask = torch::zeros({nodes, len + nodes}, torch::kBool);
  mask.narrow(1, 0, len).fill_(true);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < nodes; ++i) {
    for (int64_t a = i; a >= 0; a = parent[a]) mask[i][len + a] = true;
    positions.push_back(model_->TokenPosition(prefix + depth[i]));
  }
  auto ids = torch::tensor(node_token, torch::kInt64).unsqueeze(0).repeat({2, 1});
  auto embeddings = model_->EmbedTokens(ids);
  ASSERT_OK(embeddings);
  auto out = model_->Forward(cache, *embeddings, torch::tensor(positions, torch::kInt64), mask,
                             LogitsMode::kAll);
  ASSERT_OK(out);
  double worst = 0.0;
  for (int64_t i = 0; i < nodes; ++i) {
    std::vector<int64_t> path;
    for (int64_t a = i; a >= 0; a = parent[a]) path.insert(path.begin(), node_token[a]);
    std::vector<int64_t> seq(tokens_.begin(), tokens_.begin() + prefix);
    seq.insert(seq.end(), path.begin(), path.end());
    worst = std::max(worst, MaxAbsDiff(out->logits.select(1, i), FreshLastLogits(seq)));
  }
  EXPECT_LE(worst, kTolerance);

  // Keep the prefix plus the accepted path 0 -> 2 -> 5, then continue decoding: the result
  // must equal a fresh run of prefix + path + next token.
  std::vector<int64_t> keep;
  for (int64_t r = 0; r < len; ++r) keep.push_back(r);
  for (int64_t node : {0, 2, 5}) keep.push_back(len + node);
  ASSERT_OK(cache.Compact(keep));
  std::vector<int64_t> seq(tokens_.begin(), tokens_.begin() + prefix);
  for (int64_t node : {0, 2, 5}) seq.push_back(node_token[node]);
  seq.push_back(tokens_[prefix + 3]);
  auto next = Append(cache, seq, prefix + 3, 1);
  ASSERT_OK(next);
  EXPECT_LE(MaxAbsDiff(next->logits.select(1, 0), FreshLastLogits(seq)), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvCacheTest,
                         ::testing::Values("tar_tiny", "llamagen_c2i_tiny", "llamagen_t2i_tiny"));

}  // namespace
}  // namespace mulo::engine
