// The reference side of bpe_tokenizer_peer_test.sh: Hugging Face's tokenizers.js
// (@huggingface/tokenizers) on a tokenizer.json and its tokenizer_config.json.
//   node reference_tokenize.mjs <tokenizer.json> <tokenizer_config.json> < texts.jsonl
// Each input line is a JSON string; each output line the JSON list of its ids.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokenizerPath, configPath] = process.argv.slice(2);
const tokenizer = new Tokenizer(
  JSON.parse(readFileSync(tokenizerPath, "utf8")),
  JSON.parse(readFileSync(configPath, "utf8")),
);
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  // No special tokens added around the text: ids of the text alone, as text/ encodes.
  const { ids } = tokenizer.encode(JSON.parse(line), { add_special_tokens: false });
  process.stdout.write(JSON.stringify(ids) + "\n");
}
