// Full-shape ZAYA1-base on a CPU with bf16 weights used in place (issue 9): writes a
// random-weight bf16 HF directory (~17.7 GB, sharded), then measures load time, peak RSS,
// prefill tokens/s, decode tokens/s at batch 1 and 8, and the decode roofline ratio
//   (weight bytes read per step / STREAM triad bandwidth) / measured time per step,
// with the triad measured right before and after the batch-1 decode (their mean).
//   bench_zaya1_base [--dir D] [--keep] [--reuse] [--triad-gbs G] [--config TOML] [--kv bf16|fp32]
//                    [--prompt N] [--steps N] [--batch N] [--threads N] [--quant TYPE [--rounds N]]
//                    [--decode-only]
// Without --triad-gbs it runs STREAM triad (as `zaya bench mem`) on this machine first.
//
// --quant q8_0|q4_0|q4_k: quantized weights against bf16 in one run (bench/zaya1_base_quant.h):
// quantizes the bf16 directory into DIR-TYPE (reused with --reuse), then decodes batch 1 on
// bf16 and on the quantized model one after the other (tokens/s, weight bytes per token,
// roofline ratio of each against the triad measured around it, speed-up), the peak RSS of
// each, the logit and log-prob errors of the quantized model against bf16, and whether each
// runs under a 16 GB address-space limit (a child process with RLIMIT_AS = 16 GiB).
// --rounds N (with --quant): N pairs of the two decodes, bf16 first in odd rounds and second in
// even ones (each model loaded anew; the first pair also scores and compares logits), each
// pair's ratios, then their medians: a VM's memory bandwidth moves minute to minute, and one
// pair is one minute.
// --decode-only: decode the model directory --dir as it is (bf16 or quantized; nothing written,
// no bf16 reference): batch-1 decode with the triad measured around it, one line as each model
// of --quant prints (bench/llama_cpp_peer.sh runs it beside llama.cpp).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/mem_bench.h"
#include "ckpt/hf_mmap.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/linear_bf16.h"
#include "model/infer.h"
#include "zaya1_base_quant.h"

namespace fs = std::filesystem;
using namespace zaya;

namespace {

struct Args {
  std::string dir = "/tmp/zaya1_base_bench", config = ZAYA_SOURCE_DIR "/configs/zaya1-base.toml";
  std::string quant, limit_child;  // --quant TYPE; --limit-child DIR (internal: the 16 GB test)
  std::string kv = "bf16";
  bool keep = false, reuse = false, decode_only = false;
  double triad_gbs = 0;
  int prompt = 512, steps = 16, batch = 8, threads = 0, rounds = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) fail(k, " needs a value");
      return argv[++i];
    };
    if (k == "--dir") a.dir = val();
    else if (k == "--config") a.config = val();
    else if (k == "--keep") a.keep = true;
    else if (k == "--reuse") a.reuse = a.keep = true;
    else if (k == "--triad-gbs") a.triad_gbs = std::atof(val().c_str());
    else if (k == "--prompt") a.prompt = std::atoi(val().c_str());
    else if (k == "--steps") a.steps = std::atoi(val().c_str());
    else if (k == "--batch") a.batch = std::atoi(val().c_str());
    else if (k == "--threads") a.threads = std::atoi(val().c_str());
    else if (k == "--quant") a.quant = val();
    else if (k == "--rounds") a.rounds = std::atoi(val().c_str());
    else if (k == "--kv") a.kv = val();
    else if (k == "--limit-child") a.limit_child = val();
    else if (k == "--decode-only") a.decode_only = true;
    else fail("unknown option ", k, " (see the comment at the top of bench/zaya1_base.cpp)");
  }
  ZAYA_CHECK(a.prompt > 0 && a.steps > 0 && a.batch > 0 && a.rounds > 0,
             "--prompt, --steps, --batch and --rounds must be positive");
  return a;
}

// Linux: writing 5 to clear_refs resets VmHWM, so the peak covers only what follows.
void reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

double triad_gbs(int threads) {
  // 3 arrays of 256 MB: far beyond any cache.
  bench::StreamRun r = bench::run_stream(int64_t(32) << 20, 10, threads);
  for (auto& k : r.kernels)
    if (k.name == "triad") return k.best_MBps / 1e3;
  fail("STREAM run has no triad");
}

std::vector<int32_t> ids(int n, int V, uint64_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  Philox r(seed, 7);
  for (auto& x : v) x = int32_t(r.below(uint64_t(V)));
  return v;
}

// Greedy decode of `steps` tokens from the logits of the last feed; returns seconds and
// the mean weight bytes read per step.
std::pair<double, double> decode(InferDecoder& dec, const float* logits, int steps, int V) {
  const int B = dec.batch();
  std::vector<int32_t> next(static_cast<size_t>(B));
  double bytes = 0;
  Timer t;
  for (int s = 0; s < steps; ++s) {
    for (int b = 0; b < B; ++b) {
      const float* z = logits + size_t(b) * V;
      next[size_t(b)] = int32_t(std::max_element(z, z + V) - z);
    }
    logits = dec.feed(next.data(), 1);
    bytes += double(dec.last_weight_bytes());
  }
  return {t.seconds(), bytes / steps};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (a.threads > 0) omp_set_num_threads(a.threads);
    const int threads = omp_get_max_threads();
    const ModelConfig cfg = load_model_config(a.config);
    if (!a.limit_child.empty()) return limit_child(a.limit_child, cfg, a.kv == "fp32");
    if (a.decode_only) {
      ZAYA_CHECK(fs::exists(fs::path(a.dir) / "config.json"), a.dir, ": no model directory (config.json) to decode");
      QuantBenchArgs q{a.dir, "", a.config, a.kv == "fp32", true, a.prompt, a.steps, threads, a.triad_gbs, 0, 1};
      run_model(fs::path(a.dir).filename().string(), a.dir, cfg, q, false);
      return 0;
    }
    std::printf("model %s, %d threads, bf16 kernel %s\n", cfg.name.c_str(), threads, linear_bf16_kernel());
    const double triad = a.triad_gbs > 0 ? a.triad_gbs : triad_gbs(threads);
    std::printf("STREAM triad %.2f GB/s%s\n", triad, a.triad_gbs > 0 ? " (given)" : " (measured now)");
    if (!(a.reuse && fs::exists(fs::path(a.dir) / "config.json"))) {
      Timer tw;
      const uint64_t bytes = write_random_hf_bf16(a.dir, cfg, 1, size_t(1) << 30);
      std::printf("wrote %s: %.2f GB in %.1f s\n", a.dir.c_str(), bytes / 1e9, tw.seconds());
    }
    if (!a.quant.empty()) {
      QuantBenchArgs q{a.dir,  a.quant, a.config, a.kv == "fp32", a.reuse, a.prompt,
                       a.steps, threads, a.triad_gbs, triad, a.rounds};
      run_quant_bench(q, cfg);
      if (!a.keep) {
        fs::remove_all(a.dir);
        std::printf("removed %s\n", a.dir.c_str());
      }
      return 0;
    }
    reset_peak_rss();
    const size_t rss0 = current_rss_bytes();
    size_t peak = 0;
    Timer tl;
    InferModel model(cfg, open_hf_weights(a.dir));
    const double load_s = tl.seconds();
    std::printf("load: %.2f s (%.2f GB mapped)\n", load_s, model.stored_bytes() / 1e9);
    const int V = cfg.vocab_size;
    // Read-only bandwidth over up to 2 GB of the mapped weights themselves, for comparison:
    // STREAM triad counts a write stream (and runs on fresh anonymous memory), a decode step
    // only reads, from the page cache.
    std::vector<std::pair<const void*, size_t>> ranges;
    size_t covered = 0;
    for (auto& [name, v] : model.store().all())
      if (covered < (size_t(2) << 30) && v.bytes() >= (size_t(1) << 20)) {
        ranges.emplace_back(v.data, v.bytes());
        covered += v.bytes();
      }
    const double read_gbs = bench::read_bandwidth_gbs(ranges, threads, 3);
    std::printf("read-only bandwidth over %.2f GB of the mapped weights: %.2f GB/s\n", covered / 1e9, read_gbs);
    {  // prefill at batch 1, then decode at batch 1
      InferDecoder dec(model, 1, a.prompt + a.steps + 4, a.kv == "fp32" ? KvCacheDType::F32 : KvCacheDType::BF16);
      auto p = ids(a.prompt, V, 1);
      Timer tp;
      const float* lg = dec.feed(p.data(), a.prompt);
      const double pre_s = tp.seconds();
      std::printf("prefill %d tokens: %.2f s, %.1f tokens/s (first touch of the mapped weights included)\n",
                  a.prompt, pre_s, a.prompt / pre_s);
      decode(dec, lg, 2, V);  // warm-up
      // This VM's bandwidth moves with its neighbours within minutes (triad 38-77 GB/s within
      // one hour): the roofline uses the triad measured right before and right after the
      // decode, not only the one at the start of the run.
      // STREAM's arrays are not the model's memory: the peak RSS leaves them out.
      const bool measure = a.triad_gbs <= 0;
      const auto around = [&] {
        peak = std::max(peak, peak_rss_bytes());
        const double g = measure ? triad_gbs(threads) : triad;
        reset_peak_rss();
        return g;
      };
      const double tr0 = around();
      auto [s, bytes] = decode(dec, dec.feed(p.data(), 1), a.steps, V);
      const double tr1 = around(), tr = 0.5 * (tr0 + tr1);
      const double per_tok = s / a.steps, ideal = bytes / (tr * 1e9);
      std::printf("decode batch 1: %.2f tokens/s (%.1f ms/token), %.3f GB weights/token, roofline %.1f ms -> "
                  "ratio %.2f\n",
                  a.steps / s, per_tok * 1e3, bytes / 1e9, ideal * 1e3, ideal / per_tok);
      if (measure)
        std::printf("  triad around the decode: %.2f before, %.2f after, mean %.2f GB/s (at the start of the run "
                    "%.2f: ratio %.2f)\n",
                    tr0, tr1, tr, triad, bytes / (triad * 1e9) / per_tok);
      // The tied LM head alone (one [V, D] product, the largest read of a step), to split
      // the step into head and layers.
      const Linear& head = model.embed;
      std::vector<float> xh(size_t(head.K), 0.01f), yh(size_t(head.N));
      Timer th;
      for (int r = 0; r < 3; ++r) head.apply(yh.data(), head.N, xh.data(), head.K, 1);
      const double head_s = th.seconds() / 3;
      std::printf("  %.2f of the read-only bandwidth of the mapped weights (%.1f ms at %.2f GB/s)\n",
                  bytes / (read_gbs * 1e9) / per_tok, bytes / (read_gbs * 1e9) * 1e3, read_gbs);
      std::printf("  of which LM head %.1f ms (%.1f GB/s), layers %.1f ms (%.1f GB/s)\n", head_s * 1e3,
                  head.bytes() / head_s / 1e9, (per_tok - head_s) * 1e3,
                  (bytes - double(head.bytes())) / (per_tok - head_s) / 1e9);
    }
    {  // batched decode: `batch` prompts of 32 tokens, then steps
      InferDecoder dec(model, a.batch, 32 + a.steps + 3, a.kv == "fp32" ? KvCacheDType::F32 : KvCacheDType::BF16);
      auto p = ids(32 * a.batch, V, 2);
      const float* lg = dec.feed(p.data(), 32);
      auto [s, bytes] = decode(dec, lg, a.steps, V);
      std::printf("decode batch %d: %.2f tokens/s (%.1f ms/step), %.3f GB weights/step\n", a.batch,
                  a.batch * a.steps / s, s / a.steps * 1e3, bytes / 1e9);
    }
    peak = std::max(peak, peak_rss_bytes());
    std::printf("peak RSS: %.2f GB (at load start %.2f GB; model files %.2f GB)\n", peak / 1e9, rss0 / 1e9,
                model.stored_bytes() / 1e9);
    if (!a.keep) {
      fs::remove_all(a.dir);
      std::printf("removed %s\n", a.dir.c_str());
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_zaya1_base: %s\n", e.what());
    return 1;
  }
}
