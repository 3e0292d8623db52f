#include "text/sentencepiece_backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

namespace mulo::text {
namespace {

constexpr char kPlugin[] = "libmulo_sentencepiece.so";

// Where the plugin may be: $MULO_SENTENCEPIECE_PLUGIN, beside the executable (an installed
// server), in Bazel's output tree (bazel-bin/text/ beside bazel-bin/server/) and in the
// executable's runfiles (tests, bazel run).
std::vector<std::string> PluginCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("MULO_SENTENCEPIECE_PLUGIN"); env != nullptr && *env) {
    out.push_back(env);
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    const std::string path(exe, n);
    const std::string dir = path.substr(0, path.rfind('/'));
    out.push_back(dir + "/" + kPlugin);
    out.push_back(dir + "/../text/" + kPlugin);
    out.push_back(path + ".runfiles/mulo/text/" + kPlugin);
  }
  for (const char* root : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* env = std::getenv(root); env != nullptr && *env) {
      out.push_back(std::string(env) + "/mulo/text/" + kPlugin);
    }
  }
  return out;
}

}  // namespace

struct SentencePieceBackend::Impl {
  void* library = nullptr;
  void* processor = nullptr;
  void (*free_processor)(void*) = nullptr;
  int (*encode)(void*, const char*, size_t, int**, size_t*, char*, size_t) = nullptr;
  int eos = -1, pad = -1, size = 0;

  ~Impl() {
    if (processor != nullptr) free_processor(processor);
    if (library != nullptr) dlclose(library);
  }
};

SentencePieceBackend::SentencePieceBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceBackend::~SentencePieceBackend() = default;

std::unique_ptr<SentencePieceBackend> SentencePieceBackend::Load(const std::string& path,
                                                                 std::string* error) {
  auto impl = std::make_unique<Impl>();
  std::string tried;
  for (const std::string& candidate : PluginCandidates()) {
    impl->library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (impl->library != nullptr) break;
    tried += (tried.empty() ? "" : ", ") + candidate;
  }
  if (impl->library == nullptr) {
    *error = std::string("the sentencepiece plugin ") + kPlugin + " was not found (tried " +
             tried + "; set MULO_SENTENCEPIECE_PLUGIN)";
    return nullptr;
  }
  auto load = reinterpret_cast<void* (*)(const char*, char*, size_t)>(
      dlsym(impl->library, "mulo_spm_load"));
  auto ids = reinterpret_cast<void (*)(void*, int*, int*, int*)>(
      dlsym(impl->library, "mulo_spm_ids"));
  impl->free_processor = reinterpret_cast<void (*)(void*)>(dlsym(impl->library, "mulo_spm_free"));
  impl->encode = reinterpret_cast<int (*)(void*, const char*, size_t, int**, size_t*, char*,
                                          size_t)>(dlsym(impl->library, "mulo_spm_encode"));
  if (load == nullptr || ids == nullptr || impl->free_processor == nullptr ||
      impl->encode == nullptr) {
    *error = std::string(kPlugin) + " lacks the mulo_spm_* functions";
    return nullptr;
  }
  char message[512] = "";
  impl->processor = load(path.c_str(), message, sizeof(message));
  if (impl->processor == nullptr) {
    *error = message;
    return nullptr;
  }
  ids(impl->processor, &impl->eos, &impl->pad, &impl->size);
  return std::unique_ptr<SentencePieceBackend>(new SentencePieceBackend(std::move(impl)));
}

bool SentencePieceBackend::Encode(const std::string& text, std::vector<int>* ids,
                                  std::string* error) const {
  int* out = nullptr;
  size_t count = 0;
  char message[512] = "";
  if (impl_->encode(impl_->processor, text.data(), text.size(), &out, &count, message,
                    sizeof(message)) != 0) {
    *error = message;
    return false;
  }
  ids->assign(out, out + count);
  std::free(out);
  return true;
}

int SentencePieceBackend::eos_id() const { return impl_->eos; }
int SentencePieceBackend::pad_id() const { return impl_->pad; }
int SentencePieceBackend::size() const { return impl_->size; }

}  // namespace mulo::text
