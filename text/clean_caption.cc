#include "text/clean_caption.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mulo::text {
namespace {

// Python's \w, \s (str.isalnum() or '_'; str.isspace()) as ICU sets.
constexpr char kWordSet[] = "\\p{L}\\p{N}_";
constexpr char kSpaceSet[] = "\\t-\\r\\x1c-\\x1f\\x85\\p{Z}";

// A pattern written with Python's \w \W \s \S \b, in ICU's syntax with Python's meanings.
std::string PythonPattern(std::string_view python) {
  const std::string word = absl::StrCat("[", kWordSet, "]");
  const std::string not_word = absl::StrCat("[^", kWordSet, "]");
  const std::string space = absl::StrCat("[", kSpaceSet, "]");
  const std::string not_space = absl::StrCat("[^", kSpaceSet, "]");
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < python.size(); ++i) {
    const char c = python[i];
    if (c == '\\' && i + 1 < python.size()) {
      const char e = python[++i];
      if (e == 'w') {
        out += in_class ? kWordSet : word;
      } else if (e == 'W') {
        out += not_word;  // a nested set inside a class is their union in ICU
      } else if (e == 's') {
        out += in_class ? kSpaceSet : space;
      } else if (e == 'S') {
        out += not_space;
      } else if (e == 'b' && !in_class) {
        out += absl::StrCat("(?:(?<=", word, ")(?!", word, ")|(?<!", word, ")(?=", word, "))");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct Rule {
  std::unique_ptr<icu::RegexPattern> pattern;
  icu::UnicodeString replacement;  // ICU's: $1 for a group
};

icu::UnicodeString Replace(const Rule& rule, const icu::UnicodeString& text) {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(rule.pattern->matcher(text, status));
  if (U_FAILURE(status)) return text;
  icu::UnicodeString out = matcher->replaceAll(rule.replacement, status);
  return U_FAILURE(status) ? text : out;
}

int64_t CountMatches(const Rule& rule, const icu::UnicodeString& text) {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(rule.pattern->matcher(text, status));
  int64_t count = 0;
  while (U_SUCCESS(status) && matcher->find()) ++count;
  return count;
}

// urllib.parse.unquote_plus: '+' is a space, %XX a byte; the bytes are then read as UTF-8 with
// invalid sequences replaced (fromUTF8 does so with U+FFFD).
icu::UnicodeString UnquotePlus(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string bytes;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      bytes += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 &&
               hex(text[i + 2]) >= 0) {
      bytes += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      bytes += text[i];
    }
  }
  return icu::UnicodeString::fromUTF8(bytes);
}

// Python's str.strip(): whitespace off both ends.
icu::UnicodeString Strip(const icu::UnicodeString& text, const Rule& ends) {
  return Replace(ends, text);
}

// html.unescape's named references that ordinary captions carry (HTML5 has 2,231; the rest
// stay as written), and numeric ones.
UChar32 NamedEntity(const icu::UnicodeString& name) {
  static constexpr struct {
    const char* name;
    UChar32 code;
  } kNamed[] = {{"amp", '&'},      {"lt", '<'},         {"gt", '>'},         {"quot", '"'},
                {"apos", '\''},    {"nbsp", 0xA0},      {"copy", 0xA9},      {"reg", 0xAE},
                {"trade", 0x2122}, {"hellip", 0x2026},  {"mdash", 0x2014},   {"ndash", 0x2013},
                {"lsquo", 0x2018}, {"rsquo", 0x2019},   {"ldquo", 0x201C},   {"rdquo", 0x201D},
                {"laquo", 0xAB},   {"raquo", 0xBB},     {"middot", 0xB7},    {"bull", 0x2022},
                {"deg", 0xB0},     {"times", 0xD7},     {"eacute", 0xE9},    {"euro", 0x20AC}};
  std::string utf8;
  name.toUTF8String(utf8);
  for (const auto& entry : kNamed) {
    if (utf8 == entry.name) return entry.code;
  }
  return -1;
}

icu::UnicodeString UnescapeHtml(const icu::UnicodeString& text, const Rule& reference) {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(reference.pattern->matcher(text, status));
  if (U_FAILURE(status)) return text;
  icu::UnicodeString out;
  int32_t last = 0;
  while (m->find()) {
    const int32_t start = m->start(status), end = m->end(status);
    const icu::UnicodeString body = m->group(1, status);
    UChar32 code = -1;
    if (body.startsWith("#")) {
      const bool is_hex = body.length() > 1 && (body[1] == 'x' || body[1] == 'X');
      std::string digits;
      body.tempSubString(is_hex ? 2 : 1).toUTF8String(digits);
      while (!digits.empty() && digits.back() == ';') digits.pop_back();
      if (!digits.empty() && digits.size() <= 8) {
        code = static_cast<UChar32>(std::stoll(digits, nullptr, is_hex ? 16 : 10));
        // html.unescape: NUL, surrogates and past Unicode are U+FFFD.
        if (code == 0 || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) code = 0xFFFD;
      } else if (!digits.empty()) {
        code = 0xFFFD;
      }
    } else {
      code = NamedEntity(body.tempSubString(0, body.length() - 1));  // without its ';'
    }
    out.append(text, last, start - last);
    if (code >= 0) {
      out.append(code);
    } else {
      out.append(text, start, end - start);
    }
    last = end;
  }
  out.append(text, last, text.length() - last);
  return out;
}

}  // namespace

struct CaptionCleaner::Patterns {
  // Ordered rules, in groups between the steps that are not substitutions.
  std::vector<Rule> urls;          // '<person>' and the two URL patterns
  Rule tags;                       // what html.parser takes as markup
  Rule reference;                  // &...; references
  std::vector<Rule> before_dashes;  // @handles ... " . "
  Rule separator;                  // - or _ (counted: more than 3 become spaces)
  std::vector<Rule> ftfy;          // the kept steps of ftfy.fix_text before NFC
  std::vector<Rule> after_clean;   // product codes ... leading and trailing punctuation
  Rule ends;                       // str.strip()
  const icu::Normalizer2* nfc = nullptr;
};

namespace {

// (python pattern, replacement) pairs: upstream's clean_caption rules before it splits on dashes.
const std::vector<std::pair<const char*, const char*>>& BeforeDashesRules() {
  static const auto* const kRules = new std::vector<std::pair<const char*, const char*>>{
      {R"(@[\w\d]+\b)", ""},
      {R"([\u31c0-\u31ef]+)", ""},
      {R"([\u31f0-\u31ff]+)", ""},
      {R"([\u3200-\u32ff]+)", ""},
      {R"([\u3300-\u33ff]+)", ""},
      {R"([\u3400-\u4dbf]+)", ""},
      {R"([\u4dc0-\u4dff]+)", ""},
      {R"([\u4e00-\u9fff]+)", ""},
      {R"([\u002D\u058A\u05BE\u1400\u1806\u2010-\u2015\u2E17\u2E1A\u2E3A\u2E3B\u2E40\u301C\u3030\u30A0\uFE31\uFE32\uFE58\uFE63\uFF0D]+)",
       "-"},
      {"[`\u00b4\u00ab\u00bb\u201c\u201d\u00a8]", "\""},
      {"[\u2018\u2019]", "'"},
      {R"(&quot;?)", ""},
      {R"(&amp)", ""},
      {R"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})", " "},
      {R"(\d:\d\d\s+$)", ""},
      {R"(\\n)", " "},
      {R"(#\d{1,3}\b)", ""},
      {R"(#\d{5,}\b)", ""},
      {R"(\b\d{6,}\b)", ""},
      {R"([\S]+\.(?:png|jpg|jpeg|bmp|webp|eps|pdf|apk|mp4))", ""},
      {R"([\"\']{2,})", "\""},
      {R"([\.]{2,})", " "},
      {"[#\u00ae\u2022\u00a9\u2122&@\u00b7\u00ba\u00bd\u00be\u00bf\u00a1\u00a7~\\)\\(\\]\\[\\}"
       "\\{\\|\\\\\\/\\*]{1,}",
       " "},
      {R"(\s+\.\s+)", " "},
  };
  return *kRules;
}

// (python pattern, replacement) pairs: the parts of ftfy.fix_text that change captions.
const std::vector<std::pair<const char*, const char*>>& FtfyRules() {
  static const auto* const kRules = new std::vector<std::pair<const char*, const char*>>{
      {"[\ufb00]", "ff"},  // fix_latin_ligatures
      {"[\ufb01]", "fi"},
      {"[\ufb02]", "fl"},
      {"[\ufb03]", "ffi"},
      {"[\ufb04]", "ffl"},
      {"[\ufb05]", "\u017ft"},
      {"[\ufb06]", "st"},
      {"[\u3000]", " "},               // fix_character_width (the full-width forms are below)
      {"[\u02bc\u2018-\u201b]", "'"},  // uncurl_quotes
      {"[\u201c-\u201f]", "\""},
      {"\r\n|[\r\u2028\u2029\u0085]", "\n"},  // fix_line_breaks
      {"[\\x00-\\x08\\x0b\\x0e-\\x1f\\x7f\u206a-\u206f\ufeff\ufff9-\ufffb]",
       ""},  // remove_control_chars
  };
  return *kRules;
}

// (python pattern, replacement) pairs: upstream's clean_caption rules after the dashes.
const std::vector<std::pair<const char*, const char*>>& AfterCleanRules() {
  static const auto* const kRules = new std::vector<std::pair<const char*, const char*>>{
      {R"(\b[a-zA-Z]{1,3}\d{3,15}\b)", ""},
      {R"(\b[a-zA-Z]+\d+[a-zA-Z]+\b)", ""},
      {R"(\b\d+[a-zA-Z]+\d+\b)", ""},
      {R"((worldwide\s+)?(free\s+)?shipping)", ""},
      {R"((free\s)?download(\sfree)?)", ""},
      {R"(\bclick\b\s(?:for|on)\s\w+)", ""},
      {R"(\b(?:png|jpg|jpeg|bmp|webp|eps|pdf|apk|mp4)(\simage[s]?)?)", ""},
      {R"(\bpage\s+\d+\b)", ""},
      {R"(\b\d*[a-zA-Z]+\d+[a-zA-Z]+\d+[a-zA-Z\d]*\b)", " "},
      {"\\b\\d+\\.?\\d*[x\u0445\u00d7]\\d+\\.?\\d*\\b", ""},
      {R"(\b\s+\:\s+)", ": "},
      {R"((\D[,\./])\b)", "$1 "},
      {R"(\s+)", " "},
      {R"(^[\"\']([\w\W]+)[\"\']$)", "$1"},
      {R"(^[\'\_,\-\:;])", ""},
      {R"([\'\_,\-\:\-\+]$)", ""},
      {R"(^\.\S+$)", ""},
  };
  return *kRules;
}

}  // namespace

CaptionCleaner::CaptionCleaner(std::unique_ptr<Patterns> patterns)
    : patterns_(std::move(patterns)) {}
CaptionCleaner::~CaptionCleaner() = default;

absl::StatusOr<std::unique_ptr<CaptionCleaner>> CaptionCleaner::Create() {
  auto p = std::make_unique<Patterns>();
  absl::Status error;
  auto rule = [&](std::string_view python, std::string_view replacement,
                  uint32_t flags = 0) -> Rule {
    Rule r;
    UErrorCode status = U_ZERO_ERROR;
    UParseError where;
    r.pattern.reset(icu::RegexPattern::compile(
        icu::UnicodeString::fromUTF8(PythonPattern(python)), flags, where, status));
    if (U_FAILURE(status) && error.ok()) {
      error = absl::InternalError(absl::StrCat("clean_caption: pattern ", std::string(python),
                                               " at ", where.offset, ": ",
                                               u_errorName(status)));
    }
    r.replacement = icu::UnicodeString::fromUTF8(replacement);
    return r;
  };
  p->ends = rule(R"(^\s+|\s+$)", "");
  p->urls.push_back(rule(R"(<person>)", "person"));
  p->urls.push_back(rule(
      R"(\b((?:https?:(?:\/{1,3}|[a-zA-Z0-9%])|[a-zA-Z0-9.\-]+[.](?:com|co|ru|net|org|edu|gov|it)[\w/-]*\b\/?(?!@))))",
      ""));
  p->urls.push_back(rule(
      R"(\b((?:www:(?:\/{1,3}|[a-zA-Z0-9%])|[a-zA-Z0-9.\-]+[.](?:com|co|ru|net|org|edu|gov|it)[\w/-]*\b\/?(?!@))))",
      ""));
  // html.parser's markup: comments, declarations, processing instructions, start and end tags
  // (a '<' not followed by a letter, '/', '!' or '?' is text).
  p->tags = rule(R"(<!--[\s\S]*?-->|<![^>]*>|<\?[^>]*>|</?[a-zA-Z][^>]*>)", "");
  p->reference = rule(R"(&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[a-zA-Z][a-zA-Z0-9]*;))", "");
  for (const auto& [python, replacement] : BeforeDashesRules()) {
    p->before_dashes.push_back(rule(python, replacement));
  }
  p->separator = rule(R"((?:\-|\_))", " ");
  for (const auto& [python, replacement] : FtfyRules()) {
    p->ftfy.push_back(rule(python, replacement));
  }
  for (const auto& [python, replacement] : AfterCleanRules()) {
    p->after_clean.push_back(rule(python, replacement));
  }
  if (!error.ok()) return error;
  UErrorCode status = U_ZERO_ERROR;
  p->nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) {
    return absl::InternalError(absl::StrCat("clean_caption: NFC: ", u_errorName(status)));
  }
  return std::unique_ptr<CaptionCleaner>(new CaptionCleaner(std::move(p)));
}

std::string CaptionCleaner::CleanOnce(std::string_view caption) const {
  const Patterns& p = *patterns_;
  icu::UnicodeString text = Strip(UnquotePlus(caption), p.ends);
  text.toLower(icu::Locale::getRoot());
  for (const Rule& r : p.urls) text = Replace(r, text);
  // BeautifulSoup(caption, "html.parser").text: the text between the markup, its character
  // references decoded.
  text = UnescapeHtml(Replace(p.tags, text), p.reference);
  for (const Rule& r : p.before_dashes) text = Replace(r, text);
  if (CountMatches(p.separator, text) > 3) text = Replace(p.separator, text);
  // basic_clean: ftfy.fix_text (its kept steps), html.unescape twice, strip.
  for (const Rule& r : p.ftfy) text = Replace(r, text);
  icu::UnicodeString narrowed;  // fix_character_width: full-width ASCII to ASCII
  for (int32_t i = 0; i < text.length(); ++i) {
    const UChar c = text[i];
    narrowed.append(c >= 0xFF01 && c <= 0xFF5E ? static_cast<UChar>(c - 0xFEE0) : c);
  }
  UErrorCode status = U_ZERO_ERROR;
  text = p.nfc->normalize(narrowed, status);
  if (U_FAILURE(status)) text = narrowed;
  text = Strip(UnescapeHtml(UnescapeHtml(text, p.reference), p.reference), p.ends);
  for (const Rule& r : p.after_clean) text = Replace(r, text);
  std::string out;
  Strip(text, p.ends).toUTF8String(out);
  return out;
}

}  // namespace mulo::text
