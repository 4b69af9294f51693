// core/io: atomic files, staged directories, mapped files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/io.h"
#include "test_util.h"

using namespace zaya;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir); it != fs::directory_iterator(); ++it) ++n;
  return n;
}

}  // namespace

TEST(CoreIo, AtomicFileAppearsOnlyWhenCommitted) {
  test_util::TempDir t("io", "atomic");
  const std::string p = t / "f.bin";
  {
    AtomicFile f(p);
    f.write("hello ", 6);
    const std::string big(3 << 20, 'x');  // past the gather buffer: written straight through
    f.write(big.data(), big.size());
    f.write("!", 1);
    f.write_at(0, "H", 1);
    EXPECT_FALSE(fs::exists(p));
    EXPECT_EQ(f.size(), 6u + big.size() + 1);
    f.commit();
  }
  const std::string got = slurp(p);
  ASSERT_EQ(got.size(), 6u + (3u << 20) + 1);
  EXPECT_EQ(got.substr(0, 7), "Hello x");
  EXPECT_EQ(got.back(), '!');
  {
    AtomicFile f(p);
    f.write("other", 5);
  }  // not committed: the old file stays, the temporary is gone
  EXPECT_EQ(slurp(p).size(), got.size());
  EXPECT_EQ(entries(t.path), 1u);
  write_file_atomic(p, std::string_view("two"));
  EXPECT_EQ(slurp(p), "two");
  EXPECT_EQ(entries(t.path), 1u);
}

TEST(CoreIo, FaultHookRunsBeforeAnythingIsCreated) {
  test_util::TempDir t("io", "hook");
  write_fault_hook() = [](const std::string& path) { fail(path, ": write failed (injected)"); };
  const std::string e = test_util::error_of([&] { write_file_atomic(t / "f", "x", 1); });
  write_fault_hook() = nullptr;
  EXPECT_NE(e.find("f: write failed (injected)"), std::string::npos) << e;
  EXPECT_EQ(entries(t.path), 0u);
  const std::string e2 = test_util::error_of([&] { write_file_atomic(t / "no/such/dir/f", "x", 1); });
  EXPECT_NE(e2.find("no/such/dir/f: cannot create"), std::string::npos) << e2;
}

TEST(CoreIo, StagedDirPublishesOrLeavesNothing) {
  test_util::TempDir t("io", "staged");
  const std::string out = t / "out";
  {
    StagedDir s(out + "/");
    EXPECT_EQ(s.out(), out);
    s.create();
    write_file_atomic(s.tmp() + "/a", "1", 1);
  }  // not committed
  EXPECT_EQ(entries(t.path), 0u);
  {
    StagedDir s(out);
    s.create();
    write_file_atomic(s.tmp() + "/a", "1", 1);
    s.commit();
  }
  EXPECT_EQ(slurp(out + "/a"), "1");
  {
    StagedDir s(out);  // replaces the directory that is there
    s.create();
    write_file_atomic(s.tmp() + "/b", "2", 1);
    s.commit();
  }
  EXPECT_FALSE(fs::exists(out + "/a"));
  EXPECT_EQ(slurp(out + "/b"), "2");
  EXPECT_EQ(entries(t.path), 1u);  // no .tmp- or .trash- left beside it
}

TEST(CoreIo, MappedFile) {
  test_util::TempDir t("io", "map");
  write_file_atomic(t / "f", std::string_view("abc"));
  MappedFile m(t / "f");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data()), 3), "abc");
  MappedFile moved(std::move(m));
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_EQ(m.data(), nullptr);
  write_file_atomic(t / "empty", std::string_view());
  MappedFile e(t / "empty");
  EXPECT_EQ(e.size(), 0u);
  EXPECT_EQ(e.data(), nullptr);
  const std::string missing = test_util::error_of([&] { MappedFile x(t / "absent"); });
  EXPECT_NE(missing.find("absent: cannot open ("), std::string::npos) << missing;
  const std::string dir = test_util::error_of([&] { MappedFile x(t.str()); });
  EXPECT_NE(dir.find(": not a regular file"), std::string::npos) << dir;
}
