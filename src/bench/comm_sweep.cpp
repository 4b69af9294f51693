// zaya bench comm-sweep: `zaya bench comm` under mpirun at 1, 2, 4, ... ranks, one merged CSV,
// then PNG plots (busbw vs size per collective, one line per rank count; small-size latency).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/comm_bench.h"
#include "bench/common.h"
#include "core/error.h"

namespace zaya::bench {

namespace fs = std::filesystem;

static std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void run_comm_sweep(const SweepOptions& o, std::FILE* out) {
  if (o.max_ranks < 1) fail("--max-ranks must be >= 1 (got ", o.max_ranks, ")");
  if (o.max_ranks > 256) fail("--max-ranks ", o.max_ranks, " is beyond what one machine can oversubscribe here (256)");
  if (o.csv.empty()) fail("--csv: an output file is needed");
  size_list(o.min_bytes, o.max_bytes, o.factor, 0);
  std::string exe = o.zaya_exe;
  if (exe.empty()) exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<CommOp> ops = o.ops.empty() ? paper_comm_ops() : o.ops;
  std::string oplist;
  for (CommOp op : ops) oplist += (oplist.empty() ? "" : ",") + std::string(op_name(op));
  std::string extra = o.mpirun_args;
  if (extra.empty()) {
    extra = "--oversubscribe";
    if (geteuid() == 0) extra += " --allow-run-as-root";
  }

  ensure_parent_dir(o.csv);
  fs::path tmpdir = fs::path(o.csv).parent_path();
  if (tmpdir.empty()) tmpdir = ".";
  std::ofstream merged(o.csv);
  if (!merged) fail("cannot write CSV file '", o.csv, "'");
  merged << kCommCsvHeader << "\n";
  int64_t total_wrong = 0;
  for (int n = 1; n <= o.max_ranks; n *= 2) {
    fs::path part = tmpdir / ("comm_sweep.np" + std::to_string(n) + ".part.csv");
    std::string cmd = o.mpirun + " " + extra + " -np " + std::to_string(n) + " " + shell_quote(exe) +
                      " bench comm --op " + oplist + " -d " + comm_dtype_name(o.dtype) + " -b " + std::to_string(o.min_bytes) +
                      " -e " + std::to_string(o.max_bytes) + " -f " + std::to_string(o.factor) + " -n " +
                      std::to_string(o.iters) + " -w " + std::to_string(o.warmup) + " -c " + std::to_string(o.check) +
                      " --csv " + shell_quote(part.string());
    std::fprintf(out, "# comm-sweep: %d rank%s: %s\n", n, n == 1 ? "" : "s", cmd.c_str());
    std::fflush(out);
    int rc = std::system(cmd.c_str());
    if (rc != 0) fail("comm-sweep: the run with ", n, " ranks failed (exit status ", rc, "): ", cmd);
    std::ifstream in(part);
    if (!in) fail("comm-sweep: the run with ", n, " ranks wrote no CSV '", part.string(), "'");
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      merged << line << "\n";
      // #wrong are columns 11 and 15
      std::vector<std::string> cells;
      size_t a = 0;
      for (size_t b; (b = line.find(',', a)) != std::string::npos; a = b + 1) cells.push_back(line.substr(a, b - a));
      cells.push_back(line.substr(a));
      for (int c : {10, 14})
        if (c < int(cells.size()) && cells[size_t(c)] != "NA") total_wrong += std::atoll(cells[size_t(c)].c_str());
    }
    in.close();
    fs::remove(part);
  }
  merged.close();
  std::fprintf(out, "# comm-sweep: wrote %s (total #wrong %lld)\n", o.csv.c_str(), (long long)total_wrong);
  if (o.plot_dir != "none") {
    std::string dir = o.plot_dir.empty() ? tmpdir.string() : o.plot_dir;
    if (run_plot("comm-sweep", {o.csv, dir})) std::fprintf(out, "# comm-sweep: plots in %s\n", dir.c_str());
  }
  if (total_wrong) fail("comm-sweep: ", total_wrong, " wrong elements (see the #wrong columns of ", o.csv, ")");
}

}  // namespace zaya::bench
