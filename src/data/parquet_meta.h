// Parquet's metadata, the parts a reader of one top-level string column needs: the footer's
// schema, row counts and the column's chunk in each row group (FileMetaData, parquet.thrift),
// and page headers. Decoded with the Thrift compact protocol (thrift_compact.h); fields this
// reader has no use for are skipped.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/thrift_compact.h"

namespace zaya {

// parquet.thrift's enums, as numbered there.
enum class ParquetType : int32_t { Boolean = 0, Int32, Int64, Int96, Float, Double, ByteArray, FixedLenByteArray };
enum class ParquetCodec : int32_t { Uncompressed = 0, Snappy, Gzip, Lzo, Brotli, Lz4, Zstd, Lz4Raw };
enum class ParquetEncoding : int32_t {
  Plain = 0, PlainDictionary = 2, Rle = 3, BitPacked = 4, DeltaBinaryPacked = 5,
  DeltaLengthByteArray = 6, DeltaByteArray = 7, RleDictionary = 8, ByteStreamSplit = 9,
};
enum class ParquetPageType : int32_t { Data = 0, Index = 1, Dictionary = 2, DataV2 = 3 };
enum class ParquetRepetition : int32_t { Required = 0, Optional = 1, Repeated = 2 };

const char* parquet_type_name(int32_t t);
const char* parquet_codec_name(int32_t c);
const char* parquet_encoding_name(int32_t e);

struct ParquetSchemaElement {
  std::string name;
  int32_t type = -1;        // ParquetType, -1 for a group
  int32_t repetition = -1;  // ParquetRepetition, -1 when absent (the root)
  int32_t num_children = 0;
  int32_t converted_type = -1;  // ConvertedType: 0 UTF8, 4 ENUM, 19 JSON, ...
  int32_t logical_type = -1;    // LogicalType's union member id: 1 STRING, 4 ENUM, 12 JSON, ...
};

// One column's chunk in one row group (ColumnChunk + ColumnMetaData).
struct ParquetChunk {
  int64_t num_rows = 0;  // the row group's
  int32_t type = -1;
  int32_t codec = 0;
  int64_t num_values = 0;
  int64_t data_page_offset = -1;
  int64_t dictionary_page_offset = -1;  // -1: none
  int64_t total_compressed_size = 0;
  bool has_meta = false;     // ColumnMetaData present (absent: encrypted or external)
  bool external = false;     // file_path set: the chunk lives in another file
  bool encrypted = false;    // crypto_metadata or encrypted_column_metadata set
};

struct ParquetFileMeta {
  int64_t num_rows = 0;
  std::vector<ParquetSchemaElement> schema;  // depth first, [0] is the root
  std::vector<std::vector<ParquetChunk>> row_groups;  // every leaf column's chunk per row group
  bool encrypted = false;  // encryption_algorithm set (a plaintext footer of an encrypted file)
};

// Decodes a footer. Throws zaya::Error (ThriftTruncated when it runs out of bytes).
ParquetFileMeta parse_parquet_footer(const uint8_t* data, size_t size);

struct ParquetPageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = -1;
  int32_t compressed_size = -1;
  bool has_crc = false;
  uint32_t crc = 0;
  // Data page (v1 or v2) or dictionary page.
  int32_t num_values = -1;
  int32_t encoding = -1;
  int32_t def_encoding = -1;  // v1
  int32_t rep_encoding = -1;  // v1
  int32_t num_nulls = -1;     // v2
  int32_t num_rows = -1;      // v2
  int32_t def_bytes = -1;     // v2
  int32_t rep_bytes = -1;     // v2
  bool is_compressed = true;  // v2
  size_t header_size = 0;     // bytes the header took
};

// Decodes a page header at the start of [data, data + size). Throws ThriftTruncated when the
// header runs past `size`, zaya::Error when it is malformed or lacks a required field.
ParquetPageHeader parse_parquet_page_header(const uint8_t* data, size_t size);

}  // namespace zaya
