// Parses a synth caption into the claims SynthEval checks against an image.
//
// The grammar covers every paraphrase template of tools/synth/domain.py (_t_sentence,
// _t_listing, _t_background_first, _t_terse) and any mix of their phrases:
//
//   caption    := phrase (separator phrase)*
//   separator  := "and" | "," | "on" | "with" | "over" | "," "over"
//   phrase     := position ":" object               (listing: "top left: small red circle")
//               | [article] object locator          ("a red circle in the top left",
//                                                    "red circle at top left")
//               | [article] background
//   object     := [size] object-colour shape
//   locator    := ("in" | "at") ["the"] position
//   background := colour "background"                (solid)
//               | colour "to" colour "gradient"      (first colour at the top)
//               | colour "and" colour "stripes"      (first colour on even stripes, stripe 0
//                                                     at the left)
//   position   := one of domain.POSITIONS ("top left", ..., "center", ..., "bottom right")
//
// Text is tokenised like domain.tokenize (":" and "," are tokens of their own) after
// lower-casing. A caption must name exactly one background and at least one object, objects
// in distinct cells. Unknown words and anything else outside the grammar are InvalidArgument
// errors that name the problem.
#ifndef MULO_SYNTH_CAPTION_PARSER_H_
#define MULO_SYNTH_CAPTION_PARSER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "synth/palette.h"
#include "synth/scene.h"

namespace mulo::synth {

struct ObjectClaim {
  std::string color;  // an object colour name
  Shape shape = Shape::kCircle;
  std::optional<Size> size;  // only when the caption mentions it
  int cell = 0;              // row * 3 + col
  bool operator==(const ObjectClaim& o) const {
    return color == o.color && shape == o.shape && size == o.size && cell == o.cell;
  }
};

struct CaptionClaims {
  Background background;
  std::vector<ObjectClaim> objects;  // in caption order
};

// domain.tokenize: whitespace-separated words with ":" and "," split off as tokens.
std::vector<std::string> Tokenize(absl::string_view text);

absl::StatusOr<CaptionClaims> ParseCaption(absl::string_view caption);

// "small red circle in the top left" / "red circle in the center" (size only when claimed).
std::string DescribeObject(const ObjectClaim& claim);

}  // namespace mulo::synth

#endif  // MULO_SYNTH_CAPTION_PARSER_H_
