#include "text/sentencepiece_backend.h"

#include <sentencepiece_processor.h>

#include <utility>

namespace mulo::text {

struct SentencePieceBackend::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceBackend::SentencePieceBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceBackend::~SentencePieceBackend() = default;

std::unique_ptr<SentencePieceBackend> SentencePieceBackend::Load(const std::string& path,
                                                                 std::string* error) {
  auto impl = std::make_unique<Impl>();
  const auto status = impl->processor.Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<SentencePieceBackend>(new SentencePieceBackend(std::move(impl)));
}

bool SentencePieceBackend::Encode(const std::string& text, std::vector<int>* ids,
                                  std::string* error) const {
  const auto status = impl_->processor.Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int SentencePieceBackend::eos_id() const { return impl_->processor.eos_id(); }
int SentencePieceBackend::pad_id() const { return impl_->processor.pad_id(); }
int SentencePieceBackend::size() const { return impl_->processor.GetPieceSize(); }

}  // namespace mulo::text
