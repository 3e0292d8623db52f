#include "text/tar_prompt.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "text/chat_template.h"

namespace mulo::text {

absl::StatusOr<int64_t> TarCodeCount(int scale) {
  constexpr int64_t kCounts[] = {729, 169, 81};
  if (scale < 0 || scale > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale: ", scale, " is not one of Tar's (0: 729, 1: 169, 2: 81 codes)"));
  }
  return kCounts[scale];
}

absl::StatusOr<std::string> TarT2iPrompt(std::string_view caption, int scale) {
  if (auto count = TarCodeCount(scale); !count.ok()) return count.status();
  auto chat = RenderQwen2Chat({{"system", "You are a helpful assistant."},
                               {"user", std::string(caption)}},
                              /*add_generation_prompt=*/true);
  if (!chat.ok()) return chat.status();
  return absl::StrCat(*chat, "<im_start><S", scale, ">");
}

std::vector<int64_t> ParseTarCodes(std::string_view answer, int64_t count) {
  std::vector<int64_t> codes;
  size_t i = 0;
  while ((i = answer.find("<I", i)) != std::string_view::npos) {
    size_t j = i + 2;
    int64_t value = 0;
    bool overflow = false;
    while (j < answer.size() && answer[j] >= '0' && answer[j] <= '9') {
      if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) overflow = true;
      if (!overflow) value = value * 10 + (answer[j] - '0');
      ++j;
    }
    if (j > i + 2 && j < answer.size() && answer[j] == '>') {
      codes.push_back(overflow ? std::numeric_limits<int64_t>::max() : value);
      i = j + 1;
    } else {
      i += 2;
    }
  }
  codes.resize(count, 0);  // cut, or padded with code 0, as upstream
  return codes;
}

}  // namespace mulo::text
