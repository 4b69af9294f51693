// Distributed layer, world-of-one logic (multi-rank proofs: tests/dist_check.sh under mpirun):
// the world of one makes no MPI calls, its collectives are copies / no-ops, ZeRO-1 over one
// rank equals the plain optimizer bit for bit, and expert parallel over one rank equals the
// local expert loop bit for bit.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>

#include "core/error.h"
#include "core/rng.h"
#include "comm/comm.h"
#include "parallel/expert_parallel.h"
#include "parallel/zero1.h"
#include "train/optim.h"
#include "model/model.h"

namespace {
using namespace zaya;
const std::string kTiny = ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml";

TEST(DistComm, WorldOfOneMakesNoMpiCalls) {
  if (comm::launched_by_mpirun()) GTEST_SKIP() << "under mpirun";
  comm::Communicator& w = comm::Communicator::world();
  EXPECT_EQ(w.size(), 1);
  EXPECT_EQ(w.rank(), 0);
  EXPECT_FALSE(w.uses_mpi());
  int init = 0;
  MPI_Initialized(&init);  // allowed before MPI_Init
  EXPECT_EQ(init, 0);
  std::vector<float> a{1, 2, 3};
  w.all_reduce(a.data(), a.size());
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  std::vector<float> r(2);
  w.reduce_scatterv(a.data(), r.data(), {2});
  EXPECT_EQ(r, (std::vector<float>{1, 2}));
  w.all_gatherv(a.data(), {3}, {0});
  w.broadcast(a.data(), 3, 0);
  std::vector<int64_t> s{5, 6, 7}, d(4, 0);
  w.alltoallv(s.data(), {2}, {1}, d.data(), {2}, {2});
  EXPECT_EQ(d, (std::vector<int64_t>{0, 0, 6, 7}));
  w.barrier();
  EXPECT_THROW(w.send(a.data(), 1, 0, 0), Error);
  EXPECT_THROW(w.alltoallv(s.data(), {2}, {0}, d.data(), {1}, {0}), Error);
  const comm::Groups g = comm::make_groups(w, 0, 1, 1);
  EXPECT_EQ(g.layout.dp, 1);
  EXPECT_EQ(g.dp.size(), 1);
  EXPECT_THROW(comm::make_groups(w, 0, 2, 1), Error);
  EXPECT_THROW(comm::set_timeout(0), Error);
}

TEST(DistComm, EpExpertRange) {
  EXPECT_EQ(parallel::ep_expert_range(8, 2, 1).begin, 4);
  EXPECT_EQ(parallel::ep_expert_range(8, 2, 1).end, 8);
  EXPECT_THROW(parallel::ep_expert_range(6, 4, 0), Error);
}

std::vector<int32_t> tokens(int n, int V, uint64_t s) {
  Philox p(s, 1);
  std::vector<int32_t> t(size_t(n), 0);
  for (auto& x : t) x = int32_t(p.below(uint64_t(V)));
  return t;
}

TEST(DistComm, Zero1AndEpOfOneEqualThePlainStep) {
  const ModelConfig cfg = load_model_config(kTiny);
  const int B = 2, T = 8;
  const auto in = tokens(B * T, cfg.vocab_size, 3), tg = tokens(B * T, cfg.vocab_size, 4);
  Model<float> a(cfg), b(cfg);
  a.init(9), b.init(9);
  const comm::Groups g = comm::make_groups(comm::Communicator::world(), 0, 1, 1);
  b.set_experts(std::make_unique<parallel::EpExperts<float>>(g.ep, ExpertRange{0, cfg.num_experts}, cfg.num_layers));
  OptimizerSettings os;
  os.kind = OptimizerKind::Muon;
  Optimizer opt(a.layout.params, os);
  parallel::Zero1 z(b.layout.params, g, {1000, true});
  Optimizer opt_b(b.layout.params, os, z.owned());
  for (int step = 0; step < 3; ++step) {
    a.zero_grads(), b.zero_grads();
    const double la = a.forward(in.data(), tg.data(), B, T).loss;
    const double lb = b.forward(in.data(), tg.data(), B, T).loss;
    EXPECT_EQ(la, lb);
    a.backward(), z.begin(b.grads.data()), b.backward();
    z.grads_ready(b.grads.size() / 2);
    z.finish();
    ASSERT_EQ(a.grads, b.grads);
    const double na = std::sqrt(sum_squares(a.grads.data(), {0, a.grads.size()}));
    EXPECT_NEAR(na, z.grad_norm(), 1e-12 * na);  // summed per run of tensors: another order
    opt.step(a.params.data(), a.grads.data(), 1e-2, 0.5);
    opt_b.step(b.params.data(), z.grads(), 1e-2, 0.5);
    z.gather(b.params.data());
    ASSERT_EQ(a.params, b.params);
  }
}

}  // namespace
