// LlamaGen t2i's caption cleaning (language/t5.py, T5Embedder.text_preprocessing, from PixArt):
// every caption goes through clean_caption twice before FLAN-T5's tokenizer, at training and at
// sampling, so a server must clean the same way to feed T5 the ids the model was trained on.
//
// clean_caption, in order: URL-unquote ('+' = space), strip, lower case, '<person>' -> person,
// URLs removed, HTML tags removed and entities decoded (what BeautifulSoup's html.parser text
// gives), @handles, CJK blocks, every dash to '-', quotes to one standard, &quot; / &amp, IP
// addresses, trailing article ids, literal "\n", #123 / #12345 / 123456 numbers, file names,
// repeated quotes and dots, bad punctuation to spaces, " . ", more than three - or _ to spaces,
// basic_clean (ftfy, html.unescape twice, strip), product codes (jc6640, jc6640vc, 6640vc231),
// shipping / download / click-for / image-format / page-N phrases, sizes (10x20), spacing
// around ':' and after , . /, whitespace runs, surrounding quotes, leading and trailing
// punctuation.
//
// Python's regular expressions are reproduced with ICU's, with Python's meaning of \w, \s and
// \b substituted (ICU's \w also counts combining marks, its \s lacks \v, U+001C-U+001F and
// U+0085). Two library calls are approximated, by design and documented in
// docs/serving-upstream-checkpoints.md: ftfy.fix_text keeps its steps that change ordinary
// captions (ligatures, full-width forms, curly quotes, line breaks, control characters, NFC) but
// not its mojibake repair; HTML entities are decoded for numeric references and the common
// named ones, not HTML5's whole table.
#ifndef MULO_TEXT_CLEAN_CAPTION_H_
#define MULO_TEXT_CLEAN_CAPTION_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace mulo::text {

class CaptionCleaner {
 public:
  // Compiles the patterns once (they are shared read-only by every call, from any thread).
  static absl::StatusOr<std::unique_ptr<CaptionCleaner>> Create();
  ~CaptionCleaner();

  // One pass of clean_caption on UTF-8 text (invalid bytes become U+FFFD, as Python's decoding
  // with errors="replace" does).
  std::string CleanOnce(std::string_view caption) const;

  // What LlamaGen feeds T5: clean_caption applied twice.
  std::string Clean(std::string_view caption) const { return CleanOnce(CleanOnce(caption)); }

 private:
  struct Patterns;
  explicit CaptionCleaner(std::unique_ptr<Patterns> patterns);
  std::unique_ptr<Patterns> patterns_;
};

}  // namespace mulo::text

#endif  // MULO_TEXT_CLEAN_CAPTION_H_
