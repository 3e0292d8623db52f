// The per-request decoding session: stream operations (contiguous feed, a masked tree feed kept
// down to its accepted path, truncation), row streaming in order (also when rows complete out
// of raster order), the random streams per role, and the checks Start makes.
#include <gtest/gtest.h>

#include <vector>

#include "engine/decode/draft_tree.h"
#include "engine/decode/session.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureCondition;
using testing::FixtureDir;
using testing::LoadFixtureModel;
using testing::MaxAbsDiff;
using testing::ReadAll;

class RecordingSink : public ProgressSink {
 public:
  void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>& tokens) override {
    calls.push_back({first_row, num_rows});
    all_tokens.insert(all_tokens.end(), tokens.begin(), tokens.end());
  }
  std::vector<std::pair<int64_t, int64_t>> calls;
  std::vector<int32_t> all_tokens;
};

struct Fixture {
  ModelSet models;
  DecodeRequest request;
  RecordingSink sink;
  CancelToken cancel;
};

std::unique_ptr<Fixture> MakeFixture() {
  auto f = std::make_unique<Fixture>();
  f->models.target = LoadFixtureModel("tar_tiny");
  auto expected = ReadAll(FixtureDir("tar_tiny") + "/expected.safetensors");
  f->request.condition = FixtureCondition(*f->models.target, expected);
  f->request.sampling.cfg_scale = 2.0;
  return f;
}

std::unique_ptr<DecodeSession> Start(Fixture& f) {
  auto session = DecodeSession::Start("test", f.request, f.models, f.sink, f.cancel);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return session.ok() ? std::move(session).value() : nullptr;
}

TEST(DecodeSessionTest, FeedContinuesTheStreamAndRefusesGaps) {
  auto f = MakeFixture();
  auto session = Start(*f);
  auto stream = session->Open(*f->models.target, StreamRole::kTarget);
  ASSERT_OK(stream);
  const std::vector<int64_t> tokens = {5, 9, 1, 7, 3};
  auto all = (*stream)->Feed(tokens, 0, 3, LogitsMode::kAll);
  ASSERT_OK(all);
  EXPECT_EQ(all->size(1), 3);
  EXPECT_EQ((*stream)->fed(), std::vector<int64_t>({5, 9, 1}));
  // next_logits is the last fed position's output.
  EXPECT_EQ(MaxAbsDiff((*stream)->next_logits(), all->select(1, 2)), 0.0);
  EXPECT_EQ((*stream)->Feed(tokens, 4, 5).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_OK((*stream)->Truncate(1));
  EXPECT_EQ((*stream)->fed(), std::vector<int64_t>({5}));
  EXPECT_EQ((*stream)->cache().length(), (*stream)->condition_rows() + 1);
  EXPECT_EQ((*stream)->Truncate(2).code(), StatusCode::kOutOfRange);
  // One prefill and one feed, both the target's.
  EXPECT_EQ(session->stats().target_forward_passes, 2);
  EXPECT_EQ(session->stats().draft_forward_passes, 0);
}

TEST(DecodeSessionTest, ATreeKeptDownToItsPathEqualsFeedingThePath) {
  auto f = MakeFixture();
  auto session = Start(*f);
  auto tree_stream = session->Open(*f->models.target, StreamRole::kTarget);
  auto path_stream = session->Open(*f->models.target, StreamRole::kDraft);
  ASSERT_OK(tree_stream);
  ASSERT_OK(path_stream);
  ModelStream& tree = **tree_stream;
  ModelStream& path = **path_stream;
  const std::vector<int64_t> prefix = {4, 8};
  ASSERT_OK(tree.Feed(prefix, 0, 2));
  ASSERT_OK(path.Feed(prefix, 0, 2));
  // A tree after the prefix: node 0 (token 6, position 2) with children 1 (token 3) and 2
  // (token 11) at position 3, and node 3 (token 2, position 4) under node 2.
  const std::vector<int64_t> ids = {6, 3, 11, 2}, positions = {2, 3, 3, 4};
  auto shape = TreeFromParents({-1, 0, 0, 2});
  ASSERT_OK(shape);
  const int64_t cached = tree.cache().length();
  auto out = tree.FeedSet(ids, positions, TreeAttentionMask(*shape, cached), LogitsMode::kAll);
  ASSERT_OK(out);
  EXPECT_EQ(tree.fed(), prefix);  // unchanged until Keep
  // The accepted path 0 -> 2 -> 3 fed contiguously gives the same outputs...
  auto straight = path.Feed({4, 8, 6, 11, 2}, 2, 5, LogitsMode::kAll);
  ASSERT_OK(straight);
  EXPECT_LE(MaxAbsDiff(out->logits.select(1, 3), straight->select(1, 2)), 1e-5);
  // ...and keeping the path's rows leaves the cache the path would have built.
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < cached; ++r) rows.push_back(r);
  for (int64_t node : {0, 2, 3}) rows.push_back(cached + node);
  ASSERT_OK(tree.Keep(rows, {4, 8, 6, 11, 2}));
  EXPECT_EQ(tree.fed(), path.fed());
  for (int64_t layer = 0; layer < tree.cache().num_layers(); ++layer) {
    EXPECT_LE(MaxAbsDiff(tree.cache().Keys(layer), path.cache().Keys(layer)), 1e-5);
    EXPECT_LE(MaxAbsDiff(tree.cache().Values(layer), path.cache().Values(layer)), 1e-5);
  }
  // Feeding on from the kept path continues like the straight stream.
  auto next_tree = tree.Feed({4, 8, 6, 11, 2, 9}, 5, 6);
  auto next_path = path.Feed({4, 8, 6, 11, 2, 9}, 5, 6);
  ASSERT_OK(next_tree);
  ASSERT_OK(next_path);
  EXPECT_LE(MaxAbsDiff(*next_tree, *next_path), 1e-5);
  EXPECT_EQ(tree.Keep({0}, {1, 2}).code(), StatusCode::kInvalidArgument);  // rows != tokens
}

// The static 57-node tree in one masked forward: every node's output equals feeding its
// root-to-node path alone after the prefix (TreeAttentionMask, positions = prefix + depth - 1).
// The feature behind next_logits() reads out to it through the output head, after the
// prefill and after every feed.
TEST(DecodeSessionTest, NextHiddenIsTheFeatureOfNextLogits) {
  auto f = MakeFixture();
  auto session = Start(*f);
  auto stream = session->Open(*f->models.target, StreamRole::kTarget);
  ASSERT_OK(stream);
  ModelStream& s = **stream;
  const TokenModel& target = *f->models.target;
  auto readout = [&] { return target.HeadLogits(s.next_hidden()); };
  EXPECT_LE(MaxAbsDiff(readout(), s.next_logits()), 1e-4);
  ASSERT_OK(s.Feed({4, 8, 6}, 0, 3, LogitsMode::kAll));
  EXPECT_EQ(s.next_hidden().size(0), s.cache().batch());
  EXPECT_LE(MaxAbsDiff(readout(), s.next_logits()), 1e-4);
}

TEST(DecodeSessionTest, EveryNodeOfTheStaticTreeSeesOnlyItsPath) {
  auto f = MakeFixture();
  auto session = Start(*f);
  auto tree_stream = session->Open(*f->models.target, StreamRole::kTarget);
  auto path_stream = session->Open(*f->models.target, StreamRole::kDraft);
  ASSERT_OK(tree_stream);
  ASSERT_OK(path_stream);
  ModelStream& tree = **tree_stream;
  ModelStream& path = **path_stream;
  const std::vector<int64_t> prefix = {4, 8};
  ASSERT_OK(tree.Feed(prefix, 0, 2));
  ASSERT_OK(path.Feed(prefix, 0, 2));
  const TreeShape shape = StaticTree57();
  const int64_t vocab = f->models.target->vocab_size();
  std::vector<int64_t> ids, positions;
  for (int64_t i = 0; i < shape.size(); ++i) {
    ids.push_back((7 * i + 3) % vocab);
    positions.push_back(2 + shape.depths[i] - 1);
  }
  auto out = tree.FeedSet(ids, positions, TreeAttentionMask(shape, tree.cache().length()),
                          LogitsMode::kAll);
  ASSERT_OK(out);
  for (int64_t node = 0; node < shape.size(); ++node) {
    std::vector<int64_t> seq = prefix;
    for (int64_t a : shape.PathTo(node)) seq.push_back(ids[a]);
    ASSERT_OK(path.Truncate(2));
    auto straight = path.Feed(seq, 2, static_cast<int64_t>(seq.size()), LogitsMode::kLast);
    ASSERT_OK(straight);
    EXPECT_LE(MaxAbsDiff(out->logits.select(1, node), straight->select(1, 0)), 1e-5) << node;
  }
}

TEST(DecodeSessionTest, RowsStreamInOrderAlsoWhenTheyCompleteOutOfOrder) {
  auto f = MakeFixture();
  auto session = Start(*f);
  const int64_t grid = session->grid();
  std::vector<int64_t> tokens(session->num_tokens());
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i % 100);
  std::vector<bool> done(grid, false);
  done[1] = done[2] = true;  // rows 1 and 2 finish before row 0: nothing streams yet
  session->CommitRows(tokens, done);
  EXPECT_TRUE(f->sink.calls.empty());
  done[0] = true;
  session->CommitRows(tokens, done);
  ASSERT_EQ(f->sink.calls.size(), 1u);
  EXPECT_EQ(f->sink.calls[0], std::make_pair(int64_t{0}, int64_t{3}));
  // A raster prefix commit continues from there, a partial row streams nothing.
  session->Commit(std::vector<int64_t>(tokens.begin(), tokens.begin() + 4 * grid + 1));
  ASSERT_EQ(f->sink.calls.size(), 2u);
  EXPECT_EQ(f->sink.calls[1], std::make_pair(int64_t{3}, int64_t{1}));
  EXPECT_EQ(f->sink.all_tokens,
            std::vector<int32_t>(tokens.begin(), tokens.begin() + 4 * grid));
  EXPECT_FALSE(session->done());
}

TEST(DecodeSessionTest, EachRoleDrawsFromItsOwnStream) {
  auto f = MakeFixture();
  auto a = Start(*f);
  auto b = Start(*f);
  const auto logits = torch::randn({2, f->models.target->vocab_size()});
  // Drafter draws do not move the target's stream.
  for (int i = 0; i < 5; ++i) a->Draw(logits, RngStream::kDrafter);
  EXPECT_EQ(a->Draw(logits, RngStream::kTarget), b->Draw(logits, RngStream::kTarget));
  EXPECT_EQ(a->rng(RngStream::kAcceptance).Next(), b->rng(RngStream::kAcceptance).Next());
}

TEST(DecodeSessionTest, StartChecksTheTargetAndTheSamplingParameters) {
  auto f = MakeFixture();
  f->request.sampling.temperature = -1;
  auto bad = DecodeSession::Start("test", f->request, f->models, f->sink, f->cancel);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("sampling.temperature:", 0), 0u);
  f->request.sampling.temperature = 1;
  f->models.target = nullptr;
  auto none = DecodeSession::Start("test", f->request, f->models, f->sink, f->cancel);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace mulo::engine
