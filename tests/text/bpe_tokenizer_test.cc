// text/bpe_tokenizer on small tokenizer.json files written here: merge order, added tokens
// (longest first), NFC, the byte-level round trip and every refusal's message. Its ids on the
// real Qwen2.5 vocabulary are checked against tokenizers.js by
// tests/peers/bpe_tokenizer_test.sh.
#include "text/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "text/byte_level.h"

namespace mulo::text {
namespace {

using nlohmann::json;

// Ids 0-255: the byte-level alphabet in byte order; then one id per merge's result.
json TinyFile(const std::vector<std::string>& merges, bool nfc = false) {
  ByteLevelAlphabet alphabet;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet.Encode(std::string(1, static_cast<char>(b)))] = b;
  int next = 256;
  for (const std::string& m : merges) {
    const size_t space = m.find(' ');
    vocab[m.substr(0, space) + m.substr(space + 1)] = next++;
  }
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
      {"normalizer", nfc ? json{{"type", "NFC"}} : json()},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"added_tokens",
       json::array({{{"id", 300}, {"content", "ab"}, {"special", true}},
                    {{"id", 301}, {"content", "abc"}, {"special", false},
                     {"normalized", false}}})},
  };
}

std::vector<int32_t> Encode(const BpeTokenizer& t, const std::string& text) {
  auto ids = t.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>();
}

std::unique_ptr<BpeTokenizer> Load(const json& file) {
  auto t = BpeTokenizer::FromJson(file.dump());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(BpeTokenizerTest, MergesApplyByRankAcrossTheWholePiece) {
  // h e (256), l l (257), he ll (258), hell o (259).
  auto t = Load(TinyFile({"h e", "l l", "he ll", "hell o"}));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Encode(*t, "hello"), std::vector<int32_t>({259}));
  EXPECT_EQ(Encode(*t, "hellohello"), std::vector<int32_t>({259, 259}));
  // GPT-2's pattern keeps a word's leading space in its piece: " hello" is 'Ġ' (byte 32, which
  // no merge joins) and then "hello".
  EXPECT_EQ(Encode(*t, "hello hello"), std::vector<int32_t>({259, 32, 259}));
  // The lower rank wins: "llo" merges l l first here, l o first with the ranks swapped.
  auto ll_first = Load(TinyFile({"l l", "l o"}));
  auto lo_first = Load(TinyFile({"l o", "l l"}));
  ASSERT_NE(ll_first, nullptr);
  ASSERT_NE(lo_first, nullptr);
  EXPECT_EQ(Encode(*ll_first, "llo"), std::vector<int32_t>({256, 'o'}));
  EXPECT_EQ(Encode(*lo_first, "llo"), std::vector<int32_t>({'l', 256}));
}

TEST(BpeTokenizerTest, AddedTokensAreCutOutLongestFirst) {
  auto t = Load(TinyFile({}));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Encode(*t, "xabcx"), std::vector<int32_t>({'x', 301, 'x'}));
  EXPECT_EQ(Encode(*t, "xabx"), std::vector<int32_t>({'x', 300, 'x'}));
  EXPECT_EQ(Encode(*t, "ababc"), std::vector<int32_t>({300, 301}));
  EXPECT_EQ(t->TokenId("abc"), 301);
  // Tokens matched on the normalised text (Hugging Face's default for non-special ones, Tar's
  // <I123>) are cut out after the raw ones, from what lies between them: "ab" (raw) wins over
  // "abc" (normalised) where both start, as in the reference's added vocabulary; after NFC,
  // a normalised token matches text that only its composed form spells.
  json file = TinyFile({}, /*nfc=*/true);
  file["added_tokens"][1]["normalized"] = true;
  file["added_tokens"].push_back({{"id", 302}, {"content", "\xC3\xA9!"}, {"special", false}});
  auto two_pass = Load(file);
  ASSERT_NE(two_pass, nullptr);
  EXPECT_EQ(Encode(*two_pass, "xabcx"), std::vector<int32_t>({'x', 300, 'c', 'x'}));
  EXPECT_EQ(Encode(*two_pass, "xbabc"), std::vector<int32_t>({'x', 'b', 300, 'c'}));
  EXPECT_EQ(Encode(*two_pass, "e\xCC\x81!"), std::vector<int32_t>({302}));
  EXPECT_EQ(two_pass->size(), 303);
  EXPECT_EQ(t->TokenId("x"), 'x');
  EXPECT_EQ(t->TokenId("missing"), -1);
  EXPECT_EQ(t->size(), 302);
}

TEST(BpeTokenizerTest, NfcMakesComposedAndDecomposedTextOneTokenSequence) {
  const std::string composed = "caf\xC3\xA9";       // "café", U+00E9
  const std::string decomposed = "cafe\xCC\x81";    // "cafe" + U+0301
  auto with = Load(TinyFile({}, /*nfc=*/true));
  auto without = Load(TinyFile({}));
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  EXPECT_EQ(Encode(*with, decomposed), Encode(*with, composed));
  EXPECT_NE(Encode(*without, decomposed), Encode(*without, composed));
}

TEST(BpeTokenizerTest, DecodeGivesTheTextBack) {
  auto t = Load(TinyFile({"h e", "l l", "he ll", "hell o"}));
  ASSERT_NE(t, nullptr);
  for (const std::string text :
       {"hello hello", "tabs\tand\nnewlines", "na\xC3\xAFve \xF0\x9F\xA6\x8A", "xabcx", ""}) {
    auto back = t->Decode(Encode(*t, text));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, text);
  }
}

TEST(BpeTokenizerTest, RefusesWhatItDoesNotImplementNamingTheField) {
  auto message = [](const json& file) {
    auto t = BpeTokenizer::FromJson(file.dump());
    EXPECT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(t.status().message());
  };
  json file = TinyFile({});
  file["model"]["type"] = "WordPiece";
  EXPECT_EQ(message(file), "tokenizer.json model.type: only \"BPE\" is supported");
  file = TinyFile({});
  file["added_tokens"][1]["lstrip"] = true;
  EXPECT_EQ(message(file), "tokenizer.json added_tokens[1].lstrip: only false is supported");
  file = TinyFile({});
  file["model"]["merges"] = json::array({"a b c"});
  EXPECT_EQ(message(file),
            "tokenizer.json model.merges[0]: must be \"left right\" or [left, right]");
  file = TinyFile({});
  file["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_EQ(message(file),
            "tokenizer.json pre_tokenizer: only ByteLevel, or a Sequence of regex Splits and a "
            "ByteLevel, is supported");
  file = TinyFile({});
  file["normalizer"] = {{"type", "NFKC"}};
  EXPECT_EQ(message(file), "tokenizer.json normalizer.type: only null or \"NFC\" is supported");

  auto t = Load(TinyFile({}));
  ASSERT_NE(t, nullptr);
  auto bad_text = t->Encode("ok \xFF");
  EXPECT_EQ(bad_text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_text.status().message(), "prompt: not valid UTF-8");
  auto bad_id = t->Decode({'a', 999});
  EXPECT_EQ(bad_id.status().message(), "ids[1]: 999 is not a token of this tokenizer");
  auto missing = BpeTokenizer::LoadFile("/nonexistent/tokenizer.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mulo::text
