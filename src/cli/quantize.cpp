// zaya quantize SRC DST --type q8_0|q4_0|q4_k [--keep NAMES] [--tokenizer FILE] [--force]: an HF ZAYA directory
// or a training checkpoint in, a quantized model directory out (config.json, model.gguf,
// the tokenizer), which generate / score / eval run memory-mapped (docs/infer.md).
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "quant/convert/quantize_model.h"

namespace {

struct Args {
  std::string src, dst, type, tokenizer;
  std::vector<std::string> keep;
  bool force = false;
};

void run(const Args& a) {
  zaya::QuantizeOptions o;
  if (!zaya::quant::qtype_parse(a.type.c_str(), &o.type) ||
      (o.type != zaya::quant::QType::Q8_0 && o.type != zaya::quant::QType::Q4_0 && o.type != zaya::quant::QType::Q4_K))
    zaya::fail("--type '", a.type, "': expected q8_0, q4_0 or q4_k");
  o.keep = a.keep;
  o.force = a.force;
  o.tokenizer = a.tokenizer;
  o.on_progress = [](const zaya::QuantizeProgress& p) {
    zaya::log_info("quantize: ", p.tensors_done, "/", p.tensors, " tensors, ", zaya::human_bytes(double(p.bytes_done)),
                   " of ", zaya::human_bytes(double(p.bytes)), " read, ", int(p.seconds), " s");
  };
  const zaya::QuantizeSummary s = zaya::quantize_model(a.src, a.dst, o);
  for (const std::string& f : s.fallbacks) std::printf("fallback %s\n", f.c_str());
  std::printf("quantized %s to %s (%s): %zu tensors, %s -> %s (%.2fx smaller) in %.1f s, peak RSS %s\n", a.src.c_str(),
              a.dst.c_str(), a.type.c_str(), s.tensors, zaya::human_bytes(double(s.src_bytes)).c_str(),
              zaya::human_bytes(double(s.dst_bytes)).c_str(), double(s.src_bytes) / double(s.dst_bytes), s.seconds,
              zaya::human_bytes(double(s.peak_rss)).c_str());
}

}  // namespace

ZAYA_COMMAND("quantize", "Quantize a model to q8_0 / q4_0 / q4_k weights (a GGUF model directory)", [](CLI::App& app) {
  auto a = std::make_shared<Args>();
  app.add_option("src", a->src, "HF model directory (bf16 or fp32 safetensors) or zaya training checkpoint")->required();
  app.add_option("dst", a->dst, "output directory (config.json, model.gguf, tokenizer)")->required();
  app.add_option("--type", a->type, "q8_0, q4_0 or q4_k (the tied embedding / LM head: q8_0, q6_k, q6_k)")->required();
  app.add_option("--keep", a->keep,
                 "tensors kept bf16, comma-separated: lm_head (the tied embedding) or any part of an HF name")
      ->delimiter(',');
  app.add_option("--tokenizer", a->tokenizer, "tokenizer.json or SentencePiece .model (default: the source's own)");
  app.add_flag("--force", a->force, "replace DST if it exists");
  app.callback([a] { run(*a); });
});
