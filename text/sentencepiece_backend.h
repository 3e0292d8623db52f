// Debian's libsentencepiece behind a plain interface, loaded at run time from its own shared
// object (libmulo_sentencepiece.so, sentencepiece_plugin.cc): libsentencepiece exports its own
// copy of protobuf-lite, which crashes a process that also links libprotobuf (the server,
// through gRPC) unless it is kept out of the process's global symbols. The plugin's header
// declares `absl::string_view` itself too, which collides with Debian's Abseil: no Abseil here
// (t5_tokenizer.h wraps this in absl::Status).
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
