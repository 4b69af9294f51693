// libFuzzer target: Parquet files (src/data/parquet.cpp: ParquetStringColumn, with the Thrift
// compact decoder, the page codecs and the RLE hybrid under it). The input is the file; its
// column "text" is read to the end, at most 100,000 rows (an RLE run lets a few bytes claim
// billions of nulls, which is valid and only slow), and then a column that is not there.
// The seeds (tests/fuzz/corpus/parquet/) are small files parquet-wasm wrote: PLAIN and
// dictionary, data page v1 and v2, uncompressed, snappy, zstd and gzip
// (`node tests/parquet_oracle.mjs NPM_ROOT seeds DIR`).
#include <cstdint>
#include <string>

#include "data/parquet.h"
#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      zaya_fuzz::write_file("in.parquet", std::string_view(reinterpret_cast<const char*>(data), size));
  ZAYA_FUZZ_EXPECT_ERRORS({
    zaya::ParquetStringColumn col(path, "text");
    std::string v;
    bool is_null = false;
    uint64_t bytes = 0;
    for (int i = 0; i < 100000 && col.next(v, is_null); ++i) bytes += v.size() + col.row();
    (void)bytes;
    (void)col.bytes_read();
  });
  ZAYA_FUZZ_EXPECT_ERRORS(zaya::ParquetStringColumn(path, "missing"));
  return 0;
}
