#include "text/byte_level.h"

#include <cstdint>

namespace mulo::text {

std::string Utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  // Bytes that are printable on their own keep their code point: '!'..'~', '¡'..'¬', '®'..'ÿ'.
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next = 0x100;
  byte_of_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    code_point_[b] = printable(b) ? b : next++;
    byte_of_[code_point_[b]] = b;
  }
}

std::string ByteLevelAlphabet::Encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += Utf8(code_point_[b]);
  return out;
}

std::optional<std::string> ByteLevelAlphabet::Decode(std::string_view symbols) const {
  std::string out;
  size_t i = 0;
  while (i < symbols.size()) {
    // Every character of the alphabet is below U+0180: one or two UTF-8 bytes.
    const auto lead = static_cast<unsigned char>(symbols[i]);
    char32_t c;
    if (lead < 0x80) {
      c = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < symbols.size()) {
      c = ((lead & 0x1F) << 6) | (static_cast<unsigned char>(symbols[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::nullopt;
    }
    const int byte = c < byte_of_.size() ? byte_of_[c] : -1;
    if (byte < 0) return std::nullopt;
    out += static_cast<char>(byte);
  }
  return out;
}

}  // namespace mulo::text
