// Tar's text-to-image prompt and the reading of its MLLM's answer, as upstream's
// t2i_inference.py does (csuhan/Tar 47da8e1; docs/serving-upstream-checkpoints.md):
//   - the prompt is Qwen2's chat with the system message "You are a helpful assistant.", the
//     caption as the user's turn and the assistant's turn opened, then "<im_start><S{scale}>":
//     scale 0, 1 and 2 ask for 729 (27 x 27), 169 (13 x 13) and 81 (9 x 9) TA-Tok codes;
//   - the codes are every "<I{k}>" of the decoded answer in order, cut or padded with code 0 to
//     the scale's count (upstream never fails here; a code the de-quantiser does not have is
//     refused there).
#ifndef MULO_TEXT_TAR_PROMPT_H_
#define MULO_TEXT_TAR_PROMPT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace mulo::text {

// 729, 169 or 81; INVALID_ARGUMENT naming "scale" outside 0-2.
absl::StatusOr<int64_t> TarCodeCount(int scale);

absl::StatusOr<std::string> TarT2iPrompt(std::string_view caption, int scale);

std::vector<int64_t> ParseTarCodes(std::string_view answer, int64_t count);

}  // namespace mulo::text

#endif  // MULO_TEXT_TAR_PROMPT_H_
