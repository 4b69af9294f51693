// TensorBoard event encoding (train/tensorboard.h): the CRC32C check value, the TFRecord
// framing and the bytes of one scalar event, worked out by hand from the protobuf wire format.
// tests/tensorboard.sh reads whole files with an independent reader.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "train/tensorboard.h"

using namespace zaya;

TEST(TensorBoard, Crc32cCheckValueAndMask) {
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);  // the CRC-32C catalogue's check value
  EXPECT_EQ(crc32c("", 0), 0u);
  const uint32_t c = crc32c("abc", 3);
  EXPECT_EQ(masked_crc32c("abc", 3), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, RecordFraming) {
  const std::string data = "hello";
  const std::string r = tf_record(data);
  ASSERT_EQ(r.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(std::string(r.data(), 8), std::string("\x05\0\0\0\0\0\0\0", 8));
  uint32_t len_crc, data_crc;
  std::memcpy(&len_crc, r.data() + 8, 4);
  std::memcpy(&data_crc, r.data() + 12 + data.size(), 4);
  EXPECT_EQ(len_crc, masked_crc32c(r.data(), 8));
  EXPECT_EQ(data_crc, masked_crc32c(data.data(), data.size()));
  EXPECT_EQ(r.substr(12, data.size()), data);
}

TEST(TensorBoard, ScalarEventBytes) {
  // wall_time 1.0 (field 1, fixed64), step 300 (field 2, varint ac 02), summary (field 5) of one
  // value: tag "a" (field 1), simple_value 1.5f (field 2, fixed32 0x3fc00000).
  const std::string e = tb_scalar_event(1.0, 300, {{"a", 1.5f}});
  const std::string want("\x09\0\0\0\0\0\0\xf0\x3f"
                         "\x10\xac\x02"
                         "\x2a\x0a"
                         "\x0a\x08"
                         "\x0a\x01" "a"
                         "\x15\0\0\xc0\x3f",
                         9 + 3 + 2 + 2 + 3 + 5);
  EXPECT_EQ(e, want);
  // step 0 is proto3's default: left out
  EXPECT_EQ(tb_scalar_event(1.0, 0, {}), std::string("\x09\0\0\0\0\0\0\xf0\x3f\x2a\x00", 11));
}
