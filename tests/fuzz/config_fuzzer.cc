// Fuzzes the JSON loaders: arbitrary bytes as a transformer config and a VQ config file,
// every method's options (read through its spec) and a whole family.json (whose components
// point at the tiny test family, so a document that passes the checks loads real models and
// validates its method defaults).
// Every outcome is a model or an error naming the file and key, never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/decode/method_registry.h"
#include "engine/decode/option_text.h"
#include "engine/model/model_set.h"
#include "engine/model/transformer_config.h"
#include "engine/model/vq_config.h"

namespace {

// A family directory whose component subdirectories link to the tiny test family's; the
// fuzzer writes family.json into it.
std::string FamilyDir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    auto* path = new std::string(std::string(tmp ? tmp : "/tmp") + "/config_fuzzer_" +
                                 std::to_string(getpid()));
    std::filesystem::create_directories(*path);
    const std::filesystem::path tiny =
        std::filesystem::absolute("tests/data/repository/tiny");
    for (const char* component : {"target", "vq", "conditioner", "drafter", "chain", "upsampler",
                                  "downsampler", "eagle"}) {
      std::error_code ignored;
      std::filesystem::create_directory_symlink(tiny / component,
                                                std::filesystem::path(*path) / component, ignored);
    }
    return path;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The loaders' own reading of a file (JsonFields::ParseFile), with whatever the text holds:
  // a config file, and a whole family.json. Families load real weights, so only text that
  // mentions components goes that far.
  const std::string dir = FamilyDir();
  std::ofstream(dir + "/config.json") << text;
  (void)mulo::engine::LoadTransformerConfig(dir + "/config.json");
  (void)mulo::engine::LoadVqConfig(dir + "/config.json");
  if (text.find("components") != std::string::npos) {
    std::ofstream(dir + "/family.json") << text;
    auto family = mulo::engine::LoadModelSet(dir, mulo::engine::LoadOptions());
    if (family.ok()) (void)mulo::engine::ValidateMethodDefaults(*family);
  }
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) {
    for (const mulo::engine::MethodEntry& method : mulo::engine::Methods()) {
      mulo::engine::MethodConfig config;
      (void)mulo::engine::ApplyOptionsJson(method, doc, "fuzz", config);
    }
  }
  return 0;
}
