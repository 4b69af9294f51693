// count_params, the formula behind `zaya size` and `zaya params`, against what the model
// allocates: the parameter table build_layout lays out (every tensor, its shape, its place in
// the flat buffer), summed per component, for every model config under configs/; and the
// ZAYA1-base breakdown against the spec's table (zaya1-architecture.md, section 5).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/model.h"
#include "model/params.h"

using namespace zaya;
namespace fs = std::filesystem;

namespace {

// The breakdown of ParamCounts, summed from the table's tensors.
struct TableCounts {
  int64_t embedding = 0, attention_total = 0, moe_total = 0, final_ = 0, total = 0, active = 0;
  std::vector<int64_t> cca_core, router, expert;  // per attention sub-layer / MoE sub-layer / (sub-layer, expert)
};

bool is_sublayer_frame(const std::string& name) {  // the sub-layer's input norm and residual scaling
  return name.find(".input_norm.") != std::string::npos || name.find(".res_scale.") != std::string::npos;
}

TableCounts from_table(const ModelLayout& L) {
  TableCounts t;
  const ModelConfig& c = L.cfg;
  std::vector<int64_t> core(L.sub.size(), 0), per_sub(L.sub.size(), 0);
  std::vector<std::vector<int64_t>> experts(L.sub.size(), std::vector<int64_t>(size_t(c.num_experts), 0));
  size_t next = 0;
  for (const ParamInfo& p : L.params.params) {
    EXPECT_EQ(p.offset, next) << p.name << ": the table is not one contiguous buffer";
    next = p.offset + p.numel;
    int64_t shape_numel = 1;
    for (int64_t d : p.shape) shape_numel *= d;
    EXPECT_EQ(size_t(shape_numel), p.numel) << p.name;
    const int64_t n = int64_t(p.numel);
    if (p.role == ParamRole::Embedding) {
      t.embedding += n;
    } else if (p.sublayer < 0) {
      t.final_ += n;
    } else {
      per_sub[size_t(p.sublayer)] += n;
      if (p.expert >= 0)
        experts[size_t(p.sublayer)][size_t(p.expert)] += n;
      else if (!is_sublayer_frame(p.name))
        core[size_t(p.sublayer)] += n;
    }
  }
  EXPECT_EQ(next, L.params.total);
  int64_t inactive = 0;
  for (size_t s = 0; s < L.sub.size(); ++s) {
    if (L.sub[s].attention) {
      t.attention_total += per_sub[s];
      t.cca_core.push_back(core[s]);
    } else {
      t.moe_total += per_sub[s];
      t.router.push_back(core[s]);
      std::vector<int64_t> e = experts[s];
      t.expert.insert(t.expert.end(), e.begin(), e.end());
      std::sort(e.begin(), e.end());  // the top-k largest experts are the active ones
      for (size_t i = 0; i + size_t(std::min(c.topk, c.num_experts)) < e.size(); ++i) inactive += e[i];
    }
  }
  t.total = int64_t(L.params.total) - t.embedding;
  t.active = t.total - inactive;
  return t;
}

std::vector<std::string> model_configs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(ZAYA_SOURCE_DIR "/configs"))
    if (e.is_regular_file() && e.path().extension() == ".toml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(ParamCount, FormulaEqualsTheAllocatedTableForEveryConfig) {
  const auto paths = model_configs();
  ASSERT_GE(paths.size(), 4u);  // zaya1-tiny, -small, -medium, -base at least
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    const ModelConfig cfg = load_model_config_toml(path);
    const ModelLayout L = build_layout(cfg);
    const TableCounts t = from_table(L);
    const ParamCounts c = count_params(cfg);
    EXPECT_EQ(c.embedding, t.embedding);
    EXPECT_EQ(c.attention_total, t.attention_total);
    EXPECT_EQ(c.moe_total, t.moe_total);
    EXPECT_EQ(c.final_, t.final_);
    EXPECT_EQ(c.total, t.total);
    EXPECT_EQ(c.active, t.active);
    EXPECT_EQ(c.total_with_embedding(), int64_t(L.params.total));
    ASSERT_EQ(t.cca_core.size(), size_t(cfg.num_layers));
    for (int64_t v : t.cca_core) EXPECT_EQ(v, c.cca_core);
    ASSERT_EQ(t.router.size(), size_t(cfg.num_layers));
    EXPECT_EQ(t.router[0], c.router_first);
    for (size_t i = 1; i < t.router.size(); ++i) EXPECT_EQ(t.router[i], c.router) << "router " << i;
    ASSERT_EQ(t.expert.size(), size_t(cfg.num_layers) * cfg.num_experts);
    for (int64_t v : t.expert) EXPECT_EQ(v, c.expert);
    // The buffers the model allocates are the table's (small configs only: base is 8.8B).
    if (L.params.total < 5'000'000) {
      const Model<float> m(cfg);
      EXPECT_EQ(m.params.size(), L.params.total);
      EXPECT_EQ(m.grads.size(), L.params.total);
    }
  }
}

// The spec's ZAYA1-base table, section 5, line by line: from the allocated table and from
// count_params.
TEST(ParamCount, ZayaBaseMatchesTheSpecTable) {
  const ModelConfig cfg = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-base.toml");
  const ModelLayout L = build_layout(cfg);
  const TableCounts t = from_table(L);
  const ParamCounts c = count_params(cfg);
  ASSERT_EQ(cfg.num_layers, 40);
  EXPECT_EQ(t.cca_core.at(0), 5'575'682);
  EXPECT_EQ(t.attention_total, 223'432'784);
  EXPECT_EQ(t.expert.at(0), 12'582'912);
  EXPECT_EQ(t.router.at(1), 660'992);  // one router with EDA (the first MoE's has no EDA scale)
  EXPECT_EQ(t.moe_total, 8'079'912'704);
  EXPECT_EQ(t.final_, 10'240);
  EXPECT_EQ(t.embedding, 537'133'056);
  EXPECT_EQ(t.total, 8'303'355'728);
  EXPECT_EQ(t.active, 753'608'528);
  EXPECT_EQ(t.total + t.embedding, 8'840'488'784);
  EXPECT_EQ(t.active + t.embedding, 1'290'741'584);
  EXPECT_EQ(c.cca_core, 5'575'682);
  EXPECT_EQ(c.attention_total, 223'432'784);
  EXPECT_EQ(c.expert, 12'582'912);
  EXPECT_EQ(c.router, 660'992);
  EXPECT_EQ(c.moe_total, 8'079'912'704);
  EXPECT_EQ(c.final_, 10'240);
  EXPECT_EQ(c.embedding, 537'133'056);
  EXPECT_EQ(c.total, 8'303'355'728);
  EXPECT_EQ(c.active, 753'608'528);
  EXPECT_EQ(c.total_with_embedding(), 8'840'488'784);
  EXPECT_EQ(c.active_with_embedding(), 1'290'741'584);
}
