// Debian's libsentencepiece behind a plain interface. Kept apart because sentencepiece's header
// declares `absl::string_view` itself, which collides with Debian's Abseil: this file and its
// .cc include no Abseil header (t5_tokenizer.h wraps it in absl::Status).
#ifndef MULO_TEXT_SENTENCEPIECE_BACKEND_H_
#define MULO_TEXT_SENTENCEPIECE_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

namespace mulo::text {

class SentencePieceBackend {
 public:
  // A spiece.model; null with `error` set when it does not load.
  static std::unique_ptr<SentencePieceBackend> Load(const std::string& path, std::string* error);
  ~SentencePieceBackend();

  // The model's ids for `text` (no end-of-sequence added); false with `error` on failure.
  bool Encode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  int eos_id() const;
  int pad_id() const;
  int size() const;

 private:
  struct Impl;
  explicit SentencePieceBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mulo::text

#endif  // MULO_TEXT_SENTENCEPIECE_BACKEND_H_
