#include "core/io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/log.h"

namespace zaya {
namespace fs = std::filesystem;

namespace {

std::string parent_or_dot(const fs::path& p) { return p.has_parent_path() ? p.parent_path().string() : "."; }

void fsync_path(const std::string& path, bool dir, const char* cannot_open) {
  const int fd = ::open(path.c_str(), dir ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) fail(path, cannot_open, std::strerror(errno), ")");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail(path, ": fsync failed (", std::strerror(err), ")");
}

// Below this, writes are gathered into the buffer: a shard appended a document at a time
// would otherwise cost a system call per document.
constexpr size_t kGatherBytes = size_t(1) << 20;

}  // namespace

void fsync_file(const std::string& path) { fsync_path(path, false, ": cannot open to fsync ("); }
void fsync_dir(const std::string& dir) { fsync_path(dir, true, ": cannot open directory to fsync ("); }

void fsync_parent_dir(const std::string& path) {
  const int fd = ::open(parent_or_dot(fs::path(path)).c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void drop_from_page_cache(const std::string& path) {
  auto drop = [](const fs::path& p) {
    const int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) return;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  };
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return drop(path);
  for (const auto& e : fs::recursive_directory_iterator(path, ec))
    if (e.is_regular_file(ec)) drop(e.path());
}

std::function<void(const std::string& path)>& write_fault_hook() {
  static std::function<void(const std::string& path)> hook;
  return hook;
}

// ---------------------------------------------------------------- atomic files

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (write_fault_hook()) write_fault_hook()(path_);
  const fs::path p(path_);
  tmp_ = (p.parent_path() / ("." + p.filename().string() + ".tmp." + std::to_string(::getpid()))).string();
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path_, ": cannot create (", std::strerror(errno), ")");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::fail_and_remove(const char* what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  fail(path_, ": ", what, " (", std::strerror(err), ")");
}

void AtomicFile::flush() {
  const char* c = buf_.data();
  size_t n = buf_.size();
  while (n > 0) {
    const ssize_t w = ::write(fd_, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail_and_remove("write failed", w < 0 ? errno : EIO);
    c += w, n -= size_t(w);
  }
  buf_.clear();
}

void AtomicFile::write(const void* bytes, size_t n) {
  ZAYA_CHECK(fd_ >= 0, path_, ": write after commit");
  const char* c = static_cast<const char*>(bytes);
  size_ += n;
  if (buf_.size() + n <= kGatherBytes) {
    if (buf_.capacity() < kGatherBytes) buf_.reserve(kGatherBytes);
    buf_.insert(buf_.end(), c, c + n);
    return;
  }
  flush();
  if (n < kGatherBytes) {
    buf_.insert(buf_.end(), c, c + n);
    return;
  }
  while (n > 0) {  // large pieces go straight from the caller's memory
    const ssize_t w = ::write(fd_, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail_and_remove("write failed", w < 0 ? errno : EIO);
    c += w, n -= size_t(w);
  }
}

void AtomicFile::write_at(uint64_t offset, const void* bytes, size_t n) {
  ZAYA_CHECK(fd_ >= 0, path_, ": write after commit");
  ZAYA_CHECK(offset + n <= size_, path_, ": write_at [", offset, ", ", offset + n, ") past the ", size_,
             " bytes written");
  flush();
  const char* c = static_cast<const char*>(bytes);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, c, n, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail_and_remove("write failed", w < 0 ? errno : EIO);
    c += w, n -= size_t(w), offset += uint64_t(w);
  }
}

void AtomicFile::commit() {
  ZAYA_CHECK(fd_ >= 0, path_, ": committed twice");
  flush();
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp_.c_str());
    fail(path_, ": fsync/close failed (", std::strerror(err), ")");
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    fail(path_, ": fsync/close failed (", std::strerror(err), ")");
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    fail(path_, ": rename failed (", std::strerror(err), ")");
  }
  fsync_parent_dir(path_);
}

void write_file_atomic(const std::string& path, const std::vector<std::pair<const void*, size_t>>& pieces) {
  AtomicFile f(path);
  for (const auto& [bytes, n] : pieces) f.write(bytes, n);
  f.commit();
}

void write_file_atomic(const std::string& path, const void* bytes, size_t n) {
  AtomicFile f(path);
  f.write(bytes, n);
  f.commit();
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

// ---------------------------------------------------------------- directories

void publish_dir(const std::string& src, const std::string& dst) {
  fsync_dir(src);
  const fs::path out(dst);
  std::error_code ec;
  fs::path trash;
  if (fs::exists(out, ec)) {
    trash = fs::path(parent_or_dot(out)) / (".trash-" + out.filename().string() + "-" + std::to_string(::getpid()));
    fs::remove_all(trash, ec);
    fs::rename(out, trash, ec);
    if (ec) fail(dst, ": cannot move the old directory aside (", ec.message(), ")");
  }
  fs::rename(src, out, ec);
  if (ec) {
    const std::string why = ec.message();
    if (!trash.empty()) fs::rename(trash, out, ec);
    fail(dst, ": rename from ", src, " failed (", why, ")");
  }
  fsync_dir(parent_or_dot(out));
  if (!trash.empty()) fs::remove_all(trash, ec);
}

StagedDir::StagedDir(const std::string& out) {
  fs::path o = fs::path(out).lexically_normal();
  if (o.filename().empty()) o = o.parent_path();  // "dir/" -> "dir"
  out_ = o.string();
  const fs::path parent(parent_or_dot(o));
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) fail(parent.string(), ": cannot create directory (", ec.message(), ")");
  tmp_ = (parent / (".tmp-" + o.filename().string() + "-" + std::to_string(::getpid()))).string();
  fs::remove_all(tmp_, ec);
}

StagedDir::~StagedDir() {
  std::error_code ec;
  if (!committed_) fs::remove_all(tmp_, ec);
}

void StagedDir::create() {
  std::error_code ec;
  fs::create_directories(tmp_, ec);
  if (ec) fail(tmp_, ": cannot create directory (", ec.message(), ")");
}

void StagedDir::commit(const std::string& src) {
  publish_dir(src, out_);
  committed_ = true;
  std::error_code ec;
  fs::remove_all(tmp_, ec);  // what is left when src was a directory inside it
}

// ---------------------------------------------------------------- mapped files

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  size_ = size_t(st.st_size);
  if (size_ == 0) {  // mmap refuses a length of 0
    ::close(fd);
    return;
  }
  void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (m == MAP_FAILED) fail(path, ": mmap failed (", std::strerror(err), ")");
  map_ = m;
}

void MappedFile::unmap() {
  if (map_) ::munmap(map_, size_);
  map_ = nullptr;
  size_ = 0;
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& o) noexcept : path_(std::move(o.path_)), map_(o.map_), size_(o.size_) {
  o.map_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    map_ = o.map_;
    size_ = o.size_;
    o.map_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

namespace {

// Bytes of the mapping that starts at `addr` mapped by 2 MB page-table entries
// (/proc/self/smaps FilePmdMapped); -1 when unknown.
long long pmd_mapped_bytes(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  char head[32];
  std::snprintf(head, sizeof head, "%lx-", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(addr)));
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(head, 0) == 0) in = true;
    else if (in && line.rfind("FilePmdMapped:", 0) == 0) return std::atoll(line.c_str() + 14) * 1024;
  }
  return -1;
}

bool populate_range(void* p, size_t n) {
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
  // Pages read in from disk now come in 2 MB folios, each mapped by one TLB entry: weights
  // streamed once per token otherwise cost a page walk per 4 KB row. Advice errors are harmless.
  madvise(p, n, MADV_HUGEPAGE);
  return madvise(p, n, MADV_POPULATE_READ) == 0;
}

}  // namespace

bool MappedFile::populate(bool always_reread) const {
  void* const map = map_;  // the same address after a re-read
  const size_t size = size_;
  if (!map) return false;
  if (!populate_range(map, size)) {  // kernels without MADV_POPULATE_READ: touch every page
    const long page = sysconf(_SC_PAGESIZE);
    volatile uint8_t sink = 0;
    const uint8_t* base = static_cast<const uint8_t*>(map);
    for (size_t off = 0; off < size; off += size_t(page)) sink = sink + base[off];
    (void)sink;
    return true;
  }
  // Pages already cached in small folios (a file just written, or read under memory
  // pressure) stay small, and decode streams them at half the speed. Then drop the file's
  // cached pages and read it again, at the same address, so it comes in 2 MB folios.
  const long long pmd = pmd_mapped_bytes(map);
  if (!always_reread && (pmd < 0 || size < (size_t(64) << 20) || double(pmd) >= 0.9 * double(size))) return true;
  const int fd = ::open(path_.c_str(), O_RDONLY);
  if (fd < 0) return true;
  // Unmap (an inaccessible placeholder keeps the address), write back, drop, map again.
  void* hole = mmap(map, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  bool ok = hole == map;
  if (ok) {
    ::fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ok = mmap(map, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == map;
  }
  ::close(fd);
  ZAYA_CHECK(ok, path_, ": could not map the file again after dropping its cached pages");
  populate_range(map, size);
  log_info(path_, ": re-read into 2 MB pages (", int(100.0 * double(pmd) / double(size)), "% were before, ",
           int(100.0 * double(std::max(0LL, pmd_mapped_bytes(map))) / double(size)), "% now)");
  return true;
}

}  // namespace zaya
