// zaya prepare --input PATH... --out DIR [--tokenizer F | --vocab-size N] [--text-key KEY] ...:
// corpus files (plain text, JSON lines, Parquet; gzip or zstd) -> tokenizer -> token shards
// or a Megatron indexed dataset, with meta.json (docs/data.md).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "data/prepare.h"

namespace {

double mb(uint64_t bytes) { return double(bytes) / 1e6; }

std::string eta(double seconds) {
  char s[32];
  long t = long(seconds + 0.5);
  if (t >= 3600)
    std::snprintf(s, sizeof s, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else
    std::snprintf(s, sizeof s, "%ldm%02lds", t / 60, t % 60);
  return s;
}

void run(zaya::PrepareOptions opt, bool quiet) {
  if (const char* kill = std::getenv("ZAYA_PREPARE_KILL_AFTER_DOCS")) opt.kill_after_documents = std::strtoull(kill, nullptr, 10);
  if (!quiet) {
    opt.on_note = [](const std::string& line) { zaya::log_info(line); };
    opt.on_progress = [](const zaya::PrepareProgress& p) {
      double rate = mb(p.bytes_read) / std::max(p.seconds, 1e-9);
      double left = p.total_bytes > p.bytes_read ? mb(p.total_bytes - p.bytes_read) / std::max(rate, 1e-9) : 0;
      char line[320];
      std::snprintf(line, sizeof line,
                    "prepare: %.1f of %.1f MB (%.0f%%) | %.2f MB/s | %llu docs | %llu tokens (%.0f tok/s) | ETA %s",
                    mb(p.bytes_read), mb(p.total_bytes),
                    100.0 * double(p.bytes_read) / double(std::max<uint64_t>(p.total_bytes, 1)), rate,
                    (unsigned long long)p.documents, (unsigned long long)p.tokens, double(p.tokens) / p.seconds,
                    eta(left).c_str());
      zaya::log_info(line);
    };
  }
  zaya::PrepareResult r = zaya::prepare_corpus(opt);
  if (quiet) return;
  const auto& c = r.counts;
  std::printf("tokenizer  %s (vocab %d%s)\n", r.tokenizer_path.c_str(), r.vocab_size,
              opt.tokenizer.empty() ? ", trained here" : "");
  std::printf("train      %llu tokens, %llu documents, %zu file(s)\n", (unsigned long long)r.train.tokens,
              (unsigned long long)r.train.documents, r.train.shards.size());
  std::printf("val        %llu tokens, %llu documents, %zu file(s)\n", (unsigned long long)r.val.tokens,
              (unsigned long long)r.val.documents, r.val.shards.size());
  std::printf("filtered   %llu read, %llu duplicates%s, %llu empty, %llu bad lines skipped, "
              "%llu documents with invalid UTF-8 (%llu replaced)\n",
              (unsigned long long)c.records, (unsigned long long)c.duplicates, opt.dedup ? "" : " (dedup off)",
              (unsigned long long)c.empty, (unsigned long long)c.bad_lines, (unsigned long long)c.utf8_documents,
              (unsigned long long)c.utf8_replacements);
  if (!c.first_bad_line.empty()) std::printf("first bad  %s\n", c.first_bad_line.c_str());
  std::printf("unigram    train entropy %.4f nats/token, val cross-entropy %.4f nats/token\n",
              r.train_unigram_entropy, r.val_unigram_cross_entropy);
  std::printf("read       %.2f MB in %.2f s (%.2f MB/s)%s\n", mb(r.bytes_read), r.seconds,
              mb(r.bytes_read) / (r.seconds > 0 ? r.seconds : 1), r.hit_max_tokens ? ", stopped at --max-tokens" : "");
  std::printf("meta       %s\n", r.meta_path.c_str());
}

}  // namespace

ZAYA_COMMAND("prepare", "Corpus files (text, JSON lines, Parquet; gzip/zstd) to a tokenizer and token shards",
             [](CLI::App& app) {
               auto opt = std::make_shared<zaya::PrepareOptions>();
               auto quiet = std::make_shared<bool>(false);
               app.add_option("--input", opt->inputs,
                              "corpus files or directories: .jsonl .json .txt (also .gz / .zst), .parquet")
                   ->required();
               app.add_option("--out", opt->out_dir, "output directory")->required();
               auto* tok = app.add_option("--tokenizer", opt->tokenizer,
                                          "existing tokenizer: SentencePiece .model or HF tokenizer.json");
               auto* vocab = app.add_option("--vocab-size", opt->train.vocab_size, "vocabulary size of a trained tokenizer")
                                 ->capture_default_str();
               tok->excludes(vocab);
               app.add_option("--model-type", opt->train.model_type, "trained tokenizer: bpe or unigram")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"bpe", "unigram"}));
               app.add_option("--character-coverage", opt->train.character_coverage,
                              "trained tokenizer: share of characters covered by pieces (the rest: bytes)")
                   ->capture_default_str();
               app.add_option("--text-key", opt->text_key,
                              "JSON lines: the document's field (a dotted path reaches nested objects); Parquet: the column")
                   ->capture_default_str();
               app.add_option("--val-fraction", opt->val_fraction, "share of documents in the validation split")
                   ->capture_default_str();
               app.add_option("--max-tokens", opt->max_tokens, "stop after this many tokens (0: no limit)")
                   ->capture_default_str();
               app.add_option("--shard-tokens", opt->shard_tokens, "tokens per shard file")->capture_default_str();
               app.add_option("--output-format", opt->output_format, "shards (zaya's) or megatron (PREFIX.bin/.idx)")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"shards", "megatron"}));
               app.add_flag("--document-per-file", opt->document_per_file,
                            "plain text: each input file is one document (default: blank lines separate documents)");
               app.add_flag("--no-dedup", [opt](int64_t) { opt->dedup = false; }, "keep exact duplicate documents");
               app.add_flag("--skip-bad-lines", opt->skip_bad_lines,
                            "skip and count malformed JSON lines, missing keys and non-string values (default: error)");
               app.add_option("--threads", opt->threads, "worker threads (0: OMP_NUM_THREADS or all cores)")
                   ->capture_default_str();
               app.add_flag("--quiet", *quiet, "no progress lines or summary");
               app.callback([opt, quiet] { run(*opt, *quiet); });
             });
