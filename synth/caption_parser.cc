#include "synth/caption_parser.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mulo::synth {
namespace {

bool IsArticle(absl::string_view t) { return t == "a" || t == "an"; }

// Every word the grammar can produce (domain.vocabulary without <pad>/<unk>).
const std::set<std::string, std::less<>>& Vocabulary() {
  static const auto* words = [] {
    auto* w = new std::set<std::string, std::less<>>{
        ",",  ":",  "a",    "an",      "and", "at", "background", "gradient",
        "in", "on", "over", "stripes", "the", "to", "with"};
    for (const auto& c : kBackgroundColors) w->emplace(c.name);
    for (Shape s : kShapes) w->emplace(ShapeName(s));
    for (Size s : kSizes) w->emplace(SizeName(s));
    for (absl::string_view p : kPositions) {
      for (absl::string_view word : absl::StrSplit(p, ' ')) w->emplace(word);
    }
    return w;
  }();
  return *words;
}

class Parser {
 public:
  Parser(absl::string_view caption, std::vector<std::string> tokens)
      : caption_(caption), tokens_(std::move(tokens)) {}

  absl::StatusOr<CaptionClaims> Parse() {
    if (tokens_.empty()) return Error("caption is empty");
    for (const auto& t : tokens_) {
      if (Vocabulary().count(t) == 0) return Error(absl::StrCat("unknown word \"", t, "\""));
    }
    while (true) {
      if (auto s = ParsePhrase(); !s.ok()) return s;
      if (AtEnd()) break;
      const std::string separator = Peek();
      if (!ParseSeparator()) {
        return Error(absl::StrCat("expected \"and\", \",\", \"on\", \"with\" or \"over\" before \"",
                                  Peek(), "\""));
      }
      if (AtEnd()) return Error(absl::StrCat("caption ends after \"", separator, "\""));
    }
    if (!has_background_) return Error("caption names no background");
    if (claims_.objects.empty()) return Error("caption names no object");
    return claims_;
  }

 private:
  bool AtEnd() const { return pos_ >= tokens_.size(); }
  std::string Peek(size_t ahead = 0) const {
    return pos_ + ahead < tokens_.size() ? tokens_[pos_ + ahead] : std::string();
  }
  std::string Where() const {
    return AtEnd() ? std::string("the end") : absl::StrCat("\"", Peek(), "\"");
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("caption \"", caption_, "\": ", what));
  }

  bool ParseSeparator() {
    if (Peek() == ",") {
      ++pos_;
      if (Peek() == "over") ++pos_;
      return true;
    }
    if (Peek() == "and" || Peek() == "on" || Peek() == "with" || Peek() == "over") {
      ++pos_;
      return true;
    }
    return false;
  }

  // The longest position name starting here; nullopt (nothing consumed) when none.
  std::optional<int> ParsePosition() {
    int best = -1;
    size_t best_len = 0;
    for (int cell = 0; cell < kCells; ++cell) {
      std::vector<absl::string_view> words = absl::StrSplit(kPositions[cell], ' ');
      bool match = true;
      for (size_t i = 0; i < words.size() && match; ++i) match = Peek(i) == words[i];
      if (match && words.size() > best_len) {
        best = cell;
        best_len = words.size();
      }
    }
    if (best < 0) return std::nullopt;
    pos_ += best_len;
    return best;
  }

  absl::StatusOr<std::string> ParseColor(bool object) {
    const std::string c = Peek();
    if (object ? !ObjectColor(c) : !BackgroundColor(c)) {
      if (object && BackgroundColor(c)) {
        return Error(absl::StrCat("\"", c, "\" is a background colour, not an object colour"));
      }
      return Error(absl::StrCat("expected a colour at ", Where()));
    }
    ++pos_;
    return c;
  }

  // [size] colour shape
  absl::StatusOr<ObjectClaim> ParseObjectCore() {
    ObjectClaim claim;
    if (auto size = SizeFromName(Peek())) {
      claim.size = *size;
      ++pos_;
    }
    auto color = ParseColor(/*object=*/true);
    if (!color.ok()) return color.status();
    claim.color = *color;
    auto shape = ShapeFromName(Peek());
    if (!shape)
      return Error(absl::StrCat("expected a shape after \"", claim.color, "\" at ", Where()));
    claim.shape = *shape;
    ++pos_;
    return claim;
  }

  absl::Status AddObject(const ObjectClaim& claim) {
    for (const auto& o : claim_cells_) {
      if (o == claim.cell) {
        return Error(absl::StrCat("two objects in the ", kPositions[claim.cell]));
      }
    }
    claim_cells_.push_back(claim.cell);
    claims_.objects.push_back(claim);
    return absl::OkStatus();
  }

  absl::Status ParseBackground() {
    Background bg;
    auto c0 = ParseColor(/*object=*/false);
    if (!c0.ok()) return c0.status();
    bg.colors.push_back(*c0);
    const std::string next = Peek();
    if (next == "background") {
      ++pos_;
      bg.kind = BackgroundKind::kSolid;
    } else if (next == "to" || next == "and") {
      ++pos_;
      auto c1 = ParseColor(/*object=*/false);
      if (!c1.ok()) return c1.status();
      bg.colors.push_back(*c1);
      const char* want = next == "to" ? "gradient" : "stripes";
      if (Peek() != want) {
        return Error(absl::StrCat("expected \"", want, "\" after \"", bg.colors[0], " ", next, " ",
                                  bg.colors[1], "\" at ", Where()));
      }
      ++pos_;
      bg.kind = next == "to" ? BackgroundKind::kGradient : BackgroundKind::kStripes;
    } else {
      // Neither an object (no shape after the colour) nor a background.
      return Error(absl::StrCat("expected a shape, \"background\", \"to\" or \"and\" after \"",
                                bg.colors[0], "\" at ", Where()));
    }
    if (has_background_) return Error("caption names two backgrounds");
    has_background_ = true;
    claims_.background = std::move(bg);
    return absl::OkStatus();
  }

  absl::Status ParsePhrase() {
    // Listing: "top left : small red circle".
    if (auto cell = ParsePosition()) {
      if (Peek() != ":") return Error(absl::StrCat("expected \":\" after a position at ", Where()));
      ++pos_;
      auto claim = ParseObjectCore();
      if (!claim.ok()) return claim.status();
      claim->cell = *cell;
      return AddObject(*claim);
    }
    if (IsArticle(Peek())) ++pos_;
    const bool is_object =
        SizeFromName(Peek()).has_value() ||
        (BackgroundColor(Peek()).has_value() && ShapeFromName(Peek(1)).has_value());
    if (!is_object) {
      if (BackgroundColor(Peek())) return ParseBackground();
      return Error(absl::StrCat("expected an object or a background at ", Where()));
    }
    auto claim = ParseObjectCore();
    if (!claim.ok()) return claim.status();
    if (Peek() != "in" && Peek() != "at") {
      return Error(absl::StrCat("expected \"in\" or \"at\" and a position after \"",
                                DescribeObject(*claim), "\" at ", Where()));
    }
    ++pos_;
    if (Peek() == "the") ++pos_;
    auto cell = ParsePosition();
    if (!cell) return Error(absl::StrCat("expected a position at ", Where()));
    claim->cell = *cell;
    return AddObject(*claim);
  }

  std::string caption_;
  std::vector<std::string> tokens_;
  size_t pos_ = 0;
  CaptionClaims claims_;
  bool has_background_ = false;
  std::vector<int> claim_cells_;
};

}  // namespace

std::vector<std::string> Tokenize(absl::string_view text) {
  std::string spaced;
  spaced.reserve(text.size() + 8);
  for (char c : text) {
    if (c == ':' || c == ',') {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  return absl::StrSplit(spaced, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty());
}

absl::StatusOr<CaptionClaims> ParseCaption(absl::string_view caption) {
  return Parser(caption, Tokenize(absl::AsciiStrToLower(caption))).Parse();
}

std::string DescribeObject(const ObjectClaim& claim) {
  std::string s = claim.size ? absl::StrCat(SizeName(*claim.size), " ") : std::string();
  absl::StrAppend(&s, claim.color, " ", ShapeName(claim.shape), " in the ",
                  PositionName(claim.cell));
  return s;
}

}  // namespace mulo::synth
