#include "text/t5_tokenizer.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mulo::text {

absl::StatusOr<std::unique_ptr<T5Tokenizer>> T5Tokenizer::Load(const std::string& spiece_model) {
  std::string error;
  auto backend = SentencePieceBackend::Load(spiece_model, &error);
  if (backend == nullptr) {
    return absl::NotFoundError(absl::StrCat("tokenizer: ", spiece_model, ": ", error));
  }
  if (backend->eos_id() < 0 || backend->pad_id() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer: ", spiece_model, ": the model needs an end-of-sequence and a pad piece "
        "(T5's are </s> = 1 and <pad> = 0)"));
  }
  return std::unique_ptr<T5Tokenizer>(new T5Tokenizer(std::move(backend)));
}

absl::StatusOr<PaddedTokens> T5Tokenizer::Encode(std::string_view text, int64_t max_length,
                                                 std::string_view field) const {
  if (max_length < 1) return absl::InvalidArgumentError("max_length: must be >= 1");
  std::vector<int> pieces;
  std::string error;
  if (!backend_->Encode(std::string(text), &pieces, &error)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", error));
  }
  PaddedTokens out;
  const size_t kept = std::min<size_t>(pieces.size(), static_cast<size_t>(max_length - 1));
  out.ids.assign(pieces.begin(), pieces.begin() + kept);
  out.ids.push_back(backend_->eos_id());
  out.length = static_cast<int64_t>(out.ids.size());
  out.mask.assign(out.length, 1);
  out.ids.resize(max_length, backend_->pad_id());
  out.mask.resize(max_length, 0);
  return out;
}

}  // namespace mulo::text
