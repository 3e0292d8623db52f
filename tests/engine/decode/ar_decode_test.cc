// Plain AR decoding: greedy tokens equal the PyTorch reference's greedy tokens with CFG;
// seeds reproduce; rows stream in order; cancellation stops within one step.
#include <gtest/gtest.h>

#include <vector>

#include "engine/decode/ar.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureCondition;
using testing::FixtureDir;
using testing::LoadFixtureModel;
using testing::ReadAll;

struct Fixture {
  ModelSet models;
  DecodeRequest request;
  std::vector<int32_t> reference_greedy;
};

Fixture MakeFixture(const std::string& name) {
  Fixture f;
  f.models.target = LoadFixtureModel(name);
  auto expected = ReadAll(FixtureDir(name) + "/expected.safetensors");
  f.request.condition = FixtureCondition(*f.models.target, expected);
  f.request.sampling.cfg_scale = expected.at("cfg_scale").item<double>();
  auto greedy = expected.at("greedy_tokens").to(torch::kInt64);
  for (int64_t i = 0; i < greedy.numel(); ++i) {
    f.reference_greedy.push_back(static_cast<int32_t>(greedy[i].item<int64_t>()));
  }
  return f;
}

class RecordingSink : public ProgressSink {
 public:
  void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>& tokens) override {
    first_rows.push_back(first_row);
    row_counts.push_back(num_rows);
    all_tokens.insert(all_tokens.end(), tokens.begin(), tokens.end());
  }
  std::vector<int64_t> first_rows, row_counts;
  std::vector<int32_t> all_tokens;
};

class ArGreedyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArGreedyTest, GreedyTokensEqualReference) {
  Fixture f = MakeFixture(GetParam());
  ASSERT_NE(f.models.target, nullptr);
  f.request.sampling.temperature = 0.0;
  RecordingSink sink;
  CancelToken cancel;
  auto result = ArDecoder().Decode(f.request, f.models, sink, cancel);
  ASSERT_OK(result);
  EXPECT_EQ(result->tokens, f.reference_greedy);
  const int64_t n = f.models.target->num_image_tokens();
  EXPECT_EQ(result->stats.tokens, n);
  EXPECT_EQ(result->stats.target_forward_passes, n);  // prefill + n - 1 steps
  EXPECT_DOUBLE_EQ(result->stats.StepCompression(), 1.0);
  // Rows arrive once each, in order, and together they are the final grid.
  const int64_t grid = f.models.target->grid_size();
  ASSERT_EQ(static_cast<int64_t>(sink.first_rows.size()), grid);
  for (int64_t r = 0; r < grid; ++r) {
    EXPECT_EQ(sink.first_rows[r], r);
    EXPECT_EQ(sink.row_counts[r], 1);
  }
  EXPECT_EQ(sink.all_tokens, result->tokens);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ArGreedyTest,
                         ::testing::Values("tar_tiny", "llamagen_c2i_tiny", "llamagen_t2i_tiny"));

TEST(ArSamplingTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  Fixture f = MakeFixture("tar_tiny");
  ASSERT_NE(f.models.target, nullptr);
  f.request.sampling.temperature = 1.0;
  NullProgressSink sink;
  CancelToken cancel;
  f.request.sampling.seed = 7;
  auto a = ArDecoder().Decode(f.request, f.models, sink, cancel);
  auto b = ArDecoder().Decode(f.request, f.models, sink, cancel);
  f.request.sampling.seed = 8;
  auto c = ArDecoder().Decode(f.request, f.models, sink, cancel);
  ASSERT_OK(a);
  ASSERT_OK(b);
  ASSERT_OK(c);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
  // Sampling at temperature 1 is not the greedy sequence.
  EXPECT_NE(a->tokens, f.reference_greedy);
}

TEST(ArSamplingTest, CfgScaleOneRunsOneStreamAndMatchesConditionalGreedy) {
  Fixture f = MakeFixture("tar_tiny");
  ASSERT_NE(f.models.target, nullptr);
  f.request.sampling.temperature = 0.0;
  f.request.sampling.cfg_scale = 1.0;
  NullProgressSink sink;
  CancelToken cancel;
  auto one = ArDecoder().Decode(f.request, f.models, sink, cancel);
  ASSERT_OK(one);
  EXPECT_EQ(one->tokens.size(), 64u);
  // With guidance the tokens differ (the fixture's reference uses scale 4).
  EXPECT_NE(one->tokens, f.reference_greedy);
}

// Cancels from inside the progress callback after `rows` rows.
class CancellingSink : public ProgressSink {
 public:
  CancellingSink(CancelToken* token, int64_t rows) : token_(token), rows_(rows) {}
  void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>&) override {
    seen_ = first_row + num_rows;
    if (seen_ >= rows_) token_->Cancel();
  }
  int64_t seen() const { return seen_; }

 private:
  CancelToken* token_;
  int64_t rows_;
  int64_t seen_ = 0;
};

TEST(ArCancelTest, StopsWithinOneStep) {
  Fixture f = MakeFixture("tar_tiny");
  ASSERT_NE(f.models.target, nullptr);
  CancelToken cancel;
  CancellingSink sink(&cancel, 2);
  auto result = ArDecoder().Decode(f.request, f.models, sink, cancel);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(sink.seen(), 2);  // no further row was produced after the cancel
}

TEST(ArCancelTest, ExpiredDeadlineIsDeadlineExceeded) {
  Fixture f = MakeFixture("tar_tiny");
  ASSERT_NE(f.models.target, nullptr);
  CancelToken expired(CancelToken::Clock::now());
  NullProgressSink sink;
  auto result = ArDecoder().Decode(f.request, f.models, sink, expired);
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(ArValidationTest, BadSamplingParamsNameTheField) {
  Fixture f = MakeFixture("tar_tiny");
  ASSERT_NE(f.models.target, nullptr);
  NullProgressSink sink;
  CancelToken cancel;
  f.request.sampling.top_p = 0.0;
  auto result = ArDecoder().Decode(f.request, f.models, sink, cancel);
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("sampling.top_p"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
