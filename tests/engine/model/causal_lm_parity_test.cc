// C++ causal language models (engine/model/causal_lm) against the PyTorch reference written
// from transformers' Qwen2ForCausalLM (tools/reference/qwen2.py), loaded from what
// tools/convert/hf_causal_lm.py wrote from tiny random checkpoints in the Hugging Face layout:
// Qwen2 (tied head, grouped-query attention, q/k/v biases, theta 1e6) and LLaMA (untied, no
// biases). Logits over a 12-token prompt agree to float tolerance, prefilled at once or fed a
// token at a time through the cache, and the greedy continuation is the reference's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/model/causal_lm.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::MaxAbsDiff;
using testing::ReadAll;

std::vector<int64_t> Ids(const torch::Tensor& t) {
  auto c = t.to(torch::kInt64).contiguous().view({-1});
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

class CausalLmParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CausalLmParityTest, LogitsAndGreedyTokensMatchTheReference) {
  const std::string dir = FixtureDir(GetParam());
  auto model = CausalLm::LoadDirectory(dir + "/lm", LoadOptions());
  ASSERT_OK(model);
  auto expected = ReadAll(dir + "/expected.safetensors");
  const torch::Tensor ids = expected.at("ids").to(torch::kInt64);
  const torch::Tensor& ref = expected.at("logits");

  KvCache whole = (*model)->NewCache(1, 16);
  auto prefill = (*model)->Forward(whole, ids);
  ASSERT_OK(prefill);
  ASSERT_EQ(prefill->sizes(), ref.sizes());
  const double scale = ref.abs().max().item<double>();
  const double err = MaxAbsDiff(*prefill, ref);
  std::cout << "[parity] " << GetParam() << ": max |logits - ref| = " << err << " (scale "
            << scale << ")\n";
  EXPECT_LE(err, 1e-4 * scale);

  // One token at a time through the cache: the same logits.
  KvCache stepped = (*model)->NewCache(1, 4);  // grows as needed
  for (int64_t i = 0; i < ids.size(1); ++i) {
    auto row = (*model)->Forward(stepped, ids.narrow(1, i, 1));
    ASSERT_OK(row);
    EXPECT_LE(MaxAbsDiff(*row, ref.narrow(1, i, 1)), 1e-4 * scale) << "position " << i;
  }

  auto greedy = (*model)->GreedyContinuation(Ids(ids), 16);
  ASSERT_OK(greedy);
  EXPECT_EQ(*greedy, Ids(expected.at("greedy")));
}

INSTANTIATE_TEST_SUITE_P(HuggingFaceLayouts, CausalLmParityTest,
                         ::testing::Values("qwen2_tiny", "llama_tiny"));

TEST(CausalLmTest, RefusesBadInputNamingTheField) {
  auto model = CausalLm::LoadDirectory(FixtureDir("qwen2_tiny") + "/lm", LoadOptions());
  ASSERT_OK(model);
  KvCache cache = (*model)->NewCache(1, 8);
  auto out_of_vocabulary =
      (*model)->Forward(cache, torch::tensor({{1, 384}}, torch::kInt64));
  EXPECT_EQ(out_of_vocabulary.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out_of_vocabulary.status().message(), "tokens: ids must be in [0, 384)");
  auto too_long = (*model)->Forward(cache, torch::zeros({1, 129}, torch::kInt64));
  EXPECT_EQ(too_long.status().message(),
            "tokens: positions up to 128 exceed max_positions 128");
  auto wrong_type = (*model)->Forward(cache, torch::zeros({1, 2}, torch::kInt32));
  EXPECT_EQ(wrong_type.status().message(), "tokens: expected int64 [1, n >= 1]");
  EXPECT_EQ(cache.length(), 0);  // nothing refused reached the cache
  auto missing = CausalLm::LoadDirectory(FixtureDir("qwen2_tiny") + "/hf", LoadOptions());
  EXPECT_FALSE(missing.ok());  // the upstream layout itself is not ours: convert it first
}

}  // namespace
}  // namespace mulo::engine
