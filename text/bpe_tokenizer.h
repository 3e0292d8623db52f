// A byte-level BPE tokenizer read from a Hugging Face tokenizer.json: the tokenizers of the
// LLaMA 3, Qwen2 and DeepSeek families (Qwen2.5 for Tar's MLLM stage, DeepSeek's for
// Janus-Pro). Encoding, as the reference does:
//   1. added tokens ("<|im_start|>", Tar's "<I123>") are cut out, leftmost first and the
//      longest where several start at one place, each its own id: those marked "normalized":
//      false from the raw text, the others from the text after normalisation (NFC when the
//      file says so), as the reference's added vocabulary does;
//   2. what lies between them is normalised;
//   3. split by the pre-tokenizer's regexes in turn (behaviour "Isolated": every match and
//      every gap between matches is a piece, which the next Split cuts further; DeepSeek's
//      tokenizers, Janus-Pro's among them, chain several), or GPT-2's pattern for a plain
//      ByteLevel pre-tokenizer;
//   4. each piece's bytes are written in the byte-level alphabet (byte_level.h) and merged by
//      BPE: the adjacent pair with the lowest merge rank first, until no pair has a rank.
// Unicode classes (\p{L}, \p{N}) and NFC come from ICU (Debian's libicu). Oniguruma's \s (the
// reference's regex engine) is Unicode's White_Space; the pattern is rewritten to say so, as
// ICU's \s leaves out U+000B and U+0085.
//
// Anything a file asks for that this does not implement (another model type, byte fallback,
// an added token that strips spaces...) is refused at load naming the field.
#ifndef MULO_TEXT_BPE_TOKENIZER_H_
#define MULO_TEXT_BPE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "text/byte_level.h"

namespace mulo::text {

class BpeTokenizer {
 public:
  // Reads tokenizer.json (the file's path) or its text.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromJson(std::string_view json);
  ~BpeTokenizer();

  // INVALID_ARGUMENT naming `field` when `text` is not valid UTF-8.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              std::string_view field = "prompt") const;
  // The text of `ids` (added tokens as written); INVALID_ARGUMENT for an id outside the
  // vocabulary. Bytes that do not form UTF-8 on their own (a token split inside a character)
  // are kept as they are.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const;

  // The id of a token written in the vocabulary's alphabet, or of an added token; -1 if none.
  int32_t TokenId(std::string_view token) const;
  // One past the largest id (the BPE vocabulary and the added tokens).
  int32_t size() const { return size_; }

 private:
  struct Pieces;  // the compiled pre-tokenizer and normaliser (ICU objects)
  BpeTokenizer();
  absl::Status EncodeText(std::string_view text, std::string_view field,
                          std::vector<int32_t>& ids) const;
  void EncodePiece(const std::string& symbols, std::vector<int32_t>& ids) const;

  ByteLevelAlphabet alphabet_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;        // "" where an id has no token
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  // Added tokens: content -> id, their lengths (longest first) and the bytes they start with
  // (most of a text's positions start none, and Tar adds 65,536 of them).
  struct AddedTokens {
    std::unordered_map<std::string, int32_t> ids;
    std::vector<size_t> lengths;
    std::array<bool, 256> first_byte{};
    void Add(const std::string& content, int32_t id);
    // The id and length of the longest token starting at text[i]; {-1, 0} when none does.
    std::pair<int32_t, size_t> Match(std::string_view text, size_t i) const;
  };
  // Cuts `text` at the tokens of `set`: `plain` for the text between them, their ids to `ids`.
  absl::Status Split(std::string_view text, const AddedTokens& set,
                     const std::function<absl::Status(std::string_view)>& plain,
                     std::vector<int32_t>& ids) const;
  absl::Status PreTokenize(std::string_view text, std::string_view field,
                           std::vector<int32_t>& ids) const;
  AddedTokens raw_added_;         // "normalized": false (special tokens): cut from the raw text
  AddedTokens normalized_added_;  // "normalized": true: cut from the normalised text
  std::vector<bool> is_added_;
  std::unique_ptr<Pieces> pieces_;
  int32_t size_ = 0;
};

}  // namespace mulo::text

#endif  // MULO_TEXT_BPE_TOKENIZER_H_
