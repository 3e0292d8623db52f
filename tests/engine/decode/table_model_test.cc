// The enumerable test model (table_model.h): its logits are the table's for every context a
// method builds (prefix, tree, Keep, Truncate, batched), a wrong visible set fails the
// forward, and the linear EAGLE head continues its features exactly.
#include "tests/engine/decode/table_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/decode/ar.h"
#include "engine/model/eagle_head.h"
#include "tests/engine/decode/table_family.h"
#include "tests/engine/test_util.h"

namespace mulo::engine::testing {
namespace {

constexpr int64_t kVocab = 3, kGrid = 2;

TableFamily Family() {
  return MakeTableFamily("table_model_test", TableLaw::Random(kVocab, kGrid, 1),
                         TableLaw::Random(kVocab, kGrid, 2), TableLaw::Random(kVocab, kGrid, 3));
}

torch::Tensor Ids(const std::vector<int64_t>& ids) {
  return torch::tensor(ids, torch::kInt64).unsqueeze(0);
}

torch::Tensor Positions(const std::vector<int64_t>& rasters) {
  std::vector<int64_t> p;
  for (int64_t r : rasters) p.push_back(1 + r);
  return torch::tensor(p, torch::kInt64);
}

// exp(logits) of row `row` against the law's row for `prefix`.
void ExpectRow(const torch::Tensor& logits, int64_t row, const std::vector<double>& expected) {
  for (int64_t t = 0; t < kVocab; ++t) {
    EXPECT_NEAR(std::exp(logits[0][row][t].item<double>()), expected[t], 1e-6) << "token " << t;
  }
}

TEST(TableModelTest, JointIsAProbabilityAndIndexesRoundTrip) {
  const TableLaw law = TableLaw::Random(kVocab, kGrid, 7);
  const std::vector<double> joint = law.Joint();
  ASSERT_EQ(static_cast<int64_t>(joint.size()), 81);
  double total = 0;
  for (double p : joint) total += p;
  EXPECT_NEAR(total, 1.0, 1e-12);
  for (int64_t i = 0; i < law.images(); ++i) EXPECT_EQ(law.ImageIndex(law.ImageAt(i)), i);
  for (int64_t r = 0; r < static_cast<int64_t>(law.rows().size()); ++r) {
    EXPECT_EQ(law.RowOf(law.PrefixOfRow(r)), r);
  }
  const TableLaw back = TableLaw::FromJson(law.ToJson());
  EXPECT_EQ(back.rows(), law.rows());
  EXPECT_EQ(back.Given(3, {{0, 1}, {2, 2}}), law.Given(3, {{0, 1}, {2, 2}}));
}

TEST(TableModelTest, LogitsFollowTheTableThroughTreesKeepAndTruncate) {
  TableFamily f = Family();
  const TokenModel& m = *f.models.target;
  KvCache cache = m.NewCache(2, m.CacheRows(1));
  auto condition = m.EmbedCondition(f.condition, true);
  ASSERT_OK(condition);
  auto prefill = m.Prefill(cache, *condition, LogitsMode::kLast);
  ASSERT_OK(prefill);
  ExpectRow(prefill->logits, 0, f.target->Next({}));
  // Causal append of 2, 0.
  auto causal = m.ForwardTokens(cache, Ids({2, 0}).expand({2, 2}).contiguous(), Positions({0, 1}),
                                LogitsMode::kAll);
  ASSERT_OK(causal);
  ExpectRow(causal->logits, 0, f.target->Next({2}));
  ExpectRow(causal->logits, 1, f.target->Next({2, 0}));
  // A tree after token 0 (cache: condition, 2, 0): siblings 1 and 2 at raster 1 under it.
  ASSERT_OK(cache.Truncate(2));
  auto mask = torch::tensor({{true, true, true, false}, {true, true, false, true}}).view({2, 4});
  auto tree = m.ForwardTokens(cache, Ids({1, 2}).expand({2, 2}).contiguous(), Positions({1, 1}),
                              mask, LogitsMode::kAll);
  ASSERT_OK(tree);
  ExpectRow(tree->logits, 0, f.target->Next({2, 1}));
  ExpectRow(tree->logits, 1, f.target->Next({2, 2}));
  // Keep the second sibling: the next row sees 2, 2.
  ASSERT_OK(cache.Compact({0, 1, 3}));
  auto after = m.ForwardTokens(cache, Ids({0}).expand({2, 1}).contiguous(), Positions({2}),
                               LogitsMode::kLast);
  ASSERT_OK(after);
  ExpectRow(after->logits, 0, f.target->Next({2, 2, 0}));
}

TEST(TableModelTest, GuidanceOfTheTwoStreamsGivesTheGuidedTable) {
  const TableLaw guided = TableLaw::Random(kVocab, kGrid, 21);
  TableFamily f = MakeTableFamily("table_model_guided", guided, guided, guided, 2.5);
  const TokenModel& m = *f.models.target;
  KvCache cache = m.NewCache(2, m.CacheRows(1));
  ASSERT_OK(m.Prefill(cache, *m.EmbedCondition(f.condition, true), LogitsMode::kLast));
  auto out = m.ForwardTokens(cache, Ids({2, 1}).expand({2, 2}).contiguous(), Positions({0, 1}),
                             LogitsMode::kAll);
  ASSERT_OK(out);
  // The streams differ, and u + 2.5 (c - u) is the guided table's log.
  EXPECT_GT(MaxAbsDiff(out->logits[0], out->logits[1]), 0.1);
  const torch::Tensor mixed =
      (out->logits[1] + 2.5 * (out->logits[0] - out->logits[1])).softmax(-1);
  for (int64_t t = 0; t < kVocab; ++t) {
    EXPECT_NEAR(mixed[1][t].item<double>(), guided.Next({2, 1})[t], 1e-5);
  }
}

TEST(TableModelTest, AWrongVisibleSetFailsTheForward) {
  TableFamily f = Family();
  const TokenModel& m = *f.models.target;
  KvCache cache = m.NewCache(1, m.CacheRows(1));
  ASSERT_OK(m.Prefill(cache, *m.EmbedCondition(f.condition, false), LogitsMode::kLast));
  ASSERT_OK(m.ForwardTokens(cache, Ids({1}), Positions({0}), LogitsMode::kLast));
  // Two rows at raster 1 both visible to a row at raster 2 (a tree mask that forgot a sibling).
  auto twice = m.ForwardTokens(cache, Ids({0, 1, 2}), Positions({1, 1, 2}),
                               torch::tensor({true, true, true, false, false,  // raster 1, token 0
                                              true, true, false, true, false,  // raster 1, token 1
                                              true, true, true, true, true})   // raster 2 sees both
                                   .view({3, 5}),
                               LogitsMode::kAll);
  EXPECT_EQ(twice.status().code(), StatusCode::kInternal);
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos) << twice.status().message();
  // A row that does not see the condition.
  KvCache other = m.NewCache(1, m.CacheRows(1));
  ASSERT_OK(m.Prefill(other, *m.EmbedCondition(f.condition, false), LogitsMode::kLast));
  auto blind = m.ForwardTokens(other, Ids({1}), Positions({0}),
                               torch::tensor({false, true}).view({1, 2}), LogitsMode::kAll);
  EXPECT_EQ(blind.status().code(), StatusCode::kInternal);
  // Out-of-range ids are refused naming the field.
  auto bad = m.EmbedTokens(Ids({kVocab}));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("tokens:", 0), 0u);
}

TEST(TableModelTest, TheLinearEagleHeadPredictsTheExtendedContextsFeature) {
  TableFamily f = Family();
  const auto& target = static_cast<const TableModel&>(*f.models.target);
  const EagleHead& head = *f.models.eagle;
  KvCache cache = head.NewCache(2, 8);
  // Pairs (x_j, feature of x_<j) for the context 1, 2, 0: features of x_<=j out.
  const std::vector<int64_t> context = {1, 2, 0};
  std::vector<torch::Tensor> features;
  std::vector<int64_t> before;
  for (int64_t t : context) {
    features.push_back(torch::tensor(target.Feature(before)));
    before.push_back(t);
  }
  auto embeddings = target.EmbedTokens(Ids(context).expand({2, 3}).contiguous());
  ASSERT_OK(embeddings);
  auto out = head.Forward(cache, *embeddings,
                          torch::stack(features).unsqueeze(0).expand({2, 3, 16}).contiguous(),
                          torch::Tensor());
  ASSERT_OK(out);
  std::vector<int64_t> prefix;
  for (int64_t j = 0; j < 3; ++j) {
    prefix.push_back(context[j]);
    const std::vector<float> expected = target.Feature(prefix);
    for (int64_t d = 0; d < TableModel::kDim; ++d) {
      EXPECT_EQ((*out)[1][j][d].item<float>(), expected[d]) << "pair " << j << " coordinate " << d;
    }
    const torch::Tensor logits = target.HeadLogits((*out).select(1, j));
    for (int64_t t = 0; t < kVocab; ++t) {
      EXPECT_NEAR(std::exp(logits[0][t].item<double>()), f.head->Next(prefix)[t], 1e-6);
    }
  }
}

TEST(TableModelTest, ArDecodesEveryTokenFromTheTable) {
  TableFamily f = Family();
  // Greedy ar follows the table's argmax at every prefix.
  auto greedy = Decode(ArDecoder(), f, [] {
    SamplingParams s = TableSampling(0);
    s.temperature = 0.0;
    return s;
  }());
  ASSERT_OK(greedy);
  std::vector<int64_t> prefix;
  for (int32_t t : greedy->tokens) {
    const std::vector<double>& row = f.target->Next(prefix);
    EXPECT_EQ(t, std::max_element(row.begin(), row.end()) - row.begin());
    prefix.push_back(t);
  }
}

}  // namespace
}  // namespace mulo::engine::testing
