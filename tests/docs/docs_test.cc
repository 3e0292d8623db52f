// The README is a front door and docs/ holds the details: every relative link and image in
// README.md and docs/*.md resolves inside the repository, the README's method table lists
// exactly the registry's methods, docs/methods.md's components and options tables are the
// registry's and the specs', and the README stays short. The checker's own controls feed it broken Markdown that must fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/decode/method_registry.h"
#include "engine/decode/option_text.h"
#include "tests/docs/markdown_links.h"

namespace mulo::docs {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// README.md and every Markdown file under docs/, from the test's runfiles (the repository
// root is the working directory).
std::vector<fs::path> DocumentationFiles() {
  std::vector<fs::path> files = {"README.md"};
  for (const auto& entry : fs::recursive_directory_iterator("docs")) {
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A scratch repository for the control cases.
fs::path Scratch(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const fs::path root = fs::path(dir ? dir : "/tmp") / name;
  fs::remove_all(root);
  fs::create_directories(root / "docs");
  return root;
}

void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(DocsTest, EveryLinkAndImageResolvesInsideTheRepository) {
  const std::vector<fs::path> files = DocumentationFiles();
  ASSERT_GE(files.size(), 8u) << "docs/ should hold the moved sections";
  size_t links = 0;
  for (const fs::path& file : files) {
    links += ExtractLinks(Read(file)).size();
    for (const std::string& problem : CheckLinks(".", file)) ADD_FAILURE() << problem;
  }
  EXPECT_GE(links, 40u) << "the README and docs link to each other";
}

TEST(DocsTest, NothingOutsideTheRepositoryIsReferenced) {
  for (const fs::path& file : DocumentationFiles()) {
    const std::string text = Read(file);
    for (const std::string outside : {"../shared", "/work/", "DESIGN.md"}) {
      EXPECT_EQ(text.find(outside), std::string::npos) << file << " mentions " << outside;
    }
  }
}

TEST(DocsTest, TheReadmeIsAFrontDoor) {
  const std::string readme = Read("README.md");
  const auto lines = std::count(readme.begin(), readme.end(), '\n');
  EXPECT_LE(lines, 250) << "details belong in docs/";
  // The serve and test commands are on the first screen (its first 40 lines).
  std::istringstream in(readme);
  std::string first_screen, line;
  for (int i = 0; i < 40 && std::getline(in, line); ++i) first_screen += line + "\n";
  EXPECT_NE(first_screen.find("tools/serve_and_generate.sh"), std::string::npos);
  EXPECT_NE(first_screen.find("tools/test.sh"), std::string::npos);
}

TEST(DocsTest, TheReadmesMethodTableIsTheRegistry) {
  const auto rows = TableAfterHeading(Read("README.md"), "## Methods");
  std::vector<std::string> listed;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 7u) << "method | paper | kind | CPU | H100 | SynthEval | details";
    listed.push_back(row[0]);
    // Its details link points at the method's section in docs/methods.md.
    EXPECT_NE(row[6].find("](docs/methods.md#"), std::string::npos) << row[0];
  }
  std::vector<std::string> registry;
  for (const engine::MethodEntry& entry : engine::Methods()) registry.push_back(entry.name);
  EXPECT_EQ(listed, registry);
}

TEST(DocsTest, TheComponentsTableInMethodsMdIsTheRegistry) {
  const auto rows =
      TableAfterHeading(Read("docs/methods.md"), "## What each method needs from a family");
  std::vector<std::vector<std::string>> expected;
  for (const engine::MethodEntry& entry : engine::Methods()) {
    std::string needs;
    for (engine::Component c : entry.needs) {
      needs += std::string(needs.empty() ? "" : ", ") + engine::ComponentName(c);
    }
    expected.push_back({entry.name, entry.implemented ? "yes" : "no", needs.empty() ? "-" : needs});
  }
  EXPECT_EQ(rows, expected);
}

// The options table is the specs' (engine/decode/specs/): on a mismatch the test prints the
// table to paste.
TEST(DocsTest, TheOptionsTableInMethodsMdIsTheSpecs) {
  const auto rows = TableAfterHeading(Read("docs/methods.md"), "## Every method's options");
  std::vector<std::vector<std::string>> expected;
  std::string markdown = "| method | option | values |\n|---|---|---|\n";
  for (const engine::MethodEntry& entry : engine::Methods()) {
    for (const engine::OptionSpec& option : entry.options) {
      expected.push_back({entry.name, "`" + option.name + "`", engine::OptionCondition(option)});
      markdown += "| " + entry.name + " | `" + option.name + "` | " +
                  engine::OptionCondition(option) + " |\n";
    }
  }
  EXPECT_EQ(rows, expected) << "the table from the specs:\n" << markdown;
}

// Controls: the checker must find each kind of broken link, or the tests above prove nothing.
TEST(DocsTest, TheCheckerFindsBrokenLinks) {
  const fs::path root = Scratch("broken");
  Write(root / "docs" / "a.md", "# A title\n\n## Section two\n");
  Write(root / "picture.png", "png");
  Write(root / "README.md",
        "# Readme\n"
        "[ok](docs/a.md) [ok anchor](docs/a.md#section-two) ![ok image](picture.png)\n"
        "[ok self](#readme) [web](https://example.com/x) `[code](missing.md)`\n"
        "```\n[fenced](missing.md)\n```\n"
        "[missing](docs/b.md)\n"
        "![missing image](docs/b.png)\n"
        "[bad anchor](docs/a.md#section-three)\n"
        "[escapes](../outside.md)\n"
        "[absolute](/etc/passwd)\n"
        "[bad self anchor](#nowhere)\n");
  const std::vector<std::string> problems = CheckLinks(root, root / "README.md");
  ASSERT_EQ(problems.size(), 6u) << ::testing::PrintToString(problems);
  EXPECT_NE(problems[0].find("README.md:7: docs/b.md: no such file"), std::string::npos);
  EXPECT_NE(problems[1].find(":8: docs/b.png: no such file"), std::string::npos);
  EXPECT_NE(problems[2].find(":9: docs/a.md#section-three: no heading"), std::string::npos);
  EXPECT_NE(problems[3].find(":10: ../outside.md: points outside"), std::string::npos);
  EXPECT_NE(problems[4].find(":11: /etc/passwd: an absolute path"), std::string::npos);
  EXPECT_NE(problems[5].find(":12: #nowhere: no heading"), std::string::npos);
}

TEST(DocsTest, AnchorsFollowGitHub) {
  EXPECT_EQ(HeadingAnchor("EAGLE-1 / EAGLE-2 (draft trees with the EAGLE head)"),
            "eagle-1--eagle-2-draft-trees-with-the-eagle-head");
  EXPECT_EQ(HeadingAnchor("MuLo-SD on the bundled family (2-core CPU, 1 thread, CFG 1.25)"),
            "mulo-sd-on-the-bundled-family-2-core-cpu-1-thread-cfg-125");
  EXPECT_EQ(HeadingAnchor("LANTERN / LANTERN++ (relaxed tree acceptance)"),
            "lantern--lantern-relaxed-tree-acceptance");
  const auto anchors = HeadingAnchors("# Notes\n```\n# not a heading\n```\n## Notes\n#hashtag\n");
  EXPECT_EQ(anchors, (std::set<std::string>{"notes", "notes-1"}));
}

TEST(DocsTest, TablesAreReadAfterTheirHeading) {
  const std::string markdown =
      "## Other\n| x | y |\n|---|---|\n| 1 | 2 |\n\n## Methods\n\ntext\n\n"
      "| method | kind |\n|---|---:|\n| ar | ref |\n|  mulo  | relaxed |\n\n| z |\n";
  const auto rows = TableAfterHeading(markdown, "## Methods");
  EXPECT_EQ(rows, (std::vector<std::vector<std::string>>{{"ar", "ref"}, {"mulo", "relaxed"}}));
}

}  // namespace
}  // namespace mulo::docs
