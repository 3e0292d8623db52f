// FLAN-T5's tokenizer (LlamaGen t2i's text encoder input): the model's own sentencepiece
// (spiece.model, through Debian's libsentencepiece), then upstream's t2i padding: the ids, an
// end-of-sequence token, truncated to max_length (keeping the first max_length - 1 ids and the
// end token) and padded with the pad id to exactly max_length (LlamaGen: 120), with the mask of
// real tokens.
#ifndef MULO_TEXT_T5_TOKENIZER_H_
#define MULO_TEXT_T5_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "text/sentencepiece_backend.h"

namespace mulo::text {

struct PaddedTokens {
  std::vector<int64_t> ids;   // max_length
  std::vector<int64_t> mask;  // 1 for a token (the end token included), 0 for padding
  int64_t length = 0;         // tokens before the padding
};

class T5Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<T5Tokenizer>> Load(const std::string& spiece_model);

  // INVALID_ARGUMENT naming `field` for text that is not UTF-8; `max_length` >= 1.
  absl::StatusOr<PaddedTokens> Encode(std::string_view text, int64_t max_length,
                                      std::string_view field = "prompt") const;
  int eos_id() const { return backend_->eos_id(); }
  int pad_id() const { return backend_->pad_id(); }

 private:
  explicit T5Tokenizer(std::unique_ptr<SentencePieceBackend> backend)
      : backend_(std::move(backend)) {}
  std::unique_ptr<SentencePieceBackend> backend_;
};

}  // namespace mulo::text

#endif  // MULO_TEXT_T5_TOKENIZER_H_
