// ZipAR: with window = grid width it is AR token for token (greedy and sampled, same seeds);
// it runs the paper's 2N + (N - 2)s forwards; rows stream in order; every fed token attends
// to exactly the condition, itself and the real tokens decoded before it with a smaller
// raster index (all of row 0, min(N, k s + c + 1) tokens of row r - k >= 1), never to a
// placeholder; the window is validated by name.
#include "engine/decode/zipar.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/decode/ar.h"
#include "engine/decode/zipar_rows.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadMuloTiny;
using testing::Sampling;
using testing::SdFixture;

class RecordingSink : public ProgressSink {
 public:
  void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>& tokens) override {
    EXPECT_EQ(first_row, rows);
    rows += num_rows;
    streamed.insert(streamed.end(), tokens.begin(), tokens.end());
  }
  int64_t rows = 0;
  std::vector<int32_t> streamed;
};

// The tests decode mulo_tiny's target: an 8 x 8 grid (sd_tiny's 4 x 4 leaves few ZipAR windows).
StatusOr<DecodeResult> Decode8(const DecodingMethod& method, const SdFixture& f,
                               const SamplingParams& s, ProgressSink* sink = nullptr) {
  NullProgressSink null_sink;
  CancelToken cancel;
  return method.Decode(DecodeRequest{f.condition, s}, f.models,
                       sink != nullptr ? *sink : null_sink, cancel);
}

TEST(ZipArTest, WindowOfTheGridWidthIsAr) {
  SdFixture f = LoadMuloTiny();
  for (double temperature : {0.0, 1.0}) {
    for (double cfg : {1.0, 2.0}) {
      for (uint64_t seed = 0; seed < 6; ++seed) {
        const SamplingParams s = Sampling(temperature, cfg, seed);
        auto ar = Decode8(ArDecoder(), f, s);
        auto zipar = Decode8(ZipArDecoder({8}), f, s);
        ASSERT_OK(ar);
        ASSERT_OK(zipar);
        EXPECT_EQ(zipar->tokens, ar->tokens) << "temperature " << temperature << " seed " << seed;
        EXPECT_EQ(zipar->stats.target_forward_passes, 64);
      }
    }
  }
}

TEST(ZipArTest, RunsThePapersForwardCountAndStreamsRowsInOrder) {
  SdFixture f = LoadMuloTiny();
  const int64_t n = 8;
  for (int64_t window = 1; window <= n; ++window) {
    RecordingSink sink;
    auto zipar = Decode8(ZipArDecoder({window}), f, Sampling(1.0, 2.0, 7), &sink);
    ASSERT_OK(zipar);
    EXPECT_EQ(zipar->stats.target_forward_passes, 2 * n + (n - 2) * window) << window;
    EXPECT_EQ(sink.rows, n);
    EXPECT_EQ(std::vector<int32_t>(zipar->tokens.begin(), zipar->tokens.end()), sink.streamed);
    for (int32_t t : zipar->tokens) EXPECT_GE(t, 0);
  }
  // Smaller windows change the image (the rows above are cut short), not its validity.
  auto narrow = Decode8(ZipArDecoder({2}), f, Sampling(1.0, 2.0, 7));
  auto ar = Decode8(ArDecoder(), f, Sampling(1.0, 2.0, 7));
  ASSERT_OK(narrow);
  ASSERT_OK(ar);
  EXPECT_NE(narrow->tokens, ar->tokens);
}

// Drives the schedule without a model: every forward's mask against the method's definition.
TEST(ZipArRowsTest, EveryTokenAttendsToExactlyWhatTheMethodSays) {
  const int64_t n = 8, condition = 3;
  for (int64_t s : {1, 2, 3, 5, 8}) {
    ZipArRows rows(n, s);
    rows.Set(0, 100);
    std::map<int64_t, int64_t> fed_step;  // raster -> forward it was fed in
    int64_t step = 0, forwards = 1;       // the prefill
    while (true) {
      bool done = true;
      for (bool row : rows.RowsDone()) done = done && row;
      if (done) break;
      const ZipArRows::Forward fw = rows.Next(condition);
      ++forwards;
      const int64_t cached = static_cast<int64_t>(rows.cached().size());
      const int64_t inputs = static_cast<int64_t>(fw.inputs.size());
      ASSERT_EQ(fw.mask.size(0), inputs);
      ASSERT_EQ(fw.mask.size(1), condition + cached + inputs);
      for (int64_t i = 0; i < inputs; ++i) {
        const ZipArRows::Input& in = fw.inputs[i];
        const int64_t r = in.raster / n, c = in.raster % n;
        // The set it attends to, as raster indices of real tokens.
        std::vector<int64_t> seen;
        for (int64_t j = 0; j < condition; ++j) EXPECT_TRUE(fw.mask[i][j].item<bool>());
        for (int64_t j = 0; j < cached; ++j) {
          if (fw.mask[i][condition + j].item<bool>()) seen.push_back(rows.cached()[j]);
        }
        for (int64_t k = 0; k < inputs; ++k) {
          const bool attends = fw.mask[i][condition + cached + k].item<bool>();
          if (k == i) {
            EXPECT_TRUE(attends);
          } else if (fw.inputs[k].placeholder) {
            EXPECT_FALSE(attends) << "attends to a placeholder";
          } else if (attends) {
            seen.push_back(fw.inputs[k].raster);
          }
        }
        for (int64_t v : seen) EXPECT_LT(v, in.raster);
        if (in.placeholder) {
          EXPECT_EQ(c, n - 1);
          EXPECT_EQ(in.predicts, (r + 1) * n);
          EXPECT_LT(s, n);
          // It carries the newest token of the row above.
          int64_t newest = -1;
          for (int64_t col = 0; col < n; ++col) {
            if (rows.tokens()[(r - 1) * n + col] >= 0) newest = rows.tokens()[(r - 1) * n + col];
          }
          EXPECT_EQ(in.token, newest);
          continue;
        }
        // Per row above and its own: how many tokens it sees.
        std::vector<int64_t> per_row(n, 0);
        for (int64_t v : seen) ++per_row[v / n];
        EXPECT_EQ(per_row[r], c) << "its own row's earlier tokens";
        for (int64_t above = 0; above < r; ++above) {
          const int64_t k = r - above;
          const int64_t expected = above == 0 ? n : std::min(n, k * s + c + 1);
          EXPECT_EQ(per_row[above], expected)
              << "s " << s << " token (" << r << ", " << c << ") row " << above;
        }
        fed_step[in.raster] = step;
      }
      rows.Fed(fw);
      for (const ZipArRows::Input& in : fw.inputs) {
        if (in.predicts >= 0) rows.Set(in.predicts, 1000 + in.predicts);
      }
      ++step;
    }
    EXPECT_EQ(forwards, 2 * n + (n - 2) * s) << s;
    EXPECT_EQ(static_cast<int64_t>(fed_step.size()), n * n - 1);  // all but the last token
  }
}

TEST(ZipArTest, WindowIsValidatedByName) {
  SdFixture f = LoadMuloTiny();
  for (int64_t window : {0, 9}) {
    auto r = Decode8(ZipArDecoder({window}), f, SamplingParams());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("zipar.window"), std::string::npos);
  }
}

}  // namespace
}  // namespace mulo::engine
