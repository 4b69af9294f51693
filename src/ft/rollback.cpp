#include "ft/rollback.h"

#include <ctime>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "core/io.h"

namespace zaya::ft {
namespace fs = std::filesystem;

namespace {

void set_aside(const fs::path& dir, const std::string& prefix) {
  const fs::path to = dir.parent_path() / (prefix + dir.filename().string() + "-" + std::to_string(std::time(nullptr)));
  std::error_code ec;
  fs::rename(dir, to, ec);
  if (ec) fs::remove_all(dir, ec);  // never leave a broken checkpoint where a reader looks
}

}  // namespace

ResumePoint choose_resume_point(const std::string& ckpt_root, int64_t below_step) {
  ResumePoint r;
  std::vector<std::string> all = list_checkpoints(ckpt_root);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    int64_t step = -1;
    std::string error;
    try {
      Checkpoint ck(*it);
      step = ck.step();
      if (below_step > 0 && step >= below_step) {
        r.rolled_back.push_back(step);
        set_aside(*it, ".rolledback-");
        continue;
      }
      ck.verify();
    } catch (const Error& e) {
      error = e.what();
    }
    if (error.empty()) {
      r.dir = *it;
      r.step = step;
      break;
    }
    const std::string name = fs::path(*it).filename().string();
    r.corrupt.push_back({step >= 0 ? step : std::stoll(name.substr(5)), error});
    set_aside(*it, ".corrupt-");
  }
  const fs::path latest = fs::path(ckpt_root) / "latest";
  std::error_code ec;
  if (r.dir.empty()) {
    fs::remove(latest, ec);
  } else {
    const std::string text = fs::path(r.dir).filename().string() + "\n";
    write_file_atomic(latest.string(), text.data(), text.size());
  }
  return r;
}

}  // namespace zaya::ft
