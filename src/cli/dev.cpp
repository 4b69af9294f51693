// zaya dev: developer tools behind the correctness tests.
//   reference-case: writes a model with non-trivial random weights in HF format, a batch
//   of ids, and zaya's logits, loss and every parameter gradient (fp32), for the
//   independent PyTorch reference (tools/reference) to recompute and compare
//   (train/reference_cases.h).
//   parquet-dump: one string column of a Parquet file, one JSON string per line (null for a
//   null), as `zaya prepare` reads it (data/parquet.h); tests/parquet_oracle.sh compares it
//   with what an independent writer wrote.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "data/parquet.h"
#include "train/reference_cases.h"

namespace {

void reference_case(const zaya::ReferenceCaseOptions& o) {
  const zaya::ReferenceCaseResult r = zaya::write_reference_case(o);
  std::printf("reference case in %s: B=%d T=%d top-k=%d loss=%.6f routing margin=%.2e seed=%lu\n", o.out.c_str(),
              o.batch, o.seq, r.topk, r.loss, r.routing_margin, (unsigned long)(r.seed));
}

struct ParquetDumpOptions {
  std::string file, column = "text";
};

void parquet_dump(const ParquetDumpOptions& o) {
  zaya::ParquetStringColumn col(o.file, o.column);
  std::string v, line;
  bool is_null = false;
  while (col.next(v, is_null)) {
    line = is_null ? "null" : nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  std::fflush(stdout);
}

}  // namespace

ZAYA_COMMAND("dev", "Developer tools behind the correctness tests", [](CLI::App& app) {
  app.require_subcommand(1);
  auto o = std::make_shared<zaya::ReferenceCaseOptions>();
  auto* rc = app.add_subcommand("reference-case", "Write a model, ids and zaya's logits/loss/gradients for the PyTorch reference");
  rc->add_option("--config", o->config, "model config")->required();
  rc->add_option("--out", o->out, "output directory")->required();
  rc->add_option("--batch", o->batch, "batch size")->check(CLI::PositiveNumber);
  rc->add_option("--seq", o->seq, "sequence length")->check(CLI::PositiveNumber);
  rc->add_option("--seed", o->seed, "seed");
  rc->add_option("--topk", o->topk, "override moe_router_topk");
  rc->callback([o] { reference_case(*o); });
  auto pq = std::make_shared<ParquetDumpOptions>();
  auto* pd = app.add_subcommand("parquet-dump", "Print a Parquet string column, one JSON string (or null) per line");
  pd->add_option("file", pq->file, "Parquet file")->required();
  pd->add_option("--column", pq->column, "the column (default text)");
  pd->callback([pq] { parquet_dump(*pq); });
});
