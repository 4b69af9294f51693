// llama.cpp's next-token distributions on a GGUF model (tests/llama_cpp_blocks.sh): loads
// MODEL on the CPU through node-llama-cpp, evaluates token FIRST, then samples STEPS tokens at
// temperature 1 with no top-k / top-p / min-p cut (an end-of-text token sampled is fed back
// like any other), so that the probabilities it reports are
// the full softmax of its logits. Prints one JSON line per step: the input token and every
// token's probability, [[token, p], ...].
//
//   node tests/llama_cpp_blocks.mjs PKG_ROOT MODEL FIRST STEPS
import path from "node:path";
import {pathToFileURL} from "node:url";

const [pkgRoot, modelPath, firstArg, stepsArg] = process.argv.slice(2);
if (!stepsArg) {
  console.error("usage: node llama_cpp_blocks.mjs PKG_ROOT MODEL FIRST STEPS");
  process.exit(2);
}
const entry = path.join(pkgRoot, "node_modules", "node-llama-cpp", "dist", "index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(entry).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const steps = Number(stepsArg);
const context = await model.createContext({contextSize: steps + 8, batchSize: 8, threads: 1});
const sequence = context.getSequence();
let input = Number(firstArg);
const options = {temperature: 1, topK: 0, topP: 1, minP: 0, seed: 7, yieldEogToken: true};
let n = 0;
for await (const out of sequence.evaluateWithMetadata([input], {probabilities: true}, options)) {
  console.log(JSON.stringify({input, probs: [...out.probabilities.entries()]}));
  input = out.token;
  if (++n >= steps) break;
}
await context.dispose();
await model.dispose();
await llama.dispose();
