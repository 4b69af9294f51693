// The peer side of bench/tokenizer_peer.sh: Hugging Face's tokenizers (the npm package
// `tokenizers`, its Rust core through the Node binding) encoding documents as its users run it.
//
//   node hf_tokenizers_encode.mjs ROOT TOKENIZER_JSON DOCS_JSONL --batch N [--passes N] [--ids OUT]
//
// ROOT: the directory tools/npm_packages.sh hf-tokenizers prints. DOCS_JSONL: one JSON string a
// line, a document each. Documents go through encodeBatch N at a time, without special tokens
// (no <bos>), and every encoding's ids are taken out (getIds), as a user who needs the ids
// does. A first pass is followed by --passes N more (default 1). Prints one JSON object:
// bytes (UTF-8), documents, tokens and each pass's wall and CPU seconds (the process's CPU
// time, all threads); --ids OUT writes each document's ids, one JSON list a line.
// RAYON_NUM_THREADS=1 in the environment keeps the encoder on one thread.
import fs from "fs";
import { createRequire } from "module";

const [root, tokPath, docsPath, ...rest] = process.argv.slice(2);
if (!root || !tokPath || !docsPath) {
  console.error("usage: node hf_tokenizers_encode.mjs ROOT TOKENIZER_JSON DOCS_JSONL --batch N [--passes N] [--ids OUT]");
  process.exit(2);
}
let batch = 0, passes = 1, idsOut = "";
for (let i = 0; i < rest.length; i++) {
  const a = rest[i], v = rest[i + 1];
  if (a === "--batch" && v !== undefined) batch = Number(rest[++i]);
  else if (a === "--passes" && v !== undefined) passes = Number(rest[++i]);
  else if (a === "--ids" && v !== undefined) idsOut = rest[++i];
  else { console.error(`hf_tokenizers_encode.mjs: unknown or incomplete argument '${a}'`); process.exit(2); }
}
if (!(Number.isInteger(batch) && batch > 0) || !(Number.isInteger(passes) && passes >= 0)) {
  console.error("hf_tokenizers_encode.mjs: --batch must be a positive integer, --passes a non-negative one");
  process.exit(2);
}
const { Tokenizer } = createRequire(root + "/")("tokenizers");
const tok = Tokenizer.fromFile(tokPath);
const docs = fs.readFileSync(docsPath, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
let bytes = 0;
for (const d of docs) bytes += Buffer.byteLength(d, "utf8");

let ids = [];
async function pass() {
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  ids = [];
  for (let i = 0; i < docs.length; i += batch) {
    const encs = await tok.encodeBatch(docs.slice(i, i + batch), { addSpecialTokens: false });
    for (const e of encs) ids.push(e.getIds());
  }
  const c = process.cpuUsage(c0);
  return { wall_s: Number(process.hrtime.bigint() - t0) / 1e9, cpu_s: (c.user + c.system) / 1e6 };
}
const runs = [];
for (let r = 0; r <= passes; r++) runs.push(await pass());
let tokens = 0;
for (const v of ids) tokens += v.length;
if (idsOut) {
  fs.writeFileSync(idsOut + ".tmp", ids.map((v) => JSON.stringify(v)).join("\n") + "\n");
  fs.renameSync(idsOut + ".tmp", idsOut);
}
console.log(JSON.stringify({ bytes, documents: docs.length, tokens, batch, passes: runs }));
