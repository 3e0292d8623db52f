// MuLo-SD's options struct holds the paper's settings (a family's own defaults are read
// through its spec: option_text_test).
#include "engine/decode/mulo_options.h"

#include <gtest/gtest.h>

namespace mulo::engine {
namespace {

TEST(MuloOptionsTest, TheStructDefaultsAreThePapersSettings) {
  const MuloOptions paper = PaperMuloOptions();
  EXPECT_EQ(paper.tau, 1e-4);
  EXPECT_EQ(paper.pooling.kind, Pooling::kAdditive);
  EXPECT_EQ(paper.pooling.k, 1000);
  EXPECT_EQ(paper.pooling.delta, 0.1);
  EXPECT_EQ(paper.radius, 3);
  EXPECT_EQ(paper.draft_rows, 1);
  EXPECT_EQ(paper.rejection, Rejection::kLocal);
  EXPECT_EQ(paper.prefix, DraftPrefix::kDownsampled);
  EXPECT_EQ(paper.resample, ResampleOrder::kSequential);
  EXPECT_FALSE(paper.draft_cfg_scale.has_value());
  EXPECT_FALSE(paper.draft_temperature.has_value());
}

}  // namespace
}  // namespace mulo::engine
