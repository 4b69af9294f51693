// Parquet footer and page header decoding (parquet_meta.h). Field ids are parquet.thrift's.
#include "data/parquet_meta.h"

namespace zaya {

const char* parquet_type_name(int32_t t) {
  static const char* const names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                      "FIXED_LEN_BYTE_ARRAY"};
  return t >= 0 && t < 8 ? names[t] : "an unknown type";
}

const char* parquet_codec_name(int32_t c) {
  static const char* const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
  return c >= 0 && c < 8 ? names[c] : "an unknown codec";
}

const char* parquet_encoding_name(int32_t e) {
  static const char* const names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                      "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                      "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  return e >= 0 && e < 10 ? names[e] : "an unknown encoding";
}

namespace {

ParquetSchemaElement read_schema_element(ThriftReader& r) {
  ParquetSchemaElement e;
  bool has_name = false;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    switch (id) {
      case 1: e.type = r.int_field(t, "SchemaElement.type"); break;
      case 3: e.repetition = r.int_field(t, "SchemaElement.repetition_type"); break;
      case 4:
        ZAYA_CHECK(t == ThriftType::Binary, "SchemaElement.name is not a string");
        e.name = std::string(r.binary());
        has_name = true;
        break;
      case 5: e.num_children = r.int_field(t, "SchemaElement.num_children"); break;
      case 6: e.converted_type = r.int_field(t, "SchemaElement.converted_type"); break;
      case 10: {  // LogicalType: a union, one struct member set
        ZAYA_CHECK(t == ThriftType::Struct, "SchemaElement.logicalType is not a struct");
        r.begin_struct();
        int16_t lid;
        ThriftType lt;
        while (r.next_field(lid, lt)) {
          e.logical_type = lid;
          r.skip(lt);
        }
        break;
      }
      default: r.skip(t);
    }
  }
  ZAYA_CHECK(has_name, "a schema element has no name");
  ZAYA_CHECK(e.num_children >= 0, "schema element \"", e.name, "\" has ", e.num_children, " children");
  return e;
}

void read_column_meta(ThriftReader& r, ParquetChunk& c) {
  c.has_meta = true;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    switch (id) {
      case 1: c.type = r.int_field(t, "ColumnMetaData.type"); break;
      case 4: c.codec = r.int_field(t, "ColumnMetaData.codec"); break;
      case 5: c.num_values = r.i64_field(t, "ColumnMetaData.num_values"); break;
      case 7: c.total_compressed_size = r.i64_field(t, "ColumnMetaData.total_compressed_size"); break;
      case 9: c.data_page_offset = r.i64_field(t, "ColumnMetaData.data_page_offset"); break;
      case 11: c.dictionary_page_offset = r.i64_field(t, "ColumnMetaData.dictionary_page_offset"); break;
      default: r.skip(t);
    }
  }
}

ParquetChunk read_column_chunk(ThriftReader& r) {
  ParquetChunk c;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    switch (id) {
      case 1: c.external = true; r.skip(t); break;
      case 3:
        ZAYA_CHECK(t == ThriftType::Struct, "ColumnChunk.meta_data is not a struct");
        read_column_meta(r, c);
        break;
      case 8:
      case 9: c.encrypted = true; r.skip(t); break;
      default: r.skip(t);
    }
  }
  return c;
}

std::vector<ParquetChunk> read_row_group(ThriftReader& r) {
  std::vector<ParquetChunk> chunks;
  int64_t num_rows = -1;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    if (id == 1 && t == ThriftType::List) {
      ThriftType elem;
      const uint32_t n = r.list_begin(elem);
      ZAYA_CHECK(elem == ThriftType::Struct, "RowGroup.columns is not a list of structs");
      chunks.reserve(n);
      for (uint32_t i = 0; i < n; ++i) chunks.push_back(read_column_chunk(r));
    } else if (id == 3) {
      num_rows = r.i64_field(t, "RowGroup.num_rows");
    } else {
      r.skip(t);
    }
  }
  ZAYA_CHECK(num_rows >= 0, "a row group has no num_rows (or a negative one)");
  for (ParquetChunk& c : chunks) c.num_rows = num_rows;
  return chunks;
}

}  // namespace

ParquetFileMeta parse_parquet_footer(const uint8_t* data, size_t size) {
  ThriftReader r(data, size);
  ParquetFileMeta m;
  bool has_rows = false;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    if (id == 2 && t == ThriftType::List) {
      ThriftType elem;
      const uint32_t n = r.list_begin(elem);
      ZAYA_CHECK(elem == ThriftType::Struct, "FileMetaData.schema is not a list of structs");
      m.schema.reserve(n);
      for (uint32_t i = 0; i < n; ++i) m.schema.push_back(read_schema_element(r));
    } else if (id == 3) {
      m.num_rows = r.i64_field(t, "FileMetaData.num_rows");
      has_rows = true;
    } else if (id == 4 && t == ThriftType::List) {
      ThriftType elem;
      const uint32_t n = r.list_begin(elem);
      ZAYA_CHECK(elem == ThriftType::Struct, "FileMetaData.row_groups is not a list of structs");
      m.row_groups.reserve(n);
      for (uint32_t i = 0; i < n; ++i) m.row_groups.push_back(read_row_group(r));
    } else if (id == 8) {
      m.encrypted = true;
      r.skip(t);
    } else {
      r.skip(t);
    }
  }
  ZAYA_CHECK(!m.schema.empty(), "the footer has no schema");
  ZAYA_CHECK(has_rows && m.num_rows >= 0, "the footer has no num_rows (or a negative one)");
  return m;
}

ParquetPageHeader parse_parquet_page_header(const uint8_t* data, size_t size) {
  ThriftReader r(data, size);
  ParquetPageHeader h;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  auto sub = [&](auto&& field) {  // a nested header struct: field(id, type) per member
    ZAYA_CHECK(t == ThriftType::Struct, "page header field ", id, " is not a struct");
    r.begin_struct();
    int16_t sid;
    ThriftType st;
    while (r.next_field(sid, st)) field(sid, st);
  };
  while (r.next_field(id, t)) {
    switch (id) {
      case 1: h.type = r.int_field(t, "PageHeader.type"); break;
      case 2: h.uncompressed_size = r.int_field(t, "PageHeader.uncompressed_page_size"); break;
      case 3: h.compressed_size = r.int_field(t, "PageHeader.compressed_page_size"); break;
      case 4: h.has_crc = true; h.crc = uint32_t(r.int_field(t, "PageHeader.crc")); break;
      case 5:  // DataPageHeader
      case 7:  // DictionaryPageHeader
        sub([&](int16_t sid, ThriftType st) {
          if (sid == 1) h.num_values = r.int_field(st, "num_values");
          else if (sid == 2) h.encoding = r.int_field(st, "encoding");
          else if (sid == 3 && id == 5) h.def_encoding = r.int_field(st, "definition_level_encoding");
          else if (sid == 4 && id == 5) h.rep_encoding = r.int_field(st, "repetition_level_encoding");
          else r.skip(st);
        });
        break;
      case 8:  // DataPageHeaderV2
        sub([&](int16_t sid, ThriftType st) {
          switch (sid) {
            case 1: h.num_values = r.int_field(st, "num_values"); break;
            case 2: h.num_nulls = r.int_field(st, "num_nulls"); break;
            case 3: h.num_rows = r.int_field(st, "num_rows"); break;
            case 4: h.encoding = r.int_field(st, "encoding"); break;
            case 5: h.def_bytes = r.int_field(st, "definition_levels_byte_length"); break;
            case 6: h.rep_bytes = r.int_field(st, "repetition_levels_byte_length"); break;
            case 7: h.is_compressed = r.bool_value(st); break;
            default: r.skip(st);
          }
        });
        break;
      default: r.skip(t);
    }
  }
  ZAYA_CHECK(h.type >= 0, "page header has no type");
  ZAYA_CHECK(h.uncompressed_size >= 0 && h.compressed_size >= 0, "page header has bad sizes (compressed ",
             h.compressed_size, ", uncompressed ", h.uncompressed_size, ")");
  h.header_size = r.position();
  return h;
}

}  // namespace zaya
