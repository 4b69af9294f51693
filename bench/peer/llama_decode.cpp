// llama.cpp's decode loop, as llama-bench's "tg" test runs it: llama_decode of one token at a
// time with the logits of the LM head computed, no sampling, timed per token. Built by
// bench/llama_cpp_peer.sh against the llama.h of node-llama-cpp's pinned llama.cpp (from the
// package's source bundle) and linked with the package's prebuilt libraries; not part of the
// zaya build. Prints one JSON line: prefill seconds, the mean (as llama-bench and
// bench_zaya1_base report), median and fastest ms per token,
// llama.cpp's system info and the CPU backend variant it loaded.
//   llama_decode BINS_DIR MODEL THREADS PROMPT STEPS WARMUP
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: llama_decode BINS_DIR MODEL THREADS PROMPT STEPS WARMUP\n");
    return 2;
  }
  const char* bins = argv[1];
  const char* path = argv[2];
  const int threads = std::atoi(argv[3]), prompt = std::atoi(argv[4]), steps = std::atoi(argv[5]),
            warmup = std::atoi(argv[6]);
  if (threads < 1 || prompt < 1 || steps < 1 || warmup < 0) {
    std::fprintf(stderr, "llama_decode: THREADS, PROMPT, STEPS must be positive, WARMUP not negative\n");
    return 2;
  }
  llama_log_set([](ggml_log_level level, const char* text, void*) {
    if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
  }, nullptr);
  ggml_backend_load_all_from_path(bins);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mode = LLAMA_LOAD_MODE_MMAP;  // as node-llama-cpp and llama-cli load a model
  mp.progress_callback = [](float, void*) { return true; };  // no progress dots
  llama_model* model = llama_model_load_from_file(path, mp);
  if (!model) {
    std::fprintf(stderr, "llama_decode: %s: cannot load\n", path);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(prompt + warmup + steps + 16);
  cp.n_batch = cp.n_ubatch = uint32_t(prompt);
  cp.n_threads = cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llama_decode: %s: cannot create a context\n", path);
    return 1;
  }
  // Token ids past the control and byte pieces (259..458), from a fixed LCG: the weights
  // are random, any ids will do, and the same ones every run.
  uint32_t state = 12345;
  auto next_id = [&] {
    state = state * 1103515245u + 12345u;
    return llama_token(259 + (state >> 8) % 200);
  };
  std::vector<llama_token> ids(static_cast<size_t>(prompt));
  for (auto& t : ids) t = next_id();
  double t0 = now();
  if (llama_decode(ctx, llama_batch_get_one(ids.data(), prompt))) {
    std::fprintf(stderr, "llama_decode: the prompt failed\n");
    return 1;
  }
  llama_synchronize(ctx);
  const double prefill = now() - t0;
  std::vector<double> ms;
  for (int i = 0; i < warmup + steps; ++i) {
    llama_token tok = next_id();
    t0 = now();
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1))) {
      std::fprintf(stderr, "llama_decode: step %d failed\n", i);
      return 1;
    }
    llama_synchronize(ctx);
    if (i >= warmup) ms.push_back((now() - t0) * 1e3);
  }
  std::vector<double> s = ms;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  const double median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  double mean = 0;
  for (double x : ms) mean += x / double(n);
  std::ifstream maps("/proc/self/maps");
  std::stringstream all;
  all << maps.rdbuf();
  std::smatch m;
  const std::string text = all.str();
  const std::string backend = std::regex_search(text, m, std::regex("libggml-cpu-([A-Za-z0-9_]+)\\.so")) ? m[1].str() : "unknown";
  std::string info = llama_print_system_info();
  while (!info.empty() && (info.back() == ' ' || info.back() == '\n')) info.pop_back();
  for (char& c : info)
    if (c == '"' || c == '\\') c = ' ';
  std::printf("{\"model\": \"%s\", \"threads\": %d, \"prompt\": %d, \"steps\": %zu, \"prefill_s\": %.4f, "
              "\"ms_per_token\": %.4f, \"ms_per_token_median\": %.4f, \"ms_per_token_min\": %.4f, \"tokens_per_s\": %.3f, "
              "\"cpu_backend\": \"%s\", "
              "\"system_info\": \"%s\"}\n",
              path, threads, prompt, n, prefill, mean, median, s[0], 1e3 / mean, backend.c_str(), info.c_str());
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
