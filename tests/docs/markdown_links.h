// What the docs test checks in one Markdown file: every relative link and image resolves
// to a file in the repository (and, for a #fragment, to a heading there), and nothing points
// outside the repository. Kept apart from the test so that its own control cases can feed it
// broken Markdown.
#ifndef MULO_TESTS_DOCS_MARKDOWN_LINKS_H_
#define MULO_TESTS_DOCS_MARKDOWN_LINKS_H_

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace mulo::docs {

struct Link {
  int line = 0;        // 1-based, in the file that holds the link
  std::string target;  // as written: path, path#fragment or #fragment
};

// Links `[text](target)` and images `![alt](target)` outside fenced code blocks and inline
// code spans.
std::vector<Link> ExtractLinks(const std::string& markdown);

// GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped,
// spaces to '-' (so "EAGLE-1 / EAGLE-2 (trees)" is "eagle-1--eagle-2-trees").
std::string HeadingAnchor(const std::string& heading_text);

// The anchors of every heading outside fenced code, with GitHub's -1, -2 suffixes for
// repeated headings.
std::set<std::string> HeadingAnchors(const std::string& markdown);

// Problems of `file` (a path inside `repo_root`) as "file:line: target: why" lines; empty
// when every link resolves. External links (a scheme such as https:) are not followed.
std::vector<std::string> CheckLinks(const std::filesystem::path& repo_root,
                                    const std::filesystem::path& file);

// Rows of the first pipe table after the heading line `heading`, header and separator rows
// left out, each row's cells trimmed.
std::vector<std::vector<std::string>> TableAfterHeading(const std::string& markdown,
                                                        const std::string& heading);

}  // namespace mulo::docs

#endif  // MULO_TESTS_DOCS_MARKDOWN_LINKS_H_
