// GPT-2's byte-level alphabet, which byte-level BPE tokenizers (GPT-2, LLaMA 3, Qwen2) run on:
// each of the 256 byte values is one printable Unicode character, so any UTF-8 text is a
// string over 256 symbols and the vocabulary needs no unknown token. Printable ASCII and
// Latin-1 bytes stand for themselves; the other 68 (controls, space, soft hyphen...) map to
// U+0100 upwards in byte order (space is 'Ġ', U+0120; newline 'Ċ', U+010A).
#ifndef MULO_TEXT_BYTE_LEVEL_H_
#define MULO_TEXT_BYTE_LEVEL_H_

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace mulo::text {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();
  // The UTF-8 encoding of `bytes`' characters in the alphabet ("a b" -> "aĠb").
  std::string Encode(std::string_view bytes) const;
  // The bytes a string over the alphabet stands for; nullopt when it holds another character.
  std::optional<std::string> Decode(std::string_view symbols) const;

 private:
  std::array<char32_t, 256> code_point_;  // byte -> its character
  std::array<int, 0x180> byte_of_;         // character -> its byte, -1 outside the alphabet
};

// UTF-8 of one code point.
std::string Utf8(char32_t code_point);

}  // namespace mulo::text

#endif  // MULO_TEXT_BYTE_LEVEL_H_
