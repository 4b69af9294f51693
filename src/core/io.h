// File I/O every floor shares: files written whole or not at all, durable renames, directories
// published in one step, and read-only memory-mapped files. Every failure is a zaya::Error of
// one line naming the file.
//
// Atomic files go through a hidden temporary beside the destination (DIR/.NAME.tmp.PID): the
// bytes are written there, fsynced, renamed over NAME, and DIR is fsynced, so a reader sees the
// old file or the whole new one, and a crash leaves at most a hidden temporary.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zaya {

// fsyncs a file or a directory (after a rename into it). Fails naming the path.
void fsync_file(const std::string& path);
void fsync_dir(const std::string& dir);
// fsyncs the directory holding `path`, ignoring errors (some filesystems refuse to open one).
void fsync_parent_dir(const std::string& path);
// Writes back and drops from the page cache a file, or every file below a directory
// (posix_fadvise DONTNEED: no root needed; pages a live process maps stay). Benchmarks use it
// to time reads from disk, or to keep one model's files from crowding out another's.
void drop_from_page_cache(const std::string& path);

// One file streamed into its temporary and renamed into place by commit(). Small writes are
// gathered into a buffer; destroyed uncommitted, the temporary is removed.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // calls write_fault_hook(), then creates the temporary
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* bytes, size_t n);
  // Overwrites bytes already written (a header whose counts are known at the end).
  void write_at(uint64_t offset, const void* bytes, size_t n);
  uint64_t size() const { return size_; }
  void commit();  // flush, fsync, close, rename, fsync the directory
  const std::string& path() const { return path_; }

 private:
  void flush();
  void fail_and_remove(const char* what, int err);
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::vector<char> buf_;
};

// Writes a whole file atomically from memory: one piece, or pieces in order (no staging copy).
void write_file_atomic(const std::string& path, const void* bytes, size_t n);
void write_file_atomic(const std::string& path, std::string_view bytes);
void write_file_atomic(const std::string& path, const std::vector<std::pair<const void*, size_t>>& pieces);

// Fault injection seam (src/ft/, `--inject enospc:...`): when set, every atomic file calls it
// with its destination path before creating anything; it may throw (a simulated ENOSPC).
// Empty in normal runs.
std::function<void(const std::string& path)>& write_fault_hook();

// Makes the complete directory `src` the directory (or replaces the file) `dst`: fsyncs src,
// moves an existing dst aside to .trash-NAME-PID beside it, renames src to dst (moving the old
// one back if that fails), fsyncs dst's parent and removes the old one.
void publish_dir(const std::string& src, const std::string& dst);

// A directory built under a hidden temporary name beside `out` (PARENT/.tmp-NAME-PID) and
// published as `out` by commit(); destroyed uncommitted, the temporary is removed and `out`
// is untouched.
class StagedDir {
 public:
  explicit StagedDir(const std::string& out);  // creates out's parent; clears a stale temporary
  ~StagedDir();
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;

  const std::string& tmp() const { return tmp_; }
  const std::string& out() const { return out_; }  // normalized: "dir/" -> "dir"
  void create();                                    // makes tmp()
  // Publishes `src` (tmp(), or a directory inside it) as out(), then removes what is left of tmp().
  void commit(const std::string& src);
  void commit() { commit(tmp_); }

 private:
  std::string out_, tmp_;
  bool committed_ = false;
};

// A whole file mapped read-only (MAP_PRIVATE), unmapped by the destructor. An empty file maps
// nothing (data() is null). Errors: "PATH: cannot open (why)", "PATH: not a regular file",
// "PATH: mmap failed (why)".
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(map_); }
  void* address() const { return map_; }  // for madvise and for mapping the file again in place
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Maps every page of the file now (MADV_POPULATE_READ, or a touch per page on kernels
  // without it), so later reads take no page faults, asking for huge pages first
  // (MADV_HUGEPAGE). A file of 64 MB or more that the page cache already holds mostly in
  // 4 KB pages (one just written, such as a model `zaya quantize` made a moment ago) is
  // dropped from it and read again at the same address (pointers into it stay valid):
  // weights streamed once per token from 4 KB pages cost a page walk per page.
  // `always_reread` forces that (tests). Returns false if it could not.
  bool populate(bool always_reread = false) const;

 private:
  void unmap();
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace zaya
