// libFuzzer target: eval task files (src/eval/task_file.cpp: load_task_file, the task JSON
// and its templates; src/eval/task.cpp: read_jsonl, read_csv, build_items; src/eval/
// builtin.cpp: the built-in tasks' JSONL fields and MMLU's header-less CSV). The input is
//   task.json [ ==== docs.jsonl [ ==== docs.csv [ ==== mmlu test csv [ ==== mmlu dev csv ] ] ] ]
// The task JSON names its data files (docs.jsonl, docs.csv, or anything else: not found).
// docs.jsonl is also the test split of one built-in task, picked by the input's size.
// A task that loads has its items built (templates rendered, choices and gold checked).
#include <cstdint>
#include <filesystem>
#include <string>

#include "eval/task.h"
#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

namespace {
void build(const zaya::eval::Task& t) {
  ZAYA_FUZZ_EXPECT_ERRORS({
    for (const auto& item : zaya::eval::build_items(t, 16, 1234))
      if (t.type == zaya::eval::OutputType::MultipleChoice &&
          (item.gold < 0 || size_t(item.gold) >= item.continuations.size()))
        __builtin_trap();  // build_items checks the gold index
  });
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kBuiltin[][2] = {{"hellaswag", "validation"}, {"piqa", "validation"},
                                      {"winogrande", "validation"}, {"lambada", "test"},
                                      {"arc_easy", "test"}};
  const auto parts = zaya_fuzz::split(data, size, 5);
  const auto part = [&](size_t i) { return i < parts.size() ? parts[i] : std::string_view(); };
  zaya_fuzz::clear();
  const std::string dir = zaya_fuzz::scratch();
  const std::string task = zaya_fuzz::write_file("task.json", part(0));
  const std::string jsonl = zaya_fuzz::write_file("docs.jsonl", part(1));
  const std::string csv = zaya_fuzz::write_file("docs.csv", part(2));
  ZAYA_FUZZ_EXPECT_ERRORS((void)zaya::eval::read_jsonl(jsonl));
  ZAYA_FUZZ_EXPECT_ERRORS((void)zaya::eval::read_csv(csv));
  ZAYA_FUZZ_EXPECT_ERRORS(build(zaya::eval::load_task_file(task)));
  if (parts.size() > 3) {
    zaya_fuzz::clear_dir(dir + "/mmlu");
    std::filesystem::create_directories(dir + "/mmlu/test");
    std::filesystem::create_directories(dir + "/mmlu/dev");
    zaya_fuzz::write_file("mmlu/test/x_test.csv", part(3));
    if (parts.size() > 4) zaya_fuzz::write_file("mmlu/dev/x_dev.csv", part(4));
    ZAYA_FUZZ_EXPECT_ERRORS(for (const auto& t : zaya::eval::load_builtin_task("mmlu", dir)) build(t));
  }
  if (parts.size() > 1) {
    const auto& b = kBuiltin[size % (sizeof(kBuiltin) / sizeof(kBuiltin[0]))];
    std::filesystem::create_directories(dir + "/" + b[0]);
    zaya_fuzz::write_file(std::string(b[0]) + "/" + b[1] + ".jsonl", part(1));
    ZAYA_FUZZ_EXPECT_ERRORS(for (const auto& t : zaya::eval::load_builtin_task(b[0], dir)) build(t));
  }
  return 0;
}
