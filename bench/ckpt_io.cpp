// Checkpoint save/load throughput against `dd` on the same disk and byte count.
//
//   bench_ckpt_io [DIR (default /tmp)] [MB (default 512)] [REPEATS (default 2)]
//
// Save: a trainer-shaped checkpoint (params file = 1/3 of the bytes, optimizer moments m, v
// = 2/3, tensors of 4-16 MB) written with CheckpointWriter::write_files + commit, as the
// trainer does, fsyncs included. Load: the same files dropped from the page cache
// (posix_fadvise DONTNEED after the fsync, no root needed), then Checkpoint::read of every
// tensor into memory (checksums verified). Reference: `dd if=/dev/zero of=F bs=4M count=N
// conv=fsync` and, after the same cache drop, `dd if=F of=/dev/null bs=4M`, timed from
// here. Best of REPEATS each. Prints MB/s (10^6 bytes) and the ratios to dd.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "core/io.h"
#include "core/timer.h"

namespace fs = std::filesystem;
using namespace zaya;

namespace {

double run_timed(const std::string& cmd) {
  Timer t;
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "bench_ckpt_io: command failed: %s\n", cmd.c_str());
    std::exit(1);
  }
  return t.seconds();
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path dir = fs::path(argc > 1 ? argv[1] : "/tmp") / ("zaya_bench_ckpt_io_" + std::to_string(::getpid()));
  const size_t mb = argc > 2 ? size_t(std::atol(argv[2])) : 512;
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 2;
  fs::create_directories(dir);

  // Tensors: sizes cycling 4, 8, 16 MB (fp32), params : m : v = 1 : 1 : 1.
  const size_t total = mb * 1000000, per_group = total / 3;
  std::vector<std::vector<float>> params;
  for (size_t bytes = 0, i = 0; bytes < per_group; ++i) {
    size_t n = std::min<size_t>((size_t(4) << (i % 3)) * 1000000, per_group - bytes) / 4;
    if (n == 0) break;
    params.emplace_back(n);
    for (size_t k = 0; k < n; ++k) params.back()[k] = float(k % 977) * 1e-3f + float(i);
    bytes += n * 4;
  }
  std::vector<std::vector<float>> m = params, v = params;
  size_t bytes = 0;
  for (auto& p : params) bytes += 3 * p.size() * 4;
  const double MB = double(bytes) / 1e6;

  double save_s = 1e30, load_s = 1e30;
  std::vector<float> dst;
  for (int r = 0; r < repeats; ++r) {
    const fs::path root = dir / "ckpt";
    fs::remove_all(root);
    Timer t;
    CheckpointWriter w(root.string(), r);
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string name = "layer" + std::to_string(i) + ".weight";
      const std::vector<int64_t> shape = {int64_t(params[i].size())};
      w.add_f32("params-r00000.safetensors", "param/" + name, shape, 0, params[i].size(), params[i].data());
      w.add_f32("optim-r00000.safetensors", "optim.m/" + name, shape, 0, m[i].size(), m[i].data());
      w.add_f32("optim-r00000.safetensors", "optim.v/" + name, shape, 0, v[i].size(), v[i].data());
    }
    const std::string ck_dir = w.commit({{"state", nlohmann::json::object()}}, {w.write_files()});
    save_s = std::min(save_s, t.seconds());
    drop_from_page_cache(root.string());
    Timer tl;
    Checkpoint ck(ck_dir);
    for (const auto& x : ck.tensors()) {
      dst.resize(x.numel);
      ck.read(x.name, dst.data());
    }
    load_s = std::min(load_s, tl.seconds());
  }
  fs::remove_all(dir / "ckpt");

  const size_t blocks = (bytes + (4u << 20) - 1) / (4u << 20);
  const fs::path f = dir / "dd.bin";
  double ddw_s = 1e30, ddr_s = 1e30;
  for (int r = 0; r < repeats; ++r) {
    fs::remove(f);
    ddw_s = std::min(ddw_s, run_timed("dd if=/dev/zero of=" + f.string() + " bs=4M count=" + std::to_string(blocks) +
                                      " conv=fsync status=none"));
    drop_from_page_cache(f.string());
    ddr_s = std::min(ddr_s, run_timed("dd if=" + f.string() + " of=/dev/null bs=4M status=none"));
  }
  const double dd_MB = double(blocks) * double(4u << 20) / 1e6;
  fs::remove_all(dir);

  std::printf("checkpoint io on %s: %.0f MB in %zu tensors x 3 (params, optim.m, optim.v), best of %d\n",
              dir.parent_path().c_str(), MB, params.size(), repeats);
  std::printf("  save  CheckpointWriter (write_files + commit, fsync)   %8.1f MB/s  (%.2f s)\n", MB / save_s, save_s);
  std::printf("  write dd bs=4M conv=fsync                               %8.1f MB/s  (%.2f s)\n", dd_MB / ddw_s, ddw_s);
  std::printf("  load  Checkpoint::read, every tensor, cache dropped     %8.1f MB/s  (%.2f s)\n", MB / load_s, load_s);
  std::printf("  read  dd bs=4M of=/dev/null, cache dropped              %8.1f MB/s  (%.2f s)\n", dd_MB / ddr_s, ddr_s);
  std::printf("  ratio save/dd-write %.2f, load/dd-read %.2f (target >= 0.70)\n", (MB / save_s) / (dd_MB / ddw_s),
              (MB / load_s) / (dd_MB / ddr_s));
  return 0;
}
