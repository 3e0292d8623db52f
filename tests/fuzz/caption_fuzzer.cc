// Fuzzes SynthEval's caption parser with arbitrary text: a parse or an error, never a crash;
// a parsed caption describes every object it claims.
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "synth/caption_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto claims = mulo::synth::ParseCaption(text);
  if (claims.ok()) {
    if (claims->objects.empty()) std::abort();  // the grammar needs at least one object
    for (const auto& object : claims->objects) {
      if (object.cell < 0 || object.cell > 8) std::abort();
      (void)mulo::synth::DescribeObject(object);
    }
  }
  return 0;
}
