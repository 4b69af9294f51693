// bench_zaya1_base --quant TYPE (included by bench/zaya1_base.cpp): quantized against bf16
// decode on the full ZAYA1-base shape, in one run so the ratios share the machine's state.
#pragma once
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/mem_bench.h"
#include "ckpt/hf_mmap.h"
#include "core/io.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/linear_quant.h"
#include "model/infer.h"
#include "quant/convert/quantize_model.h"

namespace zaya::qbench {

struct QuantBenchArgs {
  std::string dir, type, config;  // config: the TOML the model was made from (the 16 GB child loads it too)
  bool kv_fp32 = false, reuse = false;
  int prompt = 512, steps = 16, threads = 1;
  double triad_given = 0, triad_start = 0;
  int rounds = 1;  // alternated pairs of the two decodes
};

inline void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

inline double triad_now(int threads) {
  bench::StreamRun r = bench::run_stream(int64_t(32) << 20, 10, threads);
  for (auto& k : r.kernels)
    if (k.name == "triad") return k.best_MBps / 1e3;
  fail("STREAM run has no triad");
}

inline std::vector<int32_t> random_ids(int n, int V, uint64_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  Philox r(seed, 7);
  for (auto& x : v) x = int32_t(r.below(uint64_t(V)));
  return v;
}

// One model's run: load, prefill, batch-1 decode of a fixed token sequence (the same for
// every model, so logits compare position by position), log-probs of a fixed sequence.
inline long major_faults_now() {
  struct rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_majflt;
}

struct ModelRun {
  std::string name;
  double load_s = 0, prefill_s = 0, decode_s = 0, bytes_per_token = 0, triad = 0;
  size_t peak_rss = 0, rss_before = 0;
  uint64_t file_bytes = 0;
  long major_faults = 0;  // during the timed steps: weight pages read back from disk
  std::vector<std::vector<float>> logits;  // per decode step
  std::string profile;                      // DecodeProfile::table() of the timed steps
  std::vector<double> logprobs;
};

// `score`: also the log-probs of a fixed sequence (the first round; later rounds time decode).
inline ModelRun run_model(const std::string& name, const std::string& dir, const ModelConfig& cfg,
                          const QuantBenchArgs& a, bool score = true) {
  ModelRun r;
  r.name = name;
  reset_peak();
  // What the process holds before this model loads, which the peak includes: after the bf16
  // run on a CPU whose bf16 products run on oneDNN (no AMX), ~1.1 GB that stays allocated
  // after its scoring pass (0.05 GB with ZAYA_BF16_GEMM=own). The 16 GB child runs each
  // model alone.
  r.rss_before = current_rss_bytes();
  Timer tl;
  InferModel model(cfg, open_hf_weights(dir));
  r.load_s = tl.seconds();
  r.file_bytes = model.stored_bytes();
  const int V = cfg.vocab_size;
  const KvCacheDType kv = a.kv_fp32 ? KvCacheDType::F32 : KvCacheDType::BF16;  // bf16 for both models
  {
    InferDecoder dec(model, 1, a.prompt + a.steps + 4, kv);
    const auto p = random_ids(a.prompt, V, 1);
    Timer tp;
    dec.feed(p.data(), a.prompt);
    r.prefill_s = tp.seconds();
    const auto steps = random_ids(a.steps + 2, V, 2);
    dec.feed(&steps[0], 1);  // warm-up
    dec.feed(&steps[1], 1);
    size_t peak = peak_rss_bytes();
    const double tr0 = a.triad_given > 0 ? a.triad_given : triad_now(a.threads);
    reset_peak();
    // The logits' copies, allocated and touched before the clock starts: a fresh 1 MB per
    // step cost 3.7-4.1 ms of page faults on the Zen 5 VM (15% of a q4_k step).
    r.logits.assign(size_t(a.steps), std::vector<float>(size_t(V), 0.f));
    double bytes = 0;
    DecodeProfile prof;  // where the timed steps go (after the triad: the same steps)
    dec.set_profile(&prof);
    const long mf0 = major_faults_now();
    Timer td;
    for (int s = 0; s < a.steps; ++s) {
      const float* lg = dec.feed(&steps[size_t(s) + 2], 1);
      bytes += double(dec.last_weight_bytes());
      std::copy(lg, lg + V, r.logits[size_t(s)].begin());  // 1 MB per step, outside the weight reads
    }
    r.decode_s = td.seconds();
    r.major_faults = major_faults_now() - mf0;
    dec.set_profile(nullptr);
    r.profile = prof.tokens() ? prof.table() : "";
    peak = std::max(peak, peak_rss_bytes());
    const double tr1 = a.triad_given > 0 ? a.triad_given : triad_now(a.threads);
    reset_peak();
    r.triad = 0.5 * (tr0 + tr1);
    r.bytes_per_token = bytes / a.steps;
    // Log-probs of a fixed 256-token sequence (a fresh context).
    if (score) {
      InferDecoder lp(model, 1, 260, kv);
      const auto seq = random_ids(256, V, 3);
      r.logprobs = lp.logprobs(seq.data(), 256, 128);
    }
    r.peak_rss = std::max(peak, peak_rss_bytes());
  }
  std::printf("%-5s load %.1f s, prefill %d tokens %.2f s (%.1f tokens/s), decode %.2f tokens/s (%.1f ms/token), "
              "%.3f GB weights/token, triad %.1f GB/s -> roofline %.1f ms, ratio %.2f; peak RSS %.2f GB (files %.2f GB; %.2f GB held before the load)\n",
              name.c_str(), r.load_s, a.prompt, r.prefill_s, a.prompt / r.prefill_s, a.steps / r.decode_s,
              r.decode_s / a.steps * 1e3, r.bytes_per_token / 1e9, r.triad, r.bytes_per_token / (r.triad * 1e9) * 1e3,
              r.bytes_per_token / (r.triad * 1e9) / (r.decode_s / a.steps), r.peak_rss / 1e9, r.file_bytes / 1e9,
              r.rss_before / 1e9);
  // Memory too small for the file and what else the page cache holds: the kernel evicts
  // weight pages the decode then reads back from disk, and the step times disk, not memory.
  if (r.major_faults)
    std::printf("%-5s %ld major page faults in the timed steps: weights read back from disk, not a memory-bound decode\n",
                name.c_str(), r.major_faults);
  if (!r.profile.empty()) std::printf("%s %s", name.c_str(), r.profile.c_str());
  std::fflush(stdout);
  return r;
}

// The 16 GB test: this binary again, with RLIMIT_AS = 16 GiB set before exec, loading the
// model and decoding a few tokens. Returns the child's exit status (0: it ran).
inline int limit_test(const std::string& dir, const std::string& config, bool kv_fp32) {
  const pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl{};
    rl.rlim_cur = rl.rlim_max = rlim_t(16) << 30;
    setrlimit(RLIMIT_AS, &rl);
    const char* kv = kv_fp32 ? "fp32" : "bf16";
    execl("/proc/self/exe", "bench_zaya1_base", "--config", config.c_str(), "--limit-child", dir.c_str(), "--kv", kv,
          (char*)nullptr);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

inline void logit_stats(const ModelRun& ref, const ModelRun& q) {
  double se = 0, sr = 0, maxe = 0;
  int agree = 0;
  for (size_t s = 0; s < ref.logits.size(); ++s) {
    const auto& a = ref.logits[s];
    const auto& b = q.logits[s];
    for (size_t i = 0; i < a.size(); ++i) {
      const double d = double(b[i]) - a[i];
      se += d * d, sr += double(a[i]) * a[i];
      maxe = std::isfinite(d) ? std::max(maxe, std::fabs(d)) : INFINITY;  // std::max(x, NaN) keeps x
    }
    agree += std::max_element(a.begin(), a.end()) - a.begin() == std::max_element(b.begin(), b.end()) - b.begin();
  }
  double lpm = 0, lpx = 0, ppl_a = 0, ppl_b = 0;
  for (size_t i = 0; i < ref.logprobs.size(); ++i) {
    const double d = std::fabs(q.logprobs[i] - ref.logprobs[i]);
    lpm += d, lpx = std::isfinite(d) ? std::max(lpx, d) : INFINITY, ppl_a -= ref.logprobs[i], ppl_b -= q.logprobs[i];
  }
  const double n = double(ref.logprobs.size());
  std::printf("logits vs bf16 (%zu decode steps, random weights): rms error / rms logit %.4f, max |error| %.4f, "
              "top-1 agreement %d/%zu\n",
              ref.logits.size(), std::sqrt(se / sr), maxe, agree, ref.logits.size());
  std::printf("log-probs vs bf16 (%zu positions): mean |delta| %.5f, max |delta| %.5f nats; perplexity %.2f -> %.2f "
              "(%+.3f%%)\n",
              ref.logprobs.size(), lpm / n, lpx, std::exp(ppl_a / n), std::exp(ppl_b / n),
              100 * (std::exp((ppl_b - ppl_a) / n) - 1));
}

// The bytes of the regular files in dir.
inline uint64_t dir_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

inline void run_quant_bench(const QuantBenchArgs& a, const ModelConfig& cfg) {
  namespace fs = std::filesystem;
  quant::QType t;
  if (!quant::qtype_parse(a.type.c_str(), &t) || !(t == quant::QType::Q8_0 || t == quant::QType::Q4_0 || t == quant::QType::Q4_K))
    fail("--quant '", a.type, "': expected q8_0, q4_0 or q4_k");
  const std::string qdir = a.dir + "-" + a.type;
  std::printf("decode kernel %s, KV cache %s\n", linear_quant_kernel(), a.kv_fp32 ? "fp32" : "bf16");
  if (!(a.reuse && is_gguf_model_dir(qdir))) {
    reset_peak();
    QuantizeOptions o;
    o.type = t;
    o.force = true;
    const QuantizeSummary s = quantize_model(a.dir, qdir, o);
    std::printf("quantize %s -> %s: %zu tensors, %.2f GB -> %.2f GB in %.1f s (%.1f min), peak RSS %.2f GB\n",
                a.dir.c_str(), qdir.c_str(), s.tensors, s.src_bytes / 1e9, s.dst_bytes / 1e9, s.seconds,
                s.seconds / 60, s.peak_rss / 1e9);
  } else {
    std::printf("reusing %s\n", qdir.c_str());
  }
  std::fflush(stdout);
  // Where the page cache cannot hold both models beside the process's own memory (up to ~1.2
  // GB), the kernel's and other processes' (bf16 17.7 GB and q4_k 5.2 GB on a 23 GB machine),
  // the decode timed second would read part of its weights from disk: each model is then
  // timed with the other's files dropped from the cache.
  const uint64_t both = dir_bytes(a.dir) + dir_bytes(qdir), total = meminfo_bytes("MemTotal");
  const bool drop = total > 0 && both + (uint64_t(4) << 30) > total;
  if (drop)
    std::printf("models %.2f GB together, memory %.2f GB: each is timed with the other's files dropped from the page "
                "cache\n",
                both / 1e9, total / 1e9);
  ModelRun b0, q0;  // the first pair: logits and log-probs compared
  std::vector<double> in_run, same_triad, roof_b, roof_q;
  std::vector<bool> faulted;  // a round whose timed decodes read weights back from disk
  for (int round = 0; round < a.rounds; ++round) {
    if (a.rounds > 1) std::printf("-- round %d of %d\n", round + 1, a.rounds);
    // The order alternates (bf16 first in odd rounds): whatever the first decode leaves
    // behind (memory, the page cache) falls on each model in turn.
    ModelRun b, q;
    if (round % 2 == 0) {
      if (drop) drop_from_page_cache(qdir);
      b = run_model("bf16", a.dir, cfg, a, round == 0);
      if (drop) drop_from_page_cache(a.dir);
      q = run_model(a.type, qdir, cfg, a, round == 0);
    } else {
      if (drop) drop_from_page_cache(a.dir);
      q = run_model(a.type, qdir, cfg, a, false);
      if (drop) drop_from_page_cache(qdir);
      b = run_model("bf16", a.dir, cfg, a, false);
    }
    const double sb = a.steps / b.decode_s, sq = a.steps / q.decode_s;
    std::printf("speed-up %s / bf16: %.2fx tokens/s (%.2f vs %.2f); bytes/token %.3f vs %.3f GB (%.2fx fewer)\n",
                a.type.c_str(), sq / sb, sq, sb, q.bytes_per_token / 1e9, b.bytes_per_token / 1e9,
                b.bytes_per_token / q.bytes_per_token);
    // The two decodes run minutes apart, and a VM's memory bandwidth can move by 1.5x in that
    // time: each rate over the triad measured around it puts both at the same bandwidth.
    std::printf("speed-up %s / bf16 at the same triad bandwidth: %.2fx (tokens/s per triad GB/s: %.3f vs %.3f)\n",
                a.type.c_str(), (sq / q.triad) / (sb / b.triad), sq / q.triad, sb / b.triad);
    in_run.push_back(sq / sb);
    same_triad.push_back((sq / q.triad) / (sb / b.triad));
    roof_b.push_back(b.bytes_per_token / (b.triad * 1e9) / (b.decode_s / a.steps));
    roof_q.push_back(q.bytes_per_token / (q.triad * 1e9) / (q.decode_s / a.steps));
    faulted.push_back(b.major_faults + q.major_faults > 0);
    if (round == 0) b0 = std::move(b), q0 = std::move(q);
    std::fflush(stdout);
  }
  if (a.rounds > 1) {
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    };
    auto range = [](const std::vector<double>& v) {
      return std::pair{*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
    };
    auto summary = [&](const char* which, const std::vector<bool>& keep) {
      auto kept = [&](const std::vector<double>& v) {
        std::vector<double> k;
        for (size_t i = 0; i < v.size(); ++i)
          if (keep[i]) k.push_back(v[i]);
        return k;
      };
      const auto ir = kept(in_run), st = kept(same_triad), rb = kept(roof_b), rq = kept(roof_q);
      std::printf("median of %zu %s: speed-up %s / bf16 %.2fx in the round (%.2f-%.2f), %.2fx at the same triad "
                  "(%.2f-%.2f); roofline ratio bf16 %.2f (%.2f-%.2f), %s %.2f (%.2f-%.2f)\n",
                  ir.size(), which, a.type.c_str(), median(ir), range(ir).first, range(ir).second, median(st),
                  range(st).first, range(st).second, median(rb), range(rb).first, range(rb).second, a.type.c_str(),
                  median(rq), range(rq).first, range(rq).second);
    };
    summary("rounds", std::vector<bool>(faulted.size(), true));
    const long nf = std::count(faulted.begin(), faulted.end(), true);
    if (nf > 0 && nf < long(faulted.size())) {
      std::vector<bool> clean(faulted.size());
      for (size_t i = 0; i < clean.size(); ++i) clean[i] = !faulted[i];
      summary("rounds without major page faults", clean);
    }
  }
  logit_stats(b0, q0);
  for (const auto& [name, dir] : {std::pair{std::string("bf16"), a.dir}, std::pair{a.type, qdir}}) {
    const int rc = limit_test(dir, a.config, a.kv_fp32);
    std::printf("16 GB limit (RLIMIT_AS = 16 GiB, load + prefill 32 + decode 8): %s %s (exit %d)\n", name.c_str(),
                rc == 0 ? "runs" : "does NOT run", rc);
  }
}

}  // namespace zaya::qbench

// The child of limit_test: load, prefill 32 tokens, decode 8; exit 0 when all ran.
inline int limit_child(const std::string& dir, const zaya::ModelConfig& cfg, bool kv_fp32) {
  try {
    zaya::InferModel model(cfg, zaya::open_hf_weights(dir));
    zaya::InferDecoder dec(model, 1, 48, kv_fp32 ? zaya::KvCacheDType::F32 : zaya::KvCacheDType::BF16);
    const auto p = zaya::qbench::random_ids(40, cfg.vocab_size, 9);
    dec.feed(p.data(), 32);
    for (int i = 0; i < 8; ++i) dec.feed(&p[size_t(32 + i)], 1);
    std::printf("limit child: %s ran under the limit, peak RSS %.2f GB\n", dir.c_str(), zaya::peak_rss_bytes() / 1e9);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "limit child: %s\n", e.what());
    return 1;
  }
}

using zaya::qbench::QuantBenchArgs;
using zaya::qbench::run_quant_bench;
