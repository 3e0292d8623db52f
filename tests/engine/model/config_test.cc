// Config parsing: upstream rules (FFN width) and clear errors naming the file and field.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/model/transformer_config.h"
#include "engine/model/vq_config.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

nlohmann::json TarLike() {
  return nlohmann::json{{"dim", 1280},          {"n_layer", 30},
                        {"n_head", 20},         {"vocab_size", 16384},
                        {"grid_size", 32},      {"cls_token_num", 729},
                        {"position_mode", "abs_pe"}, {"condition_mode", "clip_cond"},
                        {"cond_dim", 1152}};
}

void ExpectFieldError(const nlohmann::json& doc, const std::string& field,
                      const std::string& fragment) {
  auto c = ParseTransformerConfig(doc, "model/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("model/config.json: field '" + field + "'"),
            std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status().message();
}

TEST(TransformerConfigTest, TarLpDefaults) {
  auto c = ParseTransformerConfig(TarLike(), "x");
  ASSERT_OK(c);
  EXPECT_EQ(c->ffn_hidden_dim, 3584);  // find_multiple(int(2 * 4 * 1280 / 3), 256)
  EXPECT_EQ(c->n_kv_head, 20);
  EXPECT_EQ(c->head_dim(), 64);
  EXPECT_DOUBLE_EQ(c->norm_eps, 1e-5);
  EXPECT_EQ(c->max_positions(), 729 + 1024 - 1);
}

TEST(TransformerConfigTest, LlamaGenFfnRule) {
  EXPECT_EQ(LlamaFfnHiddenDim(768, 256, 0.0), 2048);   // GPT-B
  EXPECT_EQ(LlamaFfnHiddenDim(1024, 256, 0.0), 2816);  // GPT-L
  EXPECT_EQ(LlamaFfnHiddenDim(1536, 256, 0.0), 4096);  // GPT-XXL
}

TEST(TransformerConfigTest, ErrorsNameTheField) {
  auto doc = TarLike();
  doc.erase("dim");
  ExpectFieldError(doc, "dim", "missing");
  doc = TarLike();
  doc["position_mode"] = "rope_3d";
  ExpectFieldError(doc, "position_mode", "abs_pe, rope_2d");
  doc = TarLike();
  doc["n_head"] = 7;
  ExpectFieldError(doc, "n_head", "not divisible");
  doc = TarLike();
  doc["n_kv_head"] = 3;
  ExpectFieldError(doc, "n_kv_head", "not a multiple");
  doc = TarLike();
  doc["vocab_size"] = "big";
  ExpectFieldError(doc, "vocab_size", "expected an integer");
  doc = TarLike();
  doc["norm_eps"] = -1;
  ExpectFieldError(doc, "norm_eps", "outside");
  doc = TarLike();
  doc["condition_mode"] = "class_label";
  ExpectFieldError(doc, "num_classes", "missing");
}

TEST(TransformerConfigTest, MissingFileAndMalformedJson) {
  auto missing = LoadTransformerConfig("/nonexistent/config.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  const std::string path = testing::TempPath("bad_config.json");
  {
    std::ofstream out(path);
    out << "{\"dim\": 64,";
  }
  auto bad = LoadTransformerConfig(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ": malformed JSON"), std::string::npos);
}

// A number no double holds makes nlohmann throw out_of_range (not parse_error); it must be an
// error naming the file like any other malformed JSON, not a crash.
TEST(TransformerConfigTest, NumberTooLargeForADoubleIsMalformedJson) {
  const std::string path = testing::TempPath("overflow_config.json");
  std::ofstream(path) << "{\"dim\": 1E5555}";
  auto bad = LoadTransformerConfig(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(path + ": malformed JSON"), std::string::npos);
}

TEST(VqConfigTest, UpstreamVq16AndErrors) {
  nlohmann::json doc = {{"codebook_size", 16384}, {"codebook_embed_dim", 8},
                        {"z_channels", 256},      {"ch", 128},
                        {"ch_mult", {1, 1, 2, 2, 4}}, {"num_res_blocks", 2}};
  auto c = ParseVqConfig(doc, "vq.json");
  ASSERT_OK(c);
  EXPECT_EQ(c->downsample_factor(), 16);
  EXPECT_EQ(c->norm_groups, 32);
  EXPECT_TRUE(c->codebook_l2_norm);
  doc["norm_groups"] = 48;
  auto bad = ParseVqConfig(doc, "vq.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("field 'norm_groups'"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
