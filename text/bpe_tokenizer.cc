#include "text/bpe_tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace mulo::text {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer pattern: what a ByteLevel pre-tokenizer with use_regex splits by.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

absl::Status FieldError(std::string_view field, std::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer.json ", std::string(field), ": ", std::string(rule)));
}

// Oniguruma's \s and \S are Unicode's White_Space; ICU's \s leaves out U+000B and U+0085.
std::string WithUnicodeWhiteSpace(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += '\\';
        out += next;
      }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

bool ValidUtf8(std::string_view text) {
  int32_t i = 0;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto length = static_cast<int32_t>(text.size());
  while (i < length) {
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c < 0) return false;
  }
  return true;
}

// The characters of a UTF-8 string, each its own string.
std::vector<std::string> Characters(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t n = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : 4;
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

struct BpeTokenizer::Pieces {
  // The Splits in order: each cuts every piece the one before left (DeepSeek's tokenizers
  // chain several).
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns;
  const icu::Normalizer2* nfc = nullptr;  // ICU's singleton; null = no normaliser
};

BpeTokenizer::BpeTokenizer() : pieces_(std::make_unique<Pieces>()) {}
BpeTokenizer::~BpeTokenizer() = default;

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("tokenizer: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  auto tokenizer = FromJson(text.str());
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(path, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

namespace {

// The BPE model's options this tokenizer does not implement must be off.
absl::Status CheckModelOptions(const json& model) {
  if (model.value("byte_fallback", false)) {
    return FieldError("model.byte_fallback", "not supported (byte-level BPE needs none)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      return FieldError(absl::StrCat("model.", key), "only empty is supported");
    }
  }
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    return FieldError("model.dropout", "only null is supported");
  }
  return absl::OkStatus();
}

// model.merges as "left right" keys in rank order (either of the file's two spellings).
absl::StatusOr<std::vector<std::string>> MergeKeys(const json& model) {
  const json& merges = model.value("merges", json::array());
  if (!merges.is_array()) return FieldError("model.merges", "must be a list");
  std::vector<std::string> keys;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string key;
    if (m.is_string()) {
      key = m.get<std::string>();
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      key = m[0].get<std::string>() + " " + m[1].get<std::string>();
    }
    if (std::count(key.begin(), key.end(), ' ') != 1) {
      return FieldError(absl::StrCat("model.merges[", rank, "]"),
                        "must be \"left right\" or [left, right]");
    }
    keys.push_back(std::move(key));
  }
  return keys;
}

// The pre-tokenizer's split patterns: ByteLevel (GPT-2's pattern), or regex Splits then a
// ByteLevel that only maps bytes.
absl::StatusOr<std::vector<std::string>> PreTokenizerPatterns(const json& pre) {
  std::vector<std::string> patterns;
  auto byte_level = [](const json& p, const std::string& field) -> absl::Status {
    if (p.value("add_prefix_space", false)) {
      return FieldError(absl::StrCat(field, ".add_prefix_space"), "only false is supported");
    }
    return absl::OkStatus();
  };
  if (pre.is_object() && pre.value("type", "") == "ByteLevel") {
    if (auto s = byte_level(pre, "pre_tokenizer"); !s.ok()) return s;
    if (!pre.value("use_regex", true)) {
      return FieldError("pre_tokenizer.use_regex", "a lone ByteLevel must split (true)");
    }
    patterns.push_back(kGpt2Pattern);
  } else if (pre.is_object() && pre.value("type", "") == "Sequence" &&
             pre.value("pretokenizers", json()).is_array() &&
             pre["pretokenizers"].size() >= 2) {
    const json& steps = pre["pretokenizers"];
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      const json& split = steps[i];
      const std::string field = absl::StrCat("pre_tokenizer.pretokenizers[", i, "]");
      if (split.value("type", "") != "Split" ||
          !split.value("pattern", json()).value("Regex", json()).is_string()) {
        return FieldError(field, "must be a Split with a Regex");
      }
      if (split.value("behavior", "") != "Isolated" || split.value("invert", false)) {
        return FieldError(field + ".behavior", "only \"Isolated\", not inverted, is supported");
      }
      patterns.push_back(split["pattern"]["Regex"].get<std::string>());
    }
    const json& bytes = steps.back();
    const std::string field = absl::StrCat("pre_tokenizer.pretokenizers[", steps.size() - 1, "]");
    if (bytes.value("type", "") != "ByteLevel" || bytes.value("use_regex", true)) {
      return FieldError(field, "must be a ByteLevel with use_regex false");
    }
    if (auto s = byte_level(bytes, field); !s.ok()) return s;
  } else {
    return FieldError("pre_tokenizer",
                      "only ByteLevel, or a Sequence of regex Splits and a ByteLevel, is "
                      "supported");
  }
  return patterns;
}

// The normalizer: none (null) or ICU's NFC.
absl::StatusOr<const icu::Normalizer2*> Normalizer(const json& normalizer) {
  if (normalizer.is_null()) return nullptr;
  if (normalizer.value("type", "") != "NFC") {
    return FieldError("normalizer.type", "only null or \"NFC\" is supported");
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return absl::InternalError("tokenizer: ICU has no NFC normaliser");
  return nfc;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromJson(std::string_view text) {
  const json file = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!file.is_object()) return FieldError("(file)", "not a JSON object");
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());

  const json& model = file.value("model", json());
  if (!model.is_object() || model.value("type", "") != "BPE") {
    return FieldError("model.type", "only \"BPE\" is supported");
  }
  if (auto options = CheckModelOptions(model); !options.ok()) return options;
  const json& vocab = model.value("vocab", json());
  if (!vocab.is_object() || vocab.empty()) return FieldError("model.vocab", "missing or empty");
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max() / 2) {
      return FieldError(absl::StrCat("model.vocab[\"", token, "\"]"), "must be an id >= 0");
    }
    t->vocab_[token] = id.get<int32_t>();
    t->size_ = std::max(t->size_, id.get<int32_t>() + 1);
  }
  auto merges = MergeKeys(model);
  if (!merges.ok()) return merges.status();
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    // The first rank of a pair wins.
    t->merge_rank_.emplace((*merges)[rank], static_cast<int32_t>(rank));
  }

  const json& added = file.value("added_tokens", json::array());
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    const std::string field = absl::StrCat("added_tokens[", i, "]");
    if (!a.is_object() || !a.value("id", json()).is_number_integer() ||
        !a.value("content", json()).is_string() || a["content"].get<std::string>().empty()) {
      return FieldError(field, "needs an integer id and a non-empty content");
    }
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      if (a.value(flag, false)) {
        return FieldError(absl::StrCat(field, ".", flag), "only false is supported");
      }
    }
    const int32_t id = a["id"].get<int32_t>();
    const std::string content = a["content"].get<std::string>();
    // Hugging Face's default: special tokens match the raw text, the others the normalised.
    const bool normalized = a.value("normalized", !a.value("special", false));
    (normalized ? t->normalized_added_ : t->raw_added_).Add(content, id);
    t->size_ = std::max(t->size_, id + 1);
  }

  auto nfc = Normalizer(file.value("normalizer", json()));
  if (!nfc.ok()) return nfc.status();
  t->pieces_->nfc = *nfc;
  UErrorCode status = U_ZERO_ERROR;

  auto patterns_or = PreTokenizerPatterns(file.value("pre_tokenizer", json()));
  if (!patterns_or.ok()) return patterns_or.status();
  const std::vector<std::string>& patterns = *patterns_or;
  for (size_t i = 0; i < patterns.size(); ++i) {
    UParseError where;
    t->pieces_->patterns.emplace_back(icu::RegexPattern::compile(
        icu::UnicodeString::fromUTF8(WithUnicodeWhiteSpace(patterns[i])), 0, where, status));
    if (U_FAILURE(status)) {
      return FieldError("pre_tokenizer",
                        absl::StrCat("ICU cannot compile pattern ", i, " (", u_errorName(status),
                                     " at offset ", where.offset, ")"));
    }
  }

  t->id_to_token_.assign(t->size_, "");
  t->is_added_.assign(t->size_, false);
  for (const auto& [token, id] : t->vocab_) t->id_to_token_[id] = token;
  for (const AddedTokens* set : {&t->raw_added_, &t->normalized_added_}) {
    for (const auto& [content, id] : set->ids) {
      t->id_to_token_[id] = content;
      t->is_added_[id] = true;
    }
  }
  return t;
}

int32_t BpeTokenizer::TokenId(std::string_view token) const {
  for (const AddedTokens* set : {&raw_added_, &normalized_added_}) {
    if (const auto added = set->ids.find(std::string(token)); added != set->ids.end()) {
      return added->second;
    }
  }
  const auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? -1 : it->second;
}

void BpeTokenizer::AddedTokens::Add(const std::string& content, int32_t id) {
  ids[content] = id;
  first_byte[static_cast<unsigned char>(content[0])] = true;
  if (std::find(lengths.begin(), lengths.end(), content.size()) == lengths.end()) {
    lengths.push_back(content.size());
    std::sort(lengths.rbegin(), lengths.rend());  // longest first
  }
}

std::pair<int32_t, size_t> BpeTokenizer::AddedTokens::Match(std::string_view text,
                                                            size_t i) const {
  if (!first_byte[static_cast<unsigned char>(text[i])]) return {-1, 0};
  for (size_t n : lengths) {
    if (i + n > text.size()) continue;
    if (const auto it = ids.find(std::string(text.substr(i, n))); it != ids.end()) {
      return {it->second, n};
    }
  }
  return {-1, 0};
}

absl::Status BpeTokenizer::Split(std::string_view text, const AddedTokens& set,
                                 const std::function<absl::Status(std::string_view)>& plain,
                                 std::vector<int32_t>& ids) const {
  size_t begin = 0, i = 0;
  while (i < text.size()) {
    const auto [id, length] = set.Match(text, i);
    if (id < 0) {
      ++i;
      continue;
    }
    if (i > begin) {
      if (auto s = plain(text.substr(begin, i - begin)); !s.ok()) return s;
    }
    ids.push_back(id);
    i += length;
    begin = i;
  }
  if (begin < text.size()) return plain(text.substr(begin));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> BpeTokenizer::Encode(std::string_view text,
                                                          std::string_view field) const {
  if (!ValidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": not valid UTF-8"));
  }
  std::vector<int32_t> ids;
  // 1. Raw added tokens out of the raw text; 2. the rest normalised, its own added tokens cut
  // out of it; 3-4. what is left pre-tokenized and merged.
  auto status = Split(text, raw_added_, [&](std::string_view segment) -> absl::Status {
    return EncodeText(segment, field, ids);
  }, ids);
  if (!status.ok()) return status;
  return ids;
}

absl::Status BpeTokenizer::EncodeText(std::string_view text, std::string_view field,
                                      std::vector<int32_t>& ids) const {
  std::string normalized(text);
  if (pieces_->nfc != nullptr) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::UnicodeString input = icu::UnicodeString::fromUTF8(
        icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
    normalized.clear();
    pieces_->nfc->normalize(input, status).toUTF8String(normalized);
    if (U_FAILURE(status)) {
      return absl::InternalError(
          absl::StrCat(std::string(field), ": ICU: ", u_errorName(status)));
    }
  }
  return Split(normalized, normalized_added_, [&](std::string_view piece) -> absl::Status {
    return PreTokenize(piece, field, ids);
  }, ids);
}

namespace {

// Pre-tokenizer step 3 from Split `level` on: every match of the pattern and every gap between
// matches is a piece, cut in turn by the next Split; `leaf` gets each final piece as UTF-8.
absl::Status SplitPieces(const std::vector<std::unique_ptr<icu::RegexPattern>>& patterns,
                         size_t level, const icu::UnicodeString& input, std::string_view field,
                         const std::function<void(const std::string&)>& leaf) {
  if (level == patterns.size()) {
    std::string bytes;
    input.toUTF8String(bytes);
    leaf(bytes);
    return absl::OkStatus();
  }
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(patterns[level]->matcher(input, status));
  if (U_FAILURE(status)) {
    return absl::InternalError(absl::StrCat(std::string(field), ": ICU: ", u_errorName(status)));
  }
  int32_t done = 0;
  auto piece = [&](int32_t from, int32_t to) -> absl::Status {
    if (to <= from) return absl::OkStatus();
    return SplitPieces(patterns, level + 1, icu::UnicodeString(input, from, to - from), field,
                       leaf);
  };
  while (matcher->find(status) && U_SUCCESS(status)) {
    const int32_t start = matcher->start(status), end = matcher->end(status);
    if (auto s = piece(done, start); !s.ok()) return s;
    if (auto s = piece(start, end); !s.ok()) return s;
    done = end;
  }
  if (U_FAILURE(status)) {
    return absl::InternalError(absl::StrCat(std::string(field), ": ICU: ", u_errorName(status)));
  }
  return piece(done, input.length());
}

}  // namespace

absl::Status BpeTokenizer::PreTokenize(std::string_view text, std::string_view field,
                                       std::vector<int32_t>& ids) const {
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  // 3. Split (each Split cutting the pieces the one before left), then 4. merge each piece.
  return SplitPieces(pieces_->patterns, 0, input, field, [&](const std::string& bytes) {
    EncodePiece(alphabet_.Encode(bytes), ids);
  });
}

void BpeTokenizer::EncodePiece(const std::string& symbols_text, std::vector<int32_t>& ids) const {
  if (const auto whole = vocab_.find(symbols_text); whole != vocab_.end()) {
    ids.push_back(whole->second);
    return;
  }
  std::vector<std::string> symbols = Characters(symbols_text);
  while (symbols.size() > 1) {
    // The adjacent pair of lowest rank; all its occurrences merge, left to right.
    int32_t best = std::numeric_limits<int32_t>::max();
    std::string left, right;
    for (size_t k = 0; k + 1 < symbols.size(); ++k) {
      const auto it = merge_rank_.find(symbols[k] + " " + symbols[k + 1]);
      if (it != merge_rank_.end() && it->second < best) {
        best = it->second;
        left = symbols[k];
        right = symbols[k + 1];
      }
    }
    if (best == std::numeric_limits<int32_t>::max()) break;
    std::vector<std::string> merged;
    for (size_t k = 0; k < symbols.size(); ++k) {
      if (k + 1 < symbols.size() && symbols[k] == left && symbols[k + 1] == right) {
        merged.push_back(left + right);
        ++k;
      } else {
        merged.push_back(std::move(symbols[k]));
      }
    }
    symbols = std::move(merged);
  }
  for (const std::string& s : symbols) {
    // Every byte of the alphabet is in a byte-level vocabulary; a file without some of them
    // loses that byte, as the reference (with no unknown token) does.
    if (const auto it = vocab_.find(s); it != vocab_.end()) ids.push_back(it->second);
  }
}

absl::StatusOr<std::string> BpeTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= size_ || id_to_token_[id].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ids[", i, "]: ", id, " is not a token of this tokenizer"));
    }
    if (is_added_[id]) {
      out += id_to_token_[id];
      continue;
    }
    auto bytes = alphabet_.Decode(id_to_token_[id]);
    if (!bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("ids[", i, "]: token ", id, " is not written in the byte-level alphabet"));
    }
    out += *bytes;
  }
  return out;
}

}  // namespace mulo::text
