#include "train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya {
namespace {

std::array<uint32_t, 256> crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}

// Protobuf wire format: varints, and keys (field number << 3 | wire type).
void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s.push_back(char(uint8_t(v | 0x80)));
    v >>= 7;
  }
  s.push_back(char(uint8_t(v)));
}
void put_key(std::string& s, int field, int wire) { put_varint(s, uint64_t(field) << 3 | uint64_t(wire)); }
void put_bytes(std::string& s, int field, const std::string& b) {
  put_key(s, field, 2);
  put_varint(s, b.size());
  s += b;
}
template <class U>
void put_fixed(std::string& s, int field, U bits) {
  put_key(s, field, sizeof(U) == 8 ? 1 : 5);
  for (size_t i = 0; i < sizeof(U); ++i) s.push_back(char(uint8_t(bits >> (8 * i))));
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = crc_table();
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tf_record(const std::string& data) {
  std::string r;
  auto put32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) r.push_back(char(uint8_t(v >> (8 * i))));
  };
  const uint64_t n = data.size();
  for (int i = 0; i < 8; ++i) r.push_back(char(uint8_t(n >> (8 * i))));
  put32(masked_crc32c(r.data(), 8));
  r += data;
  put32(masked_crc32c(data.data(), data.size()));
  return r;
}

static std::string event_head(double wall_time, int64_t step) {
  std::string e;
  uint64_t wt;
  std::memcpy(&wt, &wall_time, 8);
  put_fixed<uint64_t>(e, 1, wt);
  if (step != 0) {  // proto3 leaves a field at its default out
    put_key(e, 2, 0);
    put_varint(e, uint64_t(step));  // int64: two's complement as a 10-byte varint when negative
  }
  return e;
}

std::string tb_scalar_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    put_bytes(value, 1, tag);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put_fixed<uint32_t>(value, 2, bits);
    put_bytes(summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZAYA_CHECK(!ec, dir, ": cannot create the TensorBoard directory (", ec.message(), ")");
  char host[256] = "localhost";
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = 0;
  const double t = now_s();
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(int64_t(t)) + "." + host)).string();
  f_ = std::fopen(path_.c_str(), "ab");
  ZAYA_CHECK(f_, path_, ": cannot open for writing");
  std::string e = event_head(t, 0);
  put_bytes(e, 3, "brain.Event:2");
  write(e);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (f_) std::fclose(f_);
}

void TensorBoardWriter::write(const std::string& event) {
  const std::string r = tf_record(event);
  std::fwrite(r.data(), 1, r.size(), f_);
  std::fflush(f_);  // TensorBoard reads the file as it grows
}

void TensorBoardWriter::scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values) {
  if (!values.empty()) write(tb_scalar_event(now_s(), step, values));
}

void TensorBoardWriter::metrics(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return;
  const std::string type = j.value("type", "");
  std::vector<std::pair<std::string, float>> v;
  auto add = [&](const nlohmann::json& o, const char* key, const std::string& tag) {
    if (o.contains(key) && o[key].is_number()) v.emplace_back(tag, float(o[key].get<double>()));
  };
  if (type == "step") {
    add(j, "loss", "train/loss");
    add(j, "lr", "train/lr");
    add(j, "grad_norm", "train/grad_norm");
    add(j, "tokens_per_s", "train/tokens_per_s");
    if (j.contains("layers") && j["layers"].is_array())
      for (size_t l = 0; l < j["layers"].size(); ++l) {
        const std::string p = "router/layer" + std::to_string(l) + "/";
        add(j["layers"][l], "entropy", p + "entropy");
        add(j["layers"][l], "skip", p + "skip");
      }
  } else if (type == "eval") {
    add(j, "val_loss", "val/loss");
    add(j, "val_ppl", "val/ppl");
  }
  scalars(j["step"].get<int64_t>(), v);
}

}  // namespace zaya
