// tokenize --tokenizer=<tokenizer.json> [--chat=qwen2] < lines.jsonl > out.jsonl
// tokenize --sentencepiece=<spiece.model> --max_length=120 < lines.jsonl > out.jsonl
// Each input line is a JSON string, and each output line the JSON list of its ids. With
// --chat, each input line is {"messages": [{"role", "content"}...], "add_generation_prompt":
// bool} and each output line {"ids": [...], "text": the rendered prompt}. With
// --sentencepiece (T5), each output line is {"ids": [...], "mask": [...]}, padded as LlamaGen
// t2i pads captions. A line that fails gives {"error": message}. Exit 2 on bad arguments, 1
// when the tokenizer does not load.
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "text/bpe_tokenizer.h"
#include "text/chat_template.h"
#include "text/t5_tokenizer.h"

namespace {

using nlohmann::json;

json Error(const std::string& message) { return json{{"error", message}}; }

json ChatLine(const mulo::text::BpeTokenizer& tokenizer, const json& line) {
  if (!line.is_object() || !line.value("messages", json()).is_array()) {
    return Error("expected {\"messages\": [...], \"add_generation_prompt\": bool}");
  }
  std::vector<mulo::text::ChatMessage> messages;
  for (const json& m : line["messages"]) {
    messages.push_back({m.value("role", ""), m.value("content", "")});
  }
  auto text = mulo::text::RenderQwen2Chat(messages, line.value("add_generation_prompt", false));
  if (!text.ok()) return Error(std::string(text.status().message()));
  auto ids = tokenizer.Encode(*text, "messages");
  if (!ids.ok()) return Error(std::string(ids.status().message()));
  return json{{"ids", *ids}, {"text", *text}};
}

// Reads JSON lines from stdin and prints `answer(line)` for each, one JSON line each.
void AnswerLines(const std::function<json(const json&)>& answer) {
  std::string text;
  while (std::getline(std::cin, text)) {
    std::cout << answer(json::parse(text, nullptr, false)).dump() << "\n";
  }
}

}  // namespace

int RunSentencePiece(const std::string& model, int64_t max_length) {
  auto tokenizer = mulo::text::T5Tokenizer::Load(model);
  if (!tokenizer.ok()) {
    std::cerr << "error: " << tokenizer.status().message() << "\n";
    return 1;
  }
  AnswerLines([&](const json& line) {
    if (!line.is_string()) return Error("not a JSON string");
    auto tokens = (*tokenizer)->Encode(line.get<std::string>(), max_length, "text");
    return tokens.ok() ? json{{"ids", tokens->ids}, {"mask", tokens->mask}}
                       : Error(std::string(tokens.status().message()));
  });
  return 0;
}

int main(int argc, char** argv) {
  std::string path, chat, sentencepiece;
  int64_t max_length = 120;
  bool bad = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--tokenizer=", 0) == 0) {
      path = arg.substr(12);
    } else if (arg.rfind("--chat=", 0) == 0) {
      chat = arg.substr(7);
    } else if (arg.rfind("--sentencepiece=", 0) == 0) {
      sentencepiece = arg.substr(16);
    } else if (arg.rfind("--max_length=", 0) == 0) {
      max_length = std::atoll(arg.c_str() + 13);
    } else {
      bad = true;
    }
  }
  if (!sentencepiece.empty() && path.empty() && chat.empty() && !bad && max_length >= 1) {
    return RunSentencePiece(sentencepiece, max_length);
  }
  if (bad || path.empty() || !(chat.empty() || chat == "qwen2")) {
    std::cerr << "usage: tokenize --tokenizer=<tokenizer.json> [--chat=qwen2] < lines.jsonl\n"
                 "       tokenize --sentencepiece=<spiece.model> [--max_length=120] < "
                 "lines.jsonl\n";
    return 2;
  }
  auto tokenizer = mulo::text::BpeTokenizer::LoadFile(path);
  if (!tokenizer.ok()) {
    std::cerr << "error: " << tokenizer.status().message() << "\n";
    return 1;
  }
  AnswerLines([&](const json& line) {
    if (!chat.empty()) return ChatLine(**tokenizer, line);
    if (!line.is_string()) return Error("not a JSON string");
    auto ids = (*tokenizer)->Encode(line.get<std::string>(), "text");
    return ids.ok() ? json(*ids) : Error(std::string(ids.status().message()));
  });
  return 0;
}
