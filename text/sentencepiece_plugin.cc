// Debian's libsentencepiece behind a C interface, built as its own shared object
// (libmulo_sentencepiece.so) that sentencepiece_backend.cc loads with dlopen.
//
// Why a plugin: libsentencepiece carries its own copy of protobuf-lite and exports its
// symbols. Linked into a process that also loads libprotobuf (gRPC: the server), the two
// interpose each other and the process crashes while protobuf registers its descriptors,
// before main. Loaded with RTLD_LOCAL | RTLD_DEEPBIND, the plugin and libsentencepiece resolve
// their symbols in themselves first and the rest of the process never sees them.
#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void SetError(const std::string& message, char* error, size_t size) {
  if (error == nullptr || size == 0) return;
  std::strncpy(error, message.c_str(), size - 1);
  error[size - 1] = '\0';
}

}  // namespace

extern "C" {

// A processor for the model at `path`, or null with `error` set.
__attribute__((visibility("default"))) void* mulo_spm_load(const char* path, char* error,
                                                           size_t error_size) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  const auto status = processor->Load(path);
  if (!status.ok()) {
    SetError(status.ToString(), error, error_size);
    delete processor;
    return nullptr;
  }
  return processor;
}

__attribute__((visibility("default"))) void mulo_spm_free(void* processor) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(processor);
}

// The ids of `text` in a malloc'ed array (freed by the caller with free()); -1 with `error`.
__attribute__((visibility("default"))) int mulo_spm_encode(void* processor, const char* text,
                                                           size_t text_size, int** ids,
                                                           size_t* count, char* error,
                                                           size_t error_size) {
  std::vector<int> pieces;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(processor)->Encode(
      std::string(text, text_size), &pieces);
  if (!status.ok()) {
    SetError(status.ToString(), error, error_size);
    return -1;
  }
  *count = pieces.size();
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (pieces.empty() ? 1 : pieces.size())));
  if (*ids == nullptr) {
    SetError("out of memory", error, error_size);
    return -1;
  }
  if (!pieces.empty()) std::memcpy(*ids, pieces.data(), sizeof(int) * pieces.size());
  return 0;
}

// eos, pad, piece count.
__attribute__((visibility("default"))) void mulo_spm_ids(void* processor, int* eos, int* pad,
                                                         int* size) {
  const auto* p = static_cast<sentencepiece::SentencePieceProcessor*>(processor);
  *eos = p->eos_id();
  *pad = p->pad_id();
  *size = p->GetPieceSize();
}

}  // extern "C"
