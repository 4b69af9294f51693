// A GGUF file as Hugging Face's GGUF reader (npm @huggingface/gguf, used by the Hub to show
// GGUF models) parses it (tests/gguf_hf_reader.sh): prints one JSON document with every
// metadata key and value, every tensor info (name, shape innermost first, ggml type,
// offset) and the data section's offset. 64-bit integers are printed as numbers.
//
//   node tests/gguf_hf_reader.mjs PKG_ROOT FILE
import path from "node:path";
import {pathToFileURL} from "node:url";

const [pkgRoot, file] = process.argv.slice(2);
if (!file) {
  console.error("usage: node gguf_hf_reader.mjs PKG_ROOT FILE");
  process.exit(2);
}
const entry = path.join(pkgRoot, "node_modules", "@huggingface", "gguf", "dist", "index.mjs");
const {gguf} = await import(pathToFileURL(entry).href);
const r = await gguf(path.resolve(file), {allowLocalFile: true});
const plain = (v) => (typeof v === "bigint" ? Number(v) : Array.isArray(v) ? v.map(plain) : v);
const metadata = {};
for (const [k, v] of Object.entries(r.metadata)) metadata[k] = plain(v);
const tensors = r.tensorInfos.map((t) => ({name: t.name, shape: t.shape.map(plain), dtype: t.dtype, offset: plain(t.offset)}));
console.log(JSON.stringify({metadata, tensors, tensorDataOffset: plain(r.tensorDataOffset)}));
