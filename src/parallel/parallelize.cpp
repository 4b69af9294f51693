#include "parallel/parallelize.h"

#include <memory>

#include "core/error.h"

namespace zaya::parallel {

ExpertRange local_experts(const ModelConfig& cfg, const comm::Layout& L) {
  return L.ep > 1 ? ep_expert_range(cfg.num_experts, L.ep, L.ep_rank) : ExpertRange{};
}

double ParallelSeams::comm_seconds() const {
  return (experts ? experts->comm_seconds : 0) + (seq_shard ? seq_shard->comm_seconds : 0);
}

void ParallelSeams::clear_comm_seconds() {
  if (experts) experts->comm_seconds = 0;
  if (seq_shard) seq_shard->comm_seconds = 0;
}

ParallelSeams parallelize(Model<float>& m, const comm::Groups& g) {
  const comm::Layout& L = g.layout;
  const ExpertRange want = local_experts(m.cfg(), L);
  const int want_end = want.end < 0 ? m.cfg().num_experts : want.end;  // {} means every expert
  ZAYA_CHECK(m.layout.experts.begin == want.begin && m.layout.experts.end == want_end,
             "parallelize: the model holds experts [", m.layout.experts.begin, ", ", m.layout.experts.end,
             "), EP rank ", L.ep_rank, " of ", L.ep, " holds [", want.begin, ", ", want_end, ")");
  ParallelSeams s;
  if (L.ep > 1) {
    auto e = std::make_unique<EpExperts<float>>(g.ep, want, m.cfg().num_layers);
    s.experts = e.get();
    m.set_experts(std::move(e));
  }
  if (L.cp > 1) {
    auto sh = std::make_unique<CpShard<float>>(g.cp);
    s.seq_shard = sh.get();
    m.set_seq_shard(std::move(sh));
  }
  return s;
}

void check_expert_split(const ModelConfig& cfg, int ep, const std::string& who) {
  ZAYA_CHECK(cfg.num_experts % ep == 0, who, " does not divide the model's ", cfg.num_experts, " experts");
}

void check_seq_split(const ModelConfig& cfg, int seq_len, int cp, const std::string& who) {
  ZAYA_CHECK(seq_len % cp == 0 && seq_len / cp >= cfg.conv_pad(), who, " does not split into cp = ", cp,
             " shards of at least ", cfg.conv_pad(), " positions");
}

void check_batch_split(int global_batch, const comm::Layout& L, const std::string& who) {
  ZAYA_CHECK(global_batch % L.data_world() == 0, who, " is not a multiple of dp * ep = ", L.data_world());
}

}  // namespace zaya::parallel
