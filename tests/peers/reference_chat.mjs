// The reference side of bpe_tokenizer_test.sh's chat check: the tokenizer_config.json's own
// chat_template rendered by Hugging Face's Jinja (@huggingface/jinja), then encoded by
// tokenizers.js.
//   node reference_chat.mjs <tokenizer.json> <tokenizer_config.json> < chats.jsonl
// Each input line is {"messages": [...], "add_generation_prompt": bool}; each output line
// {"ids": [...], "text": the rendered prompt}.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokenizerPath, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const tokenizer = new Tokenizer(JSON.parse(readFileSync(tokenizerPath, "utf8")), config);
const template = new Template(config.chat_template);
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  const { messages, add_generation_prompt } = JSON.parse(line);
  const text = template.render({ messages, add_generation_prompt });
  const { ids } = tokenizer.encode(text, { add_special_tokens: false });
  process.stdout.write(JSON.stringify({ ids, text }) + "\n");
}
