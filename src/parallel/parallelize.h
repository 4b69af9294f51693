// One set-up of a model for a DP x EP x CP layout, shared by the trainer, zaya dist-check and
// the offline checkpoint reshape, so every one of them cuts experts and sequences alike.
//   - local_experts: the experts a rank holds (its EP slice; all of them without EP). A model
//     for that rank is built with it (Model's ExpertRange), and so is a checkpoint layout.
//   - parallelize: installs the communication behind the model's seams (EpExperts for
//     expert parallel, CpShard for context parallel) and hands back what it installed.
//   - the layout rules: each check takes `who`, the caller's own opening of the message
//     ("run config x.toml: ep = 2"), and appends the rule's wording.
// The model knows nothing of MPI; this floor sits above both model and comm.
#pragma once
#include <string>

#include "comm/comm.h"
#include "model/model.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"

namespace zaya::parallel {

// The experts rank L holds: [ep_rank E/ep, (ep_rank+1) E/ep) when ep > 1, else every expert.
ExpertRange local_experts(const ModelConfig& cfg, const comm::Layout& L);

// What parallelize installed (owned by the model; nullptr where that parallelism is off).
struct ParallelSeams {
  EpExperts<float>* experts = nullptr;  // ep > 1
  CpShard<float>* seq_shard = nullptr;  // cp > 1
  double comm_seconds() const;          // blocked in the EP all-to-alls and CP exchanges
  void clear_comm_seconds();
};

// m: built with local_experts(m.cfg(), g.layout).
ParallelSeams parallelize(Model<float>& m, const comm::Groups& g);

// "<who> does not divide the model's E experts" unless ep divides the experts.
void check_expert_split(const ModelConfig& cfg, int ep, const std::string& who);
// "<who> does not split into cp = N shards of at least P positions" unless seq_len splits
// into cp equal shards each at least the conv halo (ModelConfig::conv_pad) long.
void check_seq_split(const ModelConfig& cfg, int seq_len, int cp, const std::string& who);
// "<who> is not a multiple of dp * ep = W" unless every data rank gets the same rows.
void check_batch_split(int global_batch, const comm::Layout& L, const std::string& who);

}  // namespace zaya::parallel
