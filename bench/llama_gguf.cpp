// A llama-architecture model with random weights as a GGUF file, for the llama.cpp decode
// peer (bench/llama_cpp_peer.sh): llama.cpp cannot run a ZAYA model, so the peer runs a dense
// model that reads what a ZAYA1-base decode step reads. The defaults give it ZAYA1-base's
// bytes per step: the tied 262,272 x 2048 embedding / LM head, and 21 layers (GQA attention
// 16 / 4 heads of 128, SwiGLU FFN 4096: one ZAYA1-base expert's shape) whose matrices hold
// as many weights (750M) as the attention and the one routed expert of ZAYA1-base's 80
// sub-layers (bf16 2.57 GB against 2.58; q8_0 1.37 GB; q4_k with a q6_k head 0.86 GB).
//   bench_llama_gguf OUT.gguf --type bf16|q8_0|q4_k [--layers 21] [--hidden 2048] [--ffn 4096]
//                    [--heads 16] [--kv-heads 4] [--vocab 262272] [--seed 1] [--std 0.02]
//                    [--embedding-type bf16|q8_0|q4_0|q4_k|q6_k] [--zero-layers] [--dump-embedding F]
// Weight types as zaya quantize's mixes: every matrix in the type, the embedding in the same
// type (q6_k in a q4_k file; --embedding-type sets it), norms f32 (ones). Weights uniform
// with standard deviation --std. --zero-layers writes the layers' matrices as zeros: each
// layer then adds nothing to the residual stream, and the logits are those of the embedding
// alone, E (rmsnorm(E[token]) * w) (tests/llama_cpp_blocks.sh checks llama.cpp's against
// them); the output norm's w is then uniform in [0, 2), so that an element misplaced within
// a block would show (with w all ones, the logits do not depend on the order of the dims).
// --dump-embedding writes the embedding's fp32 values before quantizing (raw little-endian
// float32, vocab x hidden), against which the test measures the decoded values' error.
// The vocabulary is a placeholder SentencePiece-style one (<unk> <s> </s>, 256 byte pieces,
// then "t<i>"): the peer feeds token ids. Written through the same GgufWriter and block
// quantizers as `zaya quantize`. Prints the weight bytes a decode step reads.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/timer.h"
#include "quant/blocks.h"
#include "quant/gguf.h"

using namespace zaya;
using quant::QType;

namespace {

struct Args {
  std::string out, type;
  int layers = 21, hidden = 2048, ffn = 4096, heads = 16, kv_heads = 4, vocab = 262272;
  uint64_t seed = 1;
  double std = 0.02;
  std::string embedding_type, dump_embedding;
  bool zero_layers = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) fail(k, " needs a value");
      return argv[++i];
    };
    auto pos_int = [&](int* dst) {
      const std::string v = val();
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (*end || x <= 0 || x > (1 << 24)) fail(k, " ", v, ": expected a positive integer");
      *dst = int(x);
    };
    if (k == "--type") a.type = val();
    else if (k == "--layers") pos_int(&a.layers);
    else if (k == "--hidden") pos_int(&a.hidden);
    else if (k == "--ffn") pos_int(&a.ffn);
    else if (k == "--heads") pos_int(&a.heads);
    else if (k == "--kv-heads") pos_int(&a.kv_heads);
    else if (k == "--vocab") pos_int(&a.vocab);
    else if (k == "--seed") a.seed = std::strtoull(val().c_str(), nullptr, 10);
    else if (k == "--std") a.std = std::atof(val().c_str());
    else if (k == "--embedding-type") a.embedding_type = val();
    else if (k == "--zero-layers") a.zero_layers = true;
    else if (k == "--dump-embedding") a.dump_embedding = val();
    else if (!k.empty() && k[0] != '-' && a.out.empty()) a.out = k;
    else fail("bench_llama_gguf: unknown option ", k, " (see the comment at the top of bench/llama_gguf.cpp)");
  }
  if (a.out.empty()) fail("bench_llama_gguf: OUT.gguf is required");
  if (a.type != "bf16" && a.type != "q8_0" && a.type != "q4_k") fail("--type ", a.type, ": expected bf16, q8_0 or q4_k");
  if (!(a.std > 0 && a.std < 1e3)) fail("--std: expected a positive number");
  if (a.hidden % a.heads || a.heads % a.kv_heads) fail("--heads ", a.heads, " must divide --hidden and be a multiple of --kv-heads");
  return a;
}

struct Tensor {
  std::string name;
  int64_t K, N;  // rows of K (the product's depth), N rows; N == 1 for a norm
  QType type;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    const QType mat = a.type == "bf16" ? QType::BF16 : a.type == "q8_0" ? QType::Q8_0 : QType::Q4_K;
    QType emb = a.type == "q4_k" ? QType::Q6_K : mat;
    if (!a.embedding_type.empty() &&
        (!quant::qtype_parse(a.embedding_type.c_str(), &emb) || emb == QType::F32 || emb == QType::F16))
      fail("--embedding-type ", a.embedding_type, ": expected bf16, q8_0, q4_0, q4_k or q6_k");
    const int hd = a.hidden / a.heads, kv = hd * a.kv_heads;
    for (const int64_t K : {int64_t(a.hidden), int64_t(a.ffn)})
      if (K % quant::qtype_block(mat) || K % quant::qtype_block(emb))
        fail("rows of ", K, " do not fit ", quant::qtype_name(uint32_t(mat)), " blocks");
    std::vector<Tensor> ts;
    ts.push_back({"token_embd.weight", a.hidden, a.vocab, emb});
    ts.push_back({"output_norm.weight", a.hidden, 1, QType::F32});
    for (int l = 0; l < a.layers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      ts.push_back({b + "attn_norm.weight", a.hidden, 1, QType::F32});
      ts.push_back({b + "attn_q.weight", a.hidden, a.hidden, mat});
      ts.push_back({b + "attn_k.weight", a.hidden, kv, mat});
      ts.push_back({b + "attn_v.weight", a.hidden, kv, mat});
      ts.push_back({b + "attn_output.weight", a.hidden, a.hidden, mat});
      ts.push_back({b + "ffn_norm.weight", a.hidden, 1, QType::F32});
      ts.push_back({b + "ffn_gate.weight", a.hidden, a.ffn, mat});
      ts.push_back({b + "ffn_up.weight", a.hidden, a.ffn, mat});
      ts.push_back({b + "ffn_down.weight", a.ffn, a.hidden, mat});
    }

    quant::GgufWriter w;
    w.kv_string("general.architecture", "llama");
    w.kv_string("general.name", "zaya-bench-llama-" + a.type);
    w.kv_u32("general.file_type", a.type == "bf16" ? 32 : a.type == "q8_0" ? 7 : 14);
    w.kv_u32("general.quantization_version", 2);
    w.kv_u32("general.alignment", quant::kGgufAlignment);
    w.kv_u32("llama.context_length", 4096);
    w.kv_u32("llama.embedding_length", uint32_t(a.hidden));
    w.kv_u32("llama.block_count", uint32_t(a.layers));
    w.kv_u32("llama.feed_forward_length", uint32_t(a.ffn));
    w.kv_u32("llama.attention.head_count", uint32_t(a.heads));
    w.kv_u32("llama.attention.head_count_kv", uint32_t(a.kv_heads));
    w.kv_u32("llama.rope.dimension_count", uint32_t(hd));
    w.kv_f32("llama.rope.freq_base", 10000.f);
    w.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.kv_u32("llama.vocab_size", uint32_t(a.vocab));
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control; bytes 6, the rest normal
    char piece[16];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(piece, sizeof piece, "<0x%02X>", b);
      tokens.push_back(piece), types.push_back(6);
    }
    while (int(tokens.size()) < a.vocab) tokens.push_back("t" + std::to_string(tokens.size())), types.push_back(1);
    tokens.resize(size_t(a.vocab)), types.resize(size_t(a.vocab));
    w.kv_string("tokenizer.ggml.model", "llama");
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_f32s("tokenizer.ggml.scores", std::vector<float>(size_t(a.vocab), 0.f));
    w.kv_i32s("tokenizer.ggml.token_type", types);
    w.kv_u32("tokenizer.ggml.unknown_token_id", 0);
    w.kv_u32("tokenizer.ggml.bos_token_id", 1);
    w.kv_u32("tokenizer.ggml.eos_token_id", 2);

    double step_bytes = 0;  // every matrix (the embedding as the LM head) and norm, once a step
    for (const Tensor& t : ts) {
      const size_t bytes = w.add_tensor(t.name, t.N == 1 ? std::vector<int64_t>{t.K} : std::vector<int64_t>{t.K, t.N}, t.type);
      step_bytes += double(bytes);
    }
    const Timer timer;
    w.begin(a.out);
    Philox rng(a.seed, 7);
    std::vector<float> row;
    std::vector<uint8_t> chunk;
    std::FILE* dump = nullptr;
    if (!a.dump_embedding.empty() && !(dump = std::fopen(a.dump_embedding.c_str(), "wb")))
      fail(a.dump_embedding, ": cannot write");
    for (const Tensor& t : ts) {
      row.resize(size_t(t.K));
      const size_t rb = quant::qtype_row_bytes(t.type, t.K);
      const int64_t rows_per_chunk = std::max<int64_t>(1, int64_t((size_t(4) << 20) / rb));
      for (int64_t r0 = 0; r0 < t.N; r0 += rows_per_chunk) {
        const int64_t nr = std::min(rows_per_chunk, t.N - r0);
        chunk.resize(size_t(nr) * rb);
        for (int64_t r = 0; r < nr; ++r) {
          uint8_t* dst = chunk.data() + size_t(r) * rb;
          if (t.N == 1 && a.zero_layers && t.name == "output_norm.weight") {
            for (float& x : row) x = float(rng.uniform() * 2);  // (see the top of the file)
          } else if (t.N == 1) {  // a norm's weight: ones, as initialised
            for (float& x : row) x = 1.f;
          } else if (a.zero_layers && t.name.rfind("blk.", 0) == 0) {
            for (float& x : row) x = 0.f;
          } else {  // uniform: half-width sqrt(3) std
            for (float& x : row) x = float((rng.uniform() * 2 - 1) * std::sqrt(3.0) * a.std);
          }
          if (dump && t.name == "token_embd.weight" && std::fwrite(row.data(), 4, row.size(), dump) != row.size())
            fail(a.dump_embedding, ": write failed");
          if (t.type == QType::F32) std::memcpy(dst, row.data(), rb);
          else if (t.type == QType::BF16) convert_to_bf16(row.data(), reinterpret_cast<bf16*>(dst), row.size());
          else quant::quantize_row(t.type, row.data(), dst, t.K);
        }
        w.write(chunk.data(), chunk.size());
      }
    }
    w.finish();
    if (dump && std::fclose(dump) != 0) fail(a.dump_embedding, ": write failed");
    std::printf("%s: llama, %d layers, hidden %d, ffn %d, heads %d/%d, vocab %d, %s (embedding %s): "
                "%.3f GB weights read per decode step, written in %.1f s\n",
                a.out.c_str(), a.layers, a.hidden, a.ffn, a.heads, a.kv_heads, a.vocab, a.type.c_str(),
                quant::qtype_name(uint32_t(emb)), step_bytes / 1e9, timer.seconds());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_llama_gguf: %s\n", e.what());
    return 1;
  }
  return 0;
}
