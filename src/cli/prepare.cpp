// zaya prepare --input FILE... --out DIR [--tokenizer MODEL | --vocab-size N] ...:
// trains (or loads) a SentencePiece tokenizer and writes token shards + meta.json.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "data/prepare.h"

namespace {

double mb(uint64_t bytes) { return double(bytes) / 1e6; }

void run(zaya::PrepareOptions opt) {
  opt.on_note = [](const std::string& line) { zaya::log_info(line); };
  opt.on_progress = [](const zaya::PrepareProgress& p) {
    char line[256];
    std::snprintf(line, sizeof line, "prepare: %.1f of %.1f MB (%.0f%%), %.2f MB/s, %llu tokens (%.0f tokens/s)",
                  mb(p.bytes_read), mb(p.total_bytes),
                  100.0 * double(p.bytes_read) / double(std::max<uint64_t>(p.total_bytes, 1)), mb(p.bytes_read) / p.seconds,
                  (unsigned long long)p.tokens, double(p.tokens) / p.seconds);
    zaya::log_info(line);
  };
  zaya::PrepareResult r = zaya::prepare_corpus(opt);
  std::printf("tokenizer  %s (vocab %d%s)\n", r.tokenizer_path.c_str(), r.vocab_size,
              opt.tokenizer.empty() ? ", trained here" : "");
  std::printf("train      %llu tokens, %llu documents, %zu shard(s)\n", (unsigned long long)r.train.tokens,
              (unsigned long long)r.train.documents, r.train.shards.size());
  std::printf("val        %llu tokens, %llu documents, %zu shard(s)\n", (unsigned long long)r.val.tokens,
              (unsigned long long)r.val.documents, r.val.shards.size());
  std::printf("unigram    train entropy %.4f nats/token, val cross-entropy %.4f nats/token\n",
              r.train_unigram_entropy, r.val_unigram_cross_entropy);
  std::printf("read       %.2f MB in %.2f s (%.2f MB/s)%s\n", double(r.bytes_read) / 1e6, r.seconds,
              double(r.bytes_read) / 1e6 / (r.seconds > 0 ? r.seconds : 1),
              r.hit_max_tokens ? ", stopped at --max-tokens" : "");
  std::printf("meta       %s\n", r.meta_path.c_str());
}

}  // namespace

ZAYA_COMMAND("prepare", "Train or load a SentencePiece tokenizer and write token shards for training",
             [](CLI::App& app) {
               auto opt = std::make_shared<zaya::PrepareOptions>();
               app.add_option("--input", opt->inputs, "raw UTF-8 text files")->required()->check(CLI::ExistingFile);
               app.add_option("--out", opt->out_dir, "output directory")->required();
               auto* tok = app.add_option("--tokenizer", opt->tokenizer,
                                          "existing SentencePiece .model (e.g. Gemma's tokenizer.model)");
               auto* vocab = app.add_option("--vocab-size", opt->train.vocab_size, "vocabulary size of a trained tokenizer")
                                 ->capture_default_str();
               tok->excludes(vocab);
               app.add_option("--model-type", opt->train.model_type, "trained tokenizer: bpe or unigram")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"bpe", "unigram"}));
               app.add_option("--character-coverage", opt->train.character_coverage,
                              "trained tokenizer: share of characters covered by pieces (the rest: bytes)")
                   ->capture_default_str();
               app.add_option("--val-fraction", opt->val_fraction, "share of documents in the validation split")
                   ->capture_default_str();
               app.add_option("--max-tokens", opt->max_tokens, "stop after this many tokens (0: no limit)")
                   ->capture_default_str();
               app.add_option("--shard-tokens", opt->shard_tokens, "tokens per shard file")->capture_default_str();
               app.add_flag("--document-per-file", opt->document_per_file,
                            "each input file is one document (default: blank lines separate documents)");
               app.callback([opt] { run(*opt); });
             });
