// The held-out prompt set models/synth/heldout_prompts.jsonl (written by tools/synth/heldout.py):
// one JSON object a line, {"id", "prompt", "scene", "mismatched": {attribute: caption}}, where
// each mismatched caption contradicts the scene in exactly that attribute (colour, shape,
// size, position or background).
#ifndef MULO_SYNTH_HELDOUT_H_
#define MULO_SYNTH_HELDOUT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "synth/scene.h"

namespace mulo::synth {

struct HeldoutEntry {
  int id = 0;
  std::string prompt;
  Scene scene;
  // "color", "shape", "size", "position", "background" -> caption.
  std::map<std::string, std::string> mismatched;
};

absl::StatusOr<HeldoutEntry> ParseHeldoutLine(absl::string_view line);

// Every non-empty line of `path`; errors name the file and line.
absl::StatusOr<std::vector<HeldoutEntry>> LoadHeldoutPrompts(const std::string& path);

}  // namespace mulo::synth

#endif  // MULO_SYNTH_HELDOUT_H_
