// zaya bench comm|comm-sweep|gemm|mem: hardware characterisation (see bench/README.md).
//   mpirun -np 2 zaya bench comm -b 8 -e 64M -f 2 -c 1       (nccl-tests flags and table)
//   zaya bench comm-sweep --max-ranks 4 --csv bench/report/comm_sweep.csv
//   zaya bench gemm [-m LIST -n LIST -k LIST | --preset CONFIG] [--peak] [--csv F]
//   zaya bench mem [--threads N] [--array-bytes S] [--sweep]
//   zaya bench kernels --shapes FILE [--dtype bf16] [--rounds R] [--csv F --json F]
//   zaya bench attention --batch B --seq T --q-heads H --kv-heads G --head-dim D
//   zaya bench conv --batch B --seq T --channels C --head-dim D --kernel0 K0 --kernel1 K1
#include <array>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/comm_bench.h"
#include "bench/common.h"
#include "bench/gemm_bench.h"
#include "bench/kernels.h"
#include "bench/mem_bench.h"
#include "cli/command.h"
#include "core/error.h"

namespace {

using namespace zaya::bench;

struct CommFlags {
  std::string b = "32M", e = "32M", f, i = "1M", op = "all_reduce", d = "float", o = "sum", csv, json;
  int n = 20, w = 5, c = 1, r = 0, a = 1;
  bool all = false, break_reduction = false;
};

CommOptions comm_options(const CommFlags& fl) {
  CommOptions o;
  o.min_bytes = parse_size(fl.b, "-b");
  o.max_bytes = parse_size(fl.e, "-e");
  if (!fl.f.empty()) {
    o.factor = parse_size(fl.f, "-f");
    if (o.factor < 1) zaya::fail("-f: factor must be >= 1 (got ", fl.f, ")");
  }
  o.increment = parse_size(fl.i, "-i");
  o.iters = fl.n;
  o.warmup = fl.w;
  o.check = fl.c;
  o.root = fl.r;
  if (fl.a < 0 || fl.a > 3) zaya::fail("-a: expected 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum), got ", fl.a);
  o.agg = TimeAgg(fl.a);
  o.ops.clear();
  if (fl.all) o.ops = all_comm_ops();
  else
    for (const auto& s : split_names(fl.op)) o.ops.push_back(parse_op(s));
  o.dtypes.clear();
  if (fl.d == "all") o.dtypes = all_dtypes();
  else
    for (const auto& s : split_names(fl.d)) o.dtypes.push_back(parse_dtype(s));
  o.redops.clear();
  if (fl.o == "all") o.redops = all_redops();
  else
    for (const auto& s : split_names(fl.o)) o.redops.push_back(parse_redop(s));
  o.csv = fl.csv;
  o.json = fl.json;
  o.break_reduction = fl.break_reduction;
  o.validate();
  return o;
}

void setup_comm(CLI::App& app) {
  auto fl = std::make_shared<CommFlags>();
  app.add_option("-b,--minbytes", fl->b, "minimum size in bytes (suffixes K, M, G)")->capture_default_str();
  app.add_option("-e,--maxbytes", fl->e, "maximum size in bytes")->capture_default_str();
  app.add_option("-f,--stepfactor", fl->f, "multiply the size by this factor between sizes");
  app.add_option("-i,--stepbytes", fl->i, "add this many bytes between sizes (when no -f)")->capture_default_str();
  app.add_option("-n,--iters", fl->n, "timed iterations per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", fl->w, "warm-up iterations per size")->capture_default_str();
  app.add_option("-c,--check", fl->c, "check results element by element (#wrong): 0 or 1")->capture_default_str();
  app.add_option("-d,--datatype", fl->d, "float, double, half, bfloat16, int8, uint8, int32, uint32, int64, uint64, "
                                         "a comma list, or all")->capture_default_str();
  app.add_option("-o,--redop", fl->o, "reduction: sum, prod, max, min, avg, a comma list, or all")->capture_default_str();
  app.add_option("-r,--root", fl->r, "root rank of broadcast")->capture_default_str();
  app.add_option("-a,--average", fl->a, "time over ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum")->capture_default_str();
  app.add_option("--op", fl->op, "collective(s): all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, "
                                 "sendrecv (comma list)")->capture_default_str();
  app.add_flag("--all", fl->all, "run all six collectives");
  app.add_option("--csv", fl->csv, "write the rows as CSV");
  app.add_option("--json", fl->json, "write the tables as JSON");
  app.add_flag("--debug-break-reduction", fl->break_reduction,
               "debug: use a deliberately wrong reduction (the check must report #wrong > 0)")
      ->group("");
  app.callback([fl] {
    CommOptions o = comm_options(*fl);
    CommResult r = run_comm(o, stdout);
    if (r.total_wrong > 0)
      zaya::fail(r.total_wrong, " wrong element", r.total_wrong == 1 ? "" : "s", " in the results (see #wrong)");
  });
}

void setup_comm_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto s = std::make_shared<std::array<std::string, 5>>(std::array<std::string, 5>{"8", "16M", "4", "", "float"});
  app.add_option("--max-ranks", o->max_ranks, "largest rank count (1, 2, 4, ... up to this)")->capture_default_str();
  app.add_option("--op", (*s)[3], "collectives (comma list; default the paper's four)");
  app.add_option("-d,--datatype", (*s)[4], "dtype")->capture_default_str();
  app.add_option("-b,--minbytes", (*s)[0], "minimum size")->capture_default_str();
  app.add_option("-e,--maxbytes", (*s)[1], "maximum size")->capture_default_str();
  app.add_option("-f,--stepfactor", (*s)[2], "size factor")->capture_default_str();
  app.add_option("-n,--iters", o->iters, "timed iterations per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", o->warmup, "warm-up iterations per size")->capture_default_str();
  app.add_option("-c,--check", o->check, "check results (0/1)")->capture_default_str();
  app.add_option("--csv", o->csv, "merged CSV")->capture_default_str();
  app.add_option("--plot-dir", o->plot_dir, "directory for the PNG plots (default: the CSV's; 'none': no plots)");
  app.add_option("--mpirun", o->mpirun, "the MPI launcher")->capture_default_str();
  app.add_option("--mpirun-args", o->mpirun_args, "launcher arguments (default --oversubscribe, as root also --allow-run-as-root)");
  app.callback([o, s] {
    o->min_bytes = parse_size((*s)[0], "-b");
    o->max_bytes = parse_size((*s)[1], "-e");
    o->factor = parse_size((*s)[2], "-f");
    if (o->factor < 2) zaya::fail("-f: the sweep needs a factor >= 2");
    o->ops.clear();
    for (const auto& n : split_names((*s)[3])) o->ops.push_back(parse_op(n));
    o->dtype = parse_dtype((*s)[4]);
    run_comm_sweep(*o, stdout);
  });
}

struct GemmFlags {
  std::string m, n, k, preset, dtype = "fp32,bf16", engine = "auto", layout = "nt", peak_json, heatmap;
  int64_t tokens = 1024, seq = 1024, tpe = 0;
  bool peak = false, no_verify = false;
};

void setup_gemm(CLI::App& app) {
  auto fl = std::make_shared<GemmFlags>();
  auto o = std::make_shared<GemmOptions>();
  o->min_time = 0.1;
  app.add_option("-m,--M", fl->m, "M values: list, start:stop:step or start:stop:*factor (default 256:2048:256)");
  app.add_option("-n,--N", fl->n, "N values (default 256:2048:256)");
  app.add_option("-k,--K", fl->k, "K values (default 1024)");
  app.add_option("--preset", fl->preset, "transformer-shaped GEMMs of a model config (TOML, HF config.json or directory)");
  app.add_option("--tokens", fl->tokens, "preset: tokens per microbatch (b x s)")->capture_default_str();
  app.add_option("--seq", fl->seq, "preset: sequence length of the attention-score GEMMs")->capture_default_str();
  app.add_option("--tokens-per-expert", fl->tpe, "preset: rows of the expert GEMMs (0: tokens x top-k / E)");
  app.add_option("--dtype", fl->dtype, "fp32, bf16 or both (comma list)")->capture_default_str();
  CLI::Option* engine_opt =
      app.add_option("--engine", fl->engine,
                     "auto (the trainer's choice), openblas, onednn, amx (bf16 on AMX), avx512 (fp32 on AVX-512, bf16 on AVX512-BF16; comma list); --peak without "
                     "--engine tries every engine (each shape once per engine that runs it)")
          ->capture_default_str();
  app.add_option("--layout", fl->layout, "nn, nt (activations x weights^T, the trainer's forward), tn, tt")->capture_default_str();
  app.add_option("--warmup", o->warmup, "untimed calls per shape")->capture_default_str();
  app.add_option("--min-iters", o->min_iters, "at least this many timed calls per shape")->capture_default_str();
  app.add_option("--min-time", o->min_time, "at least this many seconds of timed calls per shape")->capture_default_str();
  app.add_option("--threads", o->threads, "OpenMP/OpenBLAS threads (0: default)");
  app.add_option("--peak-fp32", o->peak_fp32, "peak TFLOP/s for the fp32 efficiency (default: nominal from the CPU)");
  app.add_option("--peak-bf16", o->peak_bf16, "peak TFLOP/s for the bf16 efficiency (default: nominal from the CPU)");
  app.add_flag("--peak", fl->peak, "search for the maximum achievable FLOP/s (large shapes unless given) and print it per dtype");
  app.add_option("--peak-json", fl->peak_json, "merge {fp32_tflops, bf16_tflops} (measured maxima) into this JSON file");
  app.add_flag("--no-verify", fl->no_verify, "skip the sampled check of the results");
  app.add_option("--csv", o->csv, "write rows as CSV");
  app.add_option("--json", o->json, "write rows and maxima as JSON");
  app.add_option("--heatmap", fl->heatmap, "write a PNG heatmap of TFLOP/s over (M, N) per K and dtype");
  app.callback([fl, o, engine_opt] {
    using zaya::GemmEngine;
    using zaya::GemmPrecision;
    bool shapes_given = !fl->m.empty() || !fl->n.empty() || !fl->k.empty();
    if (!fl->preset.empty() && shapes_given) zaya::fail("--preset and -m/-n/-k are exclusive");
    o->shapes.clear();
    if (!fl->preset.empty()) {
      PresetOptions p{fl->tokens, fl->seq, fl->tpe};
      o->shapes = transformer_shapes(zaya::load_model_config(fl->preset), p);
    } else if (fl->peak && !shapes_given) {
      o->shapes = peak_search_shapes();
    } else {
      o->shapes = cartesian_shapes(parse_int_list(fl->m.empty() ? "256:2048:256" : fl->m, "-m"),
                                   parse_int_list(fl->n.empty() ? "256:2048:256" : fl->n, "-n"),
                                   parse_int_list(fl->k.empty() ? "1024" : fl->k, "-k"));
    }
    o->precisions.clear();
    for (const auto& s : split_names(fl->dtype)) o->precisions.push_back(parse_precision(s));
    o->engines.clear();
    for (const auto& s : split_names(fl->engine)) o->engines.push_back(parse_engine(s));
    // The peak is the most any engine here reaches, not only the trainer's choice.
    if (fl->peak && engine_opt->count() == 0)
      o->engines = {GemmEngine::Auto, GemmEngine::OpenBLAS, GemmEngine::Avx512, GemmEngine::OneDNN};
    parse_layout(fl->layout, o->ta, o->tb);
    o->verify = !fl->no_verify;
    if (!fl->heatmap.empty() && o->csv.empty()) zaya::fail("--heatmap needs --csv (the plot reads the CSV)");
    GemmResult r = run_gemm(*o, stdout);
    nlohmann::json peak = nlohmann::json::object();
    for (const auto& b : r.best) {
      if (fl->peak)
        std::printf("peak %s: %.4f TFLOP/s measured (maximum achievable over %zu shapes, at %lldx%lldx%lld); nominal %.4f\n",
                    b.dtype.c_str(), b.tflops, o->shapes.size() * o->engines.size(), (long long)b.at.M,
                    (long long)b.at.N, (long long)b.at.K, b.peak_source == "measured max" ? 0.0 : b.peak);
      peak[b.dtype + "_tflops"] = b.tflops;
    }
    if (!fl->peak_json.empty()) merge_json_file(fl->peak_json, peak);
    if (!fl->heatmap.empty()) run_plot("gemm-heatmap", {o->csv, fl->heatmap});
  });
}

void setup_mem(CLI::App& app) {
  auto o = std::make_shared<MemOptions>();
  auto s = std::make_shared<std::array<std::string, 4>>();
  app.add_option("--threads", o->threads, "OpenMP threads (0: default)");
  app.add_option("--array-bytes", (*s)[0], "bytes per array (default 4 x the last-level cache)");
  app.add_option("--llc-bytes", (*s)[1], "last-level cache size (default: read from the machine)");
  app.add_option("--ntimes", o->ntimes, "passes per kernel (the first is not counted)")->capture_default_str();
  app.add_option("--csv", o->csv, "write the four kernels as CSV");
  app.add_option("--json", o->json, "write the results as JSON");
  app.add_option("--peak-json", o->peak_json, "merge {triad_MBps} into this JSON file");
  app.add_flag("--sweep", o->sweep, "also measure triad bandwidth vs working set (L1 to DRAM)");
  app.add_option("--sweep-min", (*s)[2], "smallest working set (default L1d / 2)");
  app.add_option("--sweep-max", (*s)[3], "largest working set (default 4 x last-level cache)");
  app.add_option("--sweep-time", o->sweep_time, "seconds per sweep measurement")->capture_default_str();
  app.add_option("--sweep-csv", o->sweep_csv, "write the sweep as CSV");
  app.add_option("--sweep-plot", o->sweep_plot, "write the sweep as a PNG plot (needs --sweep-csv)");
  app.add_flag("--debug-corrupt", o->debug_corrupt, "debug: damage one element before validation")->group("");
  app.callback([o, s] {
    if (!(*s)[0].empty()) o->array_bytes = parse_size((*s)[0], "--array-bytes");
    if (!(*s)[1].empty()) o->llc_bytes = parse_size((*s)[1], "--llc-bytes");
    if (!(*s)[2].empty()) o->sweep_min = parse_size((*s)[2], "--sweep-min");
    if (!(*s)[3].empty()) o->sweep_max = parse_size((*s)[3], "--sweep-max");
    if (!o->sweep_plot.empty() && o->sweep_csv.empty()) zaya::fail("--sweep-plot needs --sweep-csv");
    run_mem(*o, stdout);
  });
}

struct KernelFlags {
  std::string shapes, dtype = "fp32", csv, json;
  int rounds = 5;
  double spread = 2.0;
  std::vector<int> attention{1, 256, 8, 2, 64}, conv{1, 256, 640, 64, 2, 2};
};

void run_kernels(const KernelFlags& fl, std::vector<KernelShape> shapes) {
  if (fl.dtype != "fp32" && fl.dtype != "bf16") zaya::fail("--dtype: expected fp32 or bf16, got '", fl.dtype, "'");
  if (fl.rounds < 1) zaya::fail("--rounds: expected at least 1, got ", fl.rounds);
  if (!(fl.spread > 1)) zaya::fail("--spread-limit: expected a factor above 1, got ", fl.spread);
  KernelBenchOptions o;
  o.shapes = std::move(shapes);
  o.precision = parse_precision(fl.dtype);
  o.timing.rounds = fl.rounds;
  o.timing.spread_limit = fl.spread;
  const std::vector<KernelRow> rows = run_kernel_bench(o);
  std::printf("# zaya bench kernels: %s; %d rounds interleaved, median\n", zaya::gemm_runtime_info().c_str(),
              fl.rounds);
  std::printf("%-14s %-5s %-8s %-22s %12s %7s %5s\n", "kind", "dtype", "engine", "dims", "time_us", "spread",
              "again");
  for (const KernelRow& r : rows)
    std::printf("%-14s %-5s %-8s %-22s %12.2f %7.2f %5d%s\n", r.kind.c_str(), r.dtype.c_str(), r.engine.c_str(),
                r.dims.c_str(), r.time_us, r.spread, r.remeasures, r.flagged ? "  FLAGGED: rounds disagree" : "");
  if (!fl.csv.empty()) write_kernel_csv(rows, fl.csv);
  if (!fl.json.empty()) write_kernel_json(rows, o, fl.json);
}

void kernel_common(CLI::App& app, std::shared_ptr<KernelFlags> fl) {
  app.add_option("--dtype", fl->dtype, "fp32 or bf16 (the trainer's bf16 engine)")->capture_default_str();
  app.add_option("--rounds", fl->rounds, "interleaved rounds per shape (median kept)")->capture_default_str();
  app.add_option("--spread-limit", fl->spread, "re-measure a shape whose rounds differ by more than this factor")
      ->capture_default_str();
  app.add_option("--csv", fl->csv, "write the rows as CSV (kernels-<dtype>.csv of a measured profile)");
  app.add_option("--json", fl->json, "write the record: CPU model and flags, threads, engine per shape");
}

void setup_kernels(CLI::App& app) {
  auto fl = std::make_shared<KernelFlags>();
  app.add_option("--shapes", fl->shapes, "file of kernel shapes (zaya size --kernel-shapes)")->required();
  kernel_common(app, fl);
  app.callback([fl] { run_kernels(*fl, read_kernel_shapes(fl->shapes)); });
}

void setup_attention(CLI::App& app) {
  auto fl = std::make_shared<KernelFlags>();
  auto& a = fl->attention;
  app.add_option("--batch", a[0], "B")->capture_default_str();
  app.add_option("--seq", a[1], "T")->capture_default_str();
  app.add_option("--q-heads", a[2], "query heads")->capture_default_str();
  app.add_option("--kv-heads", a[3], "KV heads")->capture_default_str();
  app.add_option("--head-dim", a[4], "head dim")->capture_default_str();
  kernel_common(app, fl);
  app.callback([fl] {
    std::string line = "attention";
    for (int v : fl->attention) line += " " + std::to_string(v);
    run_kernels(*fl, {parse_kernel_shape(line, "zaya bench attention")});
  });
}

void setup_conv(CLI::App& app) {
  auto fl = std::make_shared<KernelFlags>();
  auto& c = fl->conv;
  app.add_option("--batch", c[0], "B")->capture_default_str();
  app.add_option("--seq", c[1], "T")->capture_default_str();
  app.add_option("--channels", c[2], "C = (query + KV heads) x head dim")->capture_default_str();
  app.add_option("--head-dim", c[3], "head dim (the grouped stage's group width)")->capture_default_str();
  app.add_option("--kernel0", c[4], "depthwise taps")->capture_default_str();
  app.add_option("--kernel1", c[5], "grouped taps")->capture_default_str();
  kernel_common(app, fl);
  app.callback([fl] {
    std::string line = "conv";
    for (int v : fl->conv) line += " " + std::to_string(v);
    run_kernels(*fl, {parse_kernel_shape(line, "zaya bench conv")});
  });
}

}  // namespace

ZAYA_COMMAND("bench", "Hardware micro-benchmarks: collectives (comm, comm-sweep), GEMM throughput, memory bandwidth",
             [](CLI::App& app) {
               app.require_subcommand(1);
               setup_comm(*app.add_subcommand("comm", "Collective benchmark, nccl-tests style (run under mpirun -np N)"));
               setup_comm_sweep(*app.add_subcommand(
                   "comm-sweep", "comm at 1, 2, 4, ... ranks via mpirun: one CSV and busbw/latency plots"));
               setup_gemm(*app.add_subcommand("gemm", "GEMM throughput over shapes, fp32/bf16, peak FLOP/s"));
               setup_mem(*app.add_subcommand("mem", "STREAM copy/scale/add/triad and bandwidth vs working set"));
               setup_kernels(*app.add_subcommand(
                   "kernels", "the training step's kernels (GEMM layouts, attention, conv) at given shapes, "
                              "interleaved rounds, median; zaya size's measured profile"));
               setup_attention(*app.add_subcommand("attention", "the trainer's causal GQA attention, forward and backward"));
               setup_conv(*app.add_subcommand("conv", "CCA's causal two-stage convolution, forward and backward"));
             });
