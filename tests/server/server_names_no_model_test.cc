// The server knows no model (issue 62): no file under server/ names a decoding method, a model
// architecture or a family, in code, in a string or in an include. Methods come from the
// engine's registry (engine::Methods()) and architectures from engine::Architectures(), so a
// new one is checked without editing this test; the families are the ones we serve. Comments
// may name them (they explain why). The checker's controls feed it code that names each kind
// and must fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/decode/method_registry.h"
#include "engine/model/architectures.h"

namespace mulo::server {
namespace {

namespace fs = std::filesystem;

// Family names as words of identifiers and file names: CamelCase (TarPromptEncoder, ForJanus)
// and snake_case (janus_prompt.h, t5_tokenizer).
const char* const kFamilies[] = {"Tar", "T5", "Janus", "LlamaGen", "Qwen"};
// family.json component keys that only one family has.
const char* const kFamilyComponents[] = {"mllm", "t5"};
// "mulo" is the project before it is a method: the HTTP extension key and metric prefix.
const char* const kProjectName = "mulo";

std::set<std::string> ForbiddenLiterals() {
  std::set<std::string> names;
  for (const auto& entry : engine::Methods()) {
    // A resolver (auto) is the API's word for "let the server choose", as OpenAI's "auto".
    if (!entry.resolve) names.insert(entry.name);
  }
  for (const auto& architecture : engine::Architectures()) names.insert(architecture.name);
  for (const char* key : kFamilyComponents) names.insert(key);
  names.erase(kProjectName);
  return names;
}

// A line without its // comment (a // inside a string ends the scan early: conservative).
std::string WithoutComment(const std::string& line) {
  const size_t slash = line.find("//");
  return slash == std::string::npos ? line : line.substr(0, slash);
}

// What `text` (one source file) names, one finding per line: "LINE: what".
std::vector<std::string> Findings(const std::string& text) {
  static const std::regex kLiteral(R"re("((?:[^"\\]|\\.)*)")re");
  std::string camel, snake;
  for (const char* family : kFamilies) {
    std::string lower = family;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    camel += (camel.empty() ? "" : "|") + std::string(family);
    snake += (snake.empty() ? "" : "|") + lower;
  }
  // A word ends where a lower-case letter or digit does not follow: Target is not Tar.
  const std::regex family_words[] = {
      std::regex("(^|[^A-Z])(" + camel + ")(?=$|[^a-z0-9])"),
      std::regex("(^|[^A-Za-z])(" + snake + ")(?=$|[^a-z0-9])"),
  };
  const std::set<std::string> literals = ForbiddenLiterals();
  std::vector<std::string> findings;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const bool include = line.rfind("#include", 0) == 0;
    const std::string code = WithoutComment(line);
    std::string outside_literals;
    auto begin = std::sregex_iterator(code.begin(), code.end(), kLiteral);
    size_t last = 0;
    for (auto it = begin; it != std::sregex_iterator(); ++it) {
      if (literals.count((*it)[1].str()) > 0) {
        findings.push_back(std::to_string(number) + ": the literal " + it->str());
      }
      outside_literals += code.substr(last, it->position() - last) + " ";
      last = it->position() + it->length();
    }
    outside_literals += code.substr(last);
    const std::string& scanned = include ? code : outside_literals;
    for (const std::regex& family_word : family_words) {
      std::smatch match;
      if (std::regex_search(scanned, match, family_word)) {
        findings.push_back(std::to_string(number) + ": the family word " + match[2].str());
        break;
      }
    }
  }
  return findings;
}

TEST(ServerNamesNoModel, ControlsFindEachKind) {
  EXPECT_EQ(Findings("  if (method == \"eagle\") return;\n").size(), 1u);
  EXPECT_EQ(Findings("  auto config = DefaultMethodConfig(\"ar\", models);\n").size(), 1u);
  EXPECT_EQ(Findings("  if (arch == \"janus\") {}\n").size(), 1u);  // the architecture
  EXPECT_EQ(Findings("  if (arch == \"janus\") ForJanus();\n").size(), 2u);  // and a family word
  EXPECT_EQ(Findings("class JanusPromptEncoder final {};\n").size(), 1u);
  EXPECT_EQ(Findings("#include \"text/tar_prompt.h\"\n").size(), 1u);
  EXPECT_EQ(Findings("  auto t = T5Tokenizer::Load(path);\n").size(), 1u);
  EXPECT_EQ(Findings("  auto dir = ComponentDir(dir, \"mllm\");\n").size(), 1u);
  // Not findings: comments, the project's own name, words that merely contain a family.
  EXPECT_TRUE(Findings("  // Tar's MLLM reads prompt ids; \"eagle\" drafts.\n").empty());
  EXPECT_TRUE(Findings("  json[\"mulo\"] = stats;  // the extension key\n").empty());
  EXPECT_TRUE(Findings("  const auto& target = start + tarball;\n").empty());
}

TEST(ServerNamesNoModel, NoServerFileNamesAMethodArchitectureOrFamily) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator("server")) {
    const auto extension = entry.path().extension();
    if (extension == ".cc" || extension == ".h") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GT(files.size(), 40u) << "the server's sources are not in the runfiles";
  for (const fs::path& path : files) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    for (const std::string& finding : Findings(text.str())) {
      ADD_FAILURE() << path.string() << ":" << finding;
    }
  }
}

}  // namespace
}  // namespace mulo::server
