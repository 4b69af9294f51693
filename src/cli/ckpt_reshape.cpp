// zaya ckpt reshape SRC DST --dp N [--ep M] [--cp K] [--zero1 on|off]: rewrite a checkpoint
// for another parallel layout (train/reshape.h). `zaya train --resume` also reshards at load
// time; the offline form is for moving checkpoints between clusters and for inspection.
#include <cstdio>
#include <memory>

#include "cli/ckpt_subcommands.h"
#include "core/log.h"
#include "train/reshape.h"

namespace {
struct ReshapeArgs {
  std::string src, dst, zero1;
  zaya::ReshapeOptions o;
};
}  // namespace

ZAYA_CKPT_SUBCOMMAND("reshape", "re-cut a checkpoint for another DP x EP x CP layout (optimizer state included)",
                     [](CLI::App& app) {
                       auto a = std::make_shared<ReshapeArgs>();
                       app.add_option("src", a->src, "checkpoint (step dir, ckpt root, its `latest` file or run dir)")->required();
                       app.add_option("dst", a->dst, "new checkpoint root (gets step_XXXXXXXX and latest)")->required();
                       app.add_option("--dp", a->o.dp, "data-parallel degree")->check(CLI::PositiveNumber);
                       app.add_option("--ep", a->o.ep, "expert-parallel degree")->check(CLI::PositiveNumber);
                       app.add_option("--cp", a->o.cp, "context-parallel degree")->check(CLI::PositiveNumber);
                       app.add_option("--zero1", a->zero1, "shard optimizer state over DP (default: as the source)")
                           ->check(CLI::IsMember({"on", "off"}));
                       app.callback([a] {
                         if (!a->zero1.empty()) a->o.zero1 = a->zero1 == "on" ? 1 : 0;
                         const zaya::ReshapeResult r = zaya::reshape_checkpoint(a->src, a->dst, a->o);
                         std::printf("reshaped step %lld to dp %d x ep %d x cp %d: %s (%zu tensors, %zu slices, %zu "
                                     "files, %s, %.2f s)\n",
                                     (long long)r.step, a->o.dp, a->o.ep, a->o.cp, r.dir.c_str(), r.tensors, r.slices,
                                     r.files, zaya::human_bytes(double(r.bytes)).c_str(), r.seconds);
                       });
                     });
