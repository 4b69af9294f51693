// llama.cpp's decode on a GGUF model, through node-llama-cpp's prebuilt CPU build (the
// peer of bench/llama_cpp_peer.sh): loads MODEL memory-mapped on the CPU with THREADS
// threads, evaluates a prompt of PROMPT token ids, then decodes greedily, WARMUP untimed
// tokens and STEPS timed ones, one token a step as `zaya generate` does. Prints one JSON line:
// prefill seconds, the median and fastest ms per decoded token, llama.cpp's system info and
// the CPU backend it loaded (the libggml-cpu-<variant>.so mapped into this process).
//
//   node bench/llama_cpp_peer.mjs PKG_ROOT MODEL THREADS PROMPT STEPS WARMUP
//
// PKG_ROOT holds node_modules/node-llama-cpp (bench/llama_cpp_peer.sh installs it).
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [pkgRoot, modelPath, threadsArg, promptArg, stepsArg, warmupArg] = process.argv.slice(2);
if (!warmupArg) {
  console.error("usage: node llama_cpp_peer.mjs PKG_ROOT MODEL THREADS PROMPT STEPS WARMUP");
  process.exit(2);
}
const [threads, prompt, steps, warmup] = [threadsArg, promptArg, stepsArg, warmupArg].map(Number);
for (const [name, v] of [["THREADS", threads], ["PROMPT", prompt], ["STEPS", steps], ["WARMUP", warmup]])
  if (!Number.isInteger(v) || v < (name === "WARMUP" ? 0 : 1)) {
    console.error(`llama_cpp_peer.mjs: ${name} ${v}: expected a positive integer`);
    process.exit(2);
  }
if (!fs.existsSync(modelPath)) {
  console.error(`llama_cpp_peer.mjs: ${modelPath}: no such file`);
  process.exit(1);
}
const entry = path.join(pkgRoot, "node_modules", "node-llama-cpp", "dist", "index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(entry).href);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap: true});
const context = await model.createContext({contextSize: prompt + warmup + steps + 16, batchSize: prompt, threads});
const sequence = context.getSequence();

// Prompt ids past the control and byte pieces, from a fixed LCG (the weights are random: any
// ids will do, and the same ones every run).
let state = 12345;
const ids = Array.from({length: prompt}, () => {
  state = (state * 1103515245 + 12345) % 2147483648;
  return 259 + (state % 60000);
});

const times = [];
let t = performance.now();
const t0 = t;
let prefill = 0;
for await (const token of sequence.evaluate(ids, {temperature: 0})) {
  void token;
  const now = performance.now();
  if (prefill === 0) prefill = (now - t0) / 1000;  // the prompt and the first token
  else times.push(now - t);
  t = now;
  if (times.length >= warmup + steps) break;
}
const timed = times.slice(warmup).sort((a, b) => a - b);
const median = timed.length % 2 ? timed[(timed.length - 1) / 2] : (timed[timed.length / 2 - 1] + timed[timed.length / 2]) / 2;
const backend = fs.readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-([A-Za-z0-9_]+)\.so/);
console.log(JSON.stringify({
  model: modelPath,
  threads,
  prompt,
  steps: timed.length,
  prefill_s: prefill,
  ms_per_token: median,
  ms_per_token_min: timed[0],
  tokens_per_s: 1000 / median,
  llama_cpp: llama.llamaCppRelease.release,
  cpu_backend: backend ? backend[1] : "unknown",
  system_info: llama.systemInfo.trim(),
}));
await context.dispose();
await model.dispose();
await llama.dispose();
