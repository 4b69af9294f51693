#include "train/reshape.h"

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "core/timer.h"
#include "parallel/ckpt_layout.h"
#include "parallel/parallelize.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

ReshapeResult reshape_checkpoint(const std::string& src, const std::string& dst_root, const ReshapeOptions& o) {
  Timer timer;
  Checkpoint ck(src);
  const ModelConfig cfg = checkpoint_model_config(ck);
  ZAYA_CHECK(o.dp >= 1 && o.ep >= 1 && o.cp >= 1, "reshape: dp, ep and cp must be >= 1");
  parallel::check_expert_split(cfg, o.ep, cat("reshape: --ep ", o.ep));
  const json& lay = ck.manifest().value("layout", json::object());
  const bool zero1 = o.zero1 < 0 ? lay.value("zero1", true) : o.zero1 == 1;
  if (fs::exists(dst_root))
    ZAYA_CHECK(!fs::exists(fs::path(dst_root) / "latest") && list_checkpoints(dst_root).empty(), "reshape: ", dst_root,
               " already holds a checkpoint (choose an empty or new directory)");
  ZAYA_CHECK(fs::weakly_canonical(dst_root) != fs::weakly_canonical(fs::path(ck.dir()).parent_path()),
             "reshape: DST must not be the source's own checkpoint root");

  const int world = o.dp * o.ep * o.cp;
  const std::string tag = "reshape-" + std::to_string(::getpid());
  std::vector<json> pieces;
  ReshapeResult res;
  std::string tmp;
  try {
    for (int r = 0; r < world; ++r) {
      const comm::Layout L = parallel::layout_of_rank(o.dp, o.ep, o.cp, r);
      const ModelLayout local = build_layout(cfg, parallel::local_experts(cfg, L));
      const FlatRange own = zero1 ? shard_ranges(local.params, o.dp, true)[size_t(L.dp_rank)]
                                  : FlatRange{0, local.params.total};
      CheckpointWriter w(dst_root, ck.step(), tag);
      tmp = w.temp_dir();
      std::deque<std::vector<float>> data;  // alive until write_files()
      auto copy = [&](const std::string& file, const std::string& name, size_t begin, size_t n) {
        const Checkpoint::Tensor& t = ck.tensor(name);
        data.emplace_back(n);
        ck.read(name, data.back().data(), begin, n);
        w.add_f32(file, name, t.shape, begin, n, data.back().data());
      };
      const std::string pf = parallel::rank_file("params", r), of = parallel::rank_file("optim", r);
      for (const parallel::SliceCut& c : parallel::rank_param_cuts(local.params, own, L, zero1)) {
        const size_t n = c.end - c.begin;
        copy(pf, "param/" + c.p->name, c.begin, n);
        for (const char* k : {"optim.m/", "optim.v/"})
          if (ck.has(k + c.p->name)) copy(of, k + c.p->name, c.begin, n);
      }
      if (r == 0) {
        for (const Checkpoint::Tensor& t : ck.tensors())
          if (t.name.rfind("buffer/", 0) == 0 || t.name.rfind("balancer.", 0) == 0)
            copy("buffers.safetensors", t.name, 0, t.numel);
        const std::string tok = ck.manifest().value("tokenizer", "");
        if (!tok.empty()) w.copy_file((fs::path(ck.dir()) / tok).string(), tok);
      }
      pieces.push_back(w.write_files());
      if (r == world - 1) {
        json header = ck.manifest();
        for (const char* k : {"format", "step", "files", "tensors"}) header.erase(k);
        header["layout"] = {{"world", world}, {"dp", o.dp}, {"ep", o.ep}, {"cp", o.cp}, {"zero1", zero1}};
        header["reshaped_from"] = {{"dir", ck.dir()}, {"layout", lay}};
        res.dir = w.commit(header, pieces);
      }
    }
  } catch (...) {
    std::error_code ec;
    if (!tmp.empty()) fs::remove_all(tmp, ec);  // never leave a half checkpoint behind
    throw;
  }
  Checkpoint out(res.dir);
  res.step = out.step();
  res.tensors = out.tensors().size();
  for (const auto& t : out.tensors()) res.slices += t.slices.size();
  for (auto& [name, bytes] : out.manifest()["files"].items()) res.bytes += bytes.get<uint64_t>(), ++res.files;
  res.seconds = timer.seconds();
  return res;
}

}  // namespace zaya
