// Fault injection, always compiled in and off unless asked: `zaya train --inject SPEC`
// (repeatable) or ZAYA_INJECT="SPEC;SPEC". A SPEC is kind[:key=value,...]:
//
//   kill:rank=R,step=S[,at=checkpoint[,nth=K]]  rank R raises SIGKILL before step S, or in the
//                                  checkpoint save of step S: at its start, or as it begins its
//                                  K-th file write (the files, the manifest, then `latest`)
//   hang:rank=R,step=S[,at=checkpoint]  rank R stops (sleeps forever) before step S, or at the
//                                  start of the checkpoint save of step S
//   nan:step=S[,rank=R]            rank R's gradients get a NaN after backward of step S
//   spike:step=S[,rank=R][,factor=F]  rank R's gradients are scaled by F (default 1000)
//   corrupt-ckpt[:step=S]          rank 0 flips a data byte of the checkpoint of step S (default:
//                                  the next checkpoint saved) after it is complete
//   enospc:step=S[,rank=R][,nth=K] the K-th file write (default 2) of rank R's save at step S
//                                  fails with "No space left on device"
//   slow:rank=R,factor=F[,step=S]  rank R's compute takes F times as long from step S on (a
//                                  sleep; under --compute-clock counted, F times the count)
//   stop:rank=R,step=S[,at=checkpoint]  rank R raises SIGSTOP before step S (or at the start of
//                                  the save of step S) and goes on when sent SIGCONT
//
// rank defaults to 0. Every fault but slow fires once per run directory: the firing rank
// appends it to OUT/faults-injected.jsonl before acting, so a restarted job (--resume) does not
// fire it again; a fresh start (no --resume) clears that record.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace zaya::ft {

enum class FaultKind { Kill, Hang, Nan, Spike, CorruptCkpt, Enospc, Slow, Stop };
const char* fault_kind_name(FaultKind k);

struct FaultSpec {
  FaultKind kind = FaultKind::Kill;
  int rank = 0;
  int64_t step = -1;          // -1: corrupt-ckpt's "next save", slow's "from the start"
  double factor = 0;          // slow (> 1), spike
  bool at_checkpoint = false; // kill, hang, stop: during the save of `step`
  int nth = 2;                // enospc: which file write of the save fails; kill: 0 = at its start
  std::string text() const;   // canonical form, also the "fired" key
};

// One spec; errors name the spec and the key at fault.
FaultSpec parse_fault(const std::string& spec);
// Specs separated by ';' (or whitespace); empty pieces are ignored.
std::vector<FaultSpec> parse_faults(const std::string& list);

// Flips one byte in the tensor data of a checkpoint directory's first params file (or its
// first .safetensors file) so that Checkpoint::verify() fails; returns the file changed.
std::string corrupt_checkpoint(const std::string& dir);

// The per-process injector behind the trainer hooks.
class FaultInjector {
 public:
  // record: OUT/faults-injected.jsonl. resume: honour faults already fired (else clear the
  // record; rank 0 only).
  FaultInjector(std::vector<FaultSpec> specs, int rank, std::string record, bool resume);
  ~FaultInjector();
  bool empty() const { return specs_.empty(); }

  // last_compute_s: this rank's previous forward/backward time (slow's unit of delay);
  // counted_clock: compute times are counts, and slow scales them (slow_factor) instead.
  void before_step(int64_t step, double last_compute_s, bool counted_clock = false);
  // The factor a slow fault puts on this rank's compute at `step` (1 when none).
  double slow_factor(int64_t step) const;
  void after_backward(int64_t step, float* grads, size_t n);
  void on_stage(const char* stage, int64_t step);  // heartbeat stages: arms/disarms enospc, hang at checkpoint
  void after_checkpoint(int64_t step, const std::string& dir);

 private:
  bool due(const FaultSpec& f, int64_t step) const;
  void fire(const FaultSpec& f, int64_t step);  // records it, says so on stderr
  std::vector<FaultSpec> specs_;
  int rank_;
  std::string record_;
  std::set<std::string> fired_;
  void arm_write_hook(const FaultSpec& f, int64_t step);  // enospc, kill at a save's K-th write
  void disarm_write_hook();
  int save_writes_ = 0;
  bool write_hook_armed_ = false;
  FaultSpec armed_;
};

}  // namespace zaya::ft
