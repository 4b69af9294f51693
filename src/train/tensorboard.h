// TensorBoard event files (`[log] tensorboard = true`, `zaya train --tensorboard`): the run's
// metrics.jsonl records as scalar summaries in OUT/tb/events.out.tfevents.<unix time>.<host>.
//
// The format, written by hand (no protobuf library):
//   TFRecord framing, per record: uint64 length (little endian), uint32 masked CRC32C of those
//   8 bytes, the data, uint32 masked CRC32C of the data; mask(c) = ((c >> 15) | (c << 17)) +
//   0xa282ead8 (CRC32C: Castagnoli, reflected polynomial 0x82f63b78).
//   Event (tensorflow/core/util/event.proto): wall_time = 1 (double), step = 2 (int64),
//   file_version = 3 (string, the first record: "brain.Event:2"), summary = 5 (Summary).
//   Summary (tensorflow/core/framework/summary.proto): repeated Value value = 1; Value: tag = 1
//   (string), simple_value = 2 (float).
// One event per metrics record: a step record gives train/loss, train/lr, train/grad_norm,
// train/tokens_per_s and router/layer<i>/entropy, router/layer<i>/skip; an eval record
// val/loss (and val/ppl). Values are float32, as simple_value holds them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zaya {

uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
uint32_t masked_crc32c(const void* data, size_t n);
// One TFRecord: the length, its masked CRC, the data, its masked CRC.
std::string tf_record(const std::string& data);
// The encoded Event with a Summary of scalar values.
std::string tb_scalar_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& values);

class TensorBoardWriter {
 public:
  // Creates dir (and parents) and a new event file in it, its first record the file version.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values);
  // A metrics.jsonl record (type step or eval; other types are ignored).
  void metrics(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace zaya
