// The weight reads of a decode step without the rest of the step: for each of N tokens, every
// layer's products (CCA projections and conv mix, router, one random expert's fc1 and fc2)
// back to back through linear_bf16_team in one OpenMP region, as InferDecoder runs them, but
// with nothing in between. Then the same with the experts alone, without them, and the LM
// head alone. It shows how fast the kernel streams each kind of matrix on its own; compare
// with bench_zaya1_base's decode split. On the 2-core dev VM (one pass, a fast minute): layers
// 55-56 GB/s, experts alone 64-66, without experts 49-53, LM head 68-71. Passes alternate even
// shares and even shares with stealing (kernels/team_rows.h), as the decoder runs them.
//   bench_decode_stream DIR [--tokens N] [--seed S]     (DIR: an HF directory, bf16)
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/hf_mmap.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/linear_bf16.h"
#include "model/infer.h"

using namespace zaya;

namespace {

// GB/s of one pass of `seq` in one region (every thread calls every product, a barrier after
// each, as decode does), with even shares, and with stealing as the decoder has it.
double stream(const std::vector<const Linear*>& seq, std::vector<float>& x, std::vector<float>& y, bool steal) {
  double bytes = 0;
  for (const Linear* l : seq) bytes += double(l->bytes());
  TeamSteal team;
  team.reset(omp_get_max_threads());
  Timer t;
#pragma omp parallel
  for (const Linear* l : seq) {
    l->apply_team(y.data(), l->N, x.data(), l->K, 1, 0.f, nullptr, steal ? &team : nullptr);
#pragma omp barrier
  }
  return bytes / t.seconds() / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) fail("usage: bench_decode_stream DIR [--tokens N] [--seed S]");
    const std::string dir = argv[1];
    int tokens = 32;
    uint64_t seed = 1;
    for (int i = 2; i < argc; ++i) {
      const std::string k = argv[i];
      if (i + 1 >= argc) fail(k, " needs a value");
      if (k == "--tokens") tokens = std::atoi(argv[++i]);
      else if (k == "--seed") seed = std::strtoull(argv[++i], nullptr, 10);
      else fail("unknown option ", k);
    }
    ZAYA_CHECK(tokens > 0, "--tokens must be positive");
    InferModel m(load_model_config(dir), open_hf_weights(dir));
    std::vector<const Linear*> all, experts, rest;
    Philox rng(seed, 3);
    for (int t = 0; t < tokens; ++t)
      for (const InferModel::Sublayer& s : m.sub) {
        if (s.attention) {
          for (const Linear* l : {&s.a.q, &s.a.k, &s.a.v1, &s.a.v2, &s.a.conv1, &s.a.o}) all.push_back(l), rest.push_back(l);
          continue;
        }
        for (const Linear* l : {&s.m.down, &s.m.mlp0, &s.m.mlp2, &s.m.mlp4}) all.push_back(l), rest.push_back(l);
        const size_t e = size_t(rng.below(uint64_t(s.m.fc1.size())));
        for (const Linear* l : {&s.m.fc1[e], &s.m.fc2[e]}) all.push_back(l), experts.push_back(l);
      }
    size_t width = size_t(m.embed.N);
    for (const Linear* l : all) width = std::max(width, size_t(std::max(l->N, l->K)));
    std::vector<float> x(width, 0.01f), y(width);
    std::printf("%s: %d threads, kernel %s, %d tokens\n", dir.c_str(), omp_get_max_threads(), linear_bf16_kernel(),
                tokens);
    for (int pass = 0; pass < 4; ++pass) {  // the first pass also faults in what populate left
      const bool steal = pass % 2;  // alternated
      const double a = stream(all, x, y, steal), e = stream(experts, x, y, steal), r = stream(rest, x, y, steal);
      const double h = stream(std::vector<const Linear*>(3, &m.embed), x, y, steal);
      std::printf("pass %d%s: layers %.1f GB/s | experts alone %.1f | layers without experts %.1f | LM head %.1f\n",
                  pass, steal ? " (stealing)" : "", a, e, r, h);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_decode_stream: %s\n", e.what());
    return 1;
  }
}
