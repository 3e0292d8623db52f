#include "tests/docs/markdown_links.h"

#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

namespace mulo::docs {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool IsFence(const std::string& line) {
  const size_t start = line.find_first_not_of(' ');
  return start != std::string::npos && line.compare(start, 3, "```") == 0;
}

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// The line with inline code spans blanked out, so that `[a](b)` written as code is not a link.
std::string WithoutCodeSpans(const std::string& line) {
  std::string out = line;
  size_t open = out.find('`');
  while (open != std::string::npos) {
    const size_t close = out.find('`', open + 1);
    if (close == std::string::npos) break;
    for (size_t i = open; i <= close; ++i) out[i] = ' ';
    open = out.find('`', close + 1);
  }
  return out;
}

bool HasScheme(const std::string& target) {
  const size_t colon = target.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  for (size_t i = 0; i < colon; ++i) {
    const char c = target[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// True when `path` (normalised) lies inside `root` (normalised).
bool Inside(const fs::path& root, const fs::path& path) {
  const fs::path relative = path.lexically_relative(root);
  return !relative.empty() && *relative.begin() != "..";
}

}  // namespace

std::vector<Link> ExtractLinks(const std::string& markdown) {
  std::vector<Link> links;
  bool in_fence = false;
  int number = 0;
  for (const std::string& raw : Lines(markdown)) {
    ++number;
    if (IsFence(raw)) {
      in_fence = !in_fence;
      continue;
    }
    if (in_fence) continue;
    const std::string line = WithoutCodeSpans(raw);
    size_t pos = 0;
    while ((pos = line.find("](", pos)) != std::string::npos) {
      const size_t close = line.find(')', pos + 2);
      if (close == std::string::npos) break;
      // Only a link whose text opens on this line with '[' (the text may hold spaces).
      if (line.rfind('[', pos) != std::string::npos) {
        std::string target = Trim(line.substr(pos + 2, close - pos - 2));
        const size_t title = target.find(' ');  // [text](path "title")
        if (title != std::string::npos) target = target.substr(0, title);
        if (!target.empty()) links.push_back({number, target});
      }
      pos = close + 1;
    }
  }
  return links;
}

std::string HeadingAnchor(const std::string& heading_text) {
  std::string anchor;
  for (unsigned char c : heading_text) {
    if (std::isalnum(c) || c == '-' || c == '_') {
      anchor += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      anchor += '-';
    } else if (c >= 0x80) {
      anchor += static_cast<char>(c);  // letters outside ASCII stay as they are
    }
  }
  return anchor;
}

std::set<std::string> HeadingAnchors(const std::string& markdown) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  bool in_fence = false;
  for (const std::string& line : Lines(markdown)) {
    if (IsFence(line)) {
      in_fence = !in_fence;
      continue;
    }
    if (in_fence || line.empty() || line[0] != '#') continue;
    const size_t text = line.find_first_not_of('#');
    if (text == std::string::npos || line[text] != ' ') continue;
    const std::string base = HeadingAnchor(Trim(line.substr(text)));
    const int count = seen[base]++;
    anchors.insert(count == 0 ? base : base + "-" + std::to_string(count));
  }
  return anchors;
}

std::vector<std::string> CheckLinks(const fs::path& repo_root, const fs::path& file) {
  std::vector<std::string> problems;
  const fs::path root = fs::absolute(repo_root).lexically_normal();
  const fs::path source = fs::absolute(file).lexically_normal();
  const std::string markdown = ReadFile(source);
  const std::string shown = source.lexically_relative(root).string();
  for (const Link& link : ExtractLinks(markdown)) {
    const std::string where = shown + ":" + std::to_string(link.line) + ": " + link.target + ": ";
    if (HasScheme(link.target)) continue;
    const size_t hash = link.target.find('#');
    const std::string path_part = link.target.substr(0, hash);
    const std::string fragment = hash == std::string::npos ? "" : link.target.substr(hash + 1);
    if (!path_part.empty() && path_part[0] == '/') {
      problems.push_back(where + "an absolute path (links must be relative to the file)");
      continue;
    }
    const fs::path resolved = path_part.empty()
                                  ? source
                                  : (source.parent_path() / path_part).lexically_normal();
    if (!Inside(root, resolved)) {
      problems.push_back(where + "points outside the repository");
      continue;
    }
    if (!fs::exists(resolved)) {
      problems.push_back(where + "no such file");
      continue;
    }
    if (!fragment.empty()) {
      if (resolved.extension() != ".md") {
        problems.push_back(where + "a #fragment on a file that is not Markdown");
      } else if (HeadingAnchors(ReadFile(resolved)).count(fragment) == 0) {
        problems.push_back(where + "no heading with that anchor in " +
                           resolved.lexically_relative(root).string());
      }
    }
  }
  return problems;
}

std::vector<std::vector<std::string>> TableAfterHeading(const std::string& markdown,
                                                        const std::string& heading) {
  std::vector<std::vector<std::string>> rows;
  bool after_heading = false;
  bool in_table = false;
  for (const std::string& line : Lines(markdown)) {
    if (!after_heading) {
      after_heading = line == heading;
      continue;
    }
    if (line.rfind("|", 0) != 0) {
      if (in_table) break;
      continue;
    }
    const bool header = !in_table;
    in_table = true;
    if (header || line.find("---") != std::string::npos) continue;
    std::vector<std::string> cells;
    std::istringstream in(line.substr(1));
    for (std::string cell; std::getline(in, cell, '|');) cells.push_back(Trim(cell));
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace mulo::docs
