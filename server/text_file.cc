#include "server/text_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace mulo::server {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  // Streamed, not sized: /proc files report a size of 0.
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace mulo::server
