// One attempt of a supervised job: a process (the trainer, or mpirun and its ranks) started
// in a process group of its own, its stderr forwarded through a pipe so the supervisor keeps
// the last error line for its incident record, and ended as a whole: SIGTERM to the group
// and to every rank pid the heartbeats named, then SIGKILL after a grace period.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace zaya::ft {

// Alive and not a zombie.
bool process_alive(int pid);

class Job {
 public:
  explicit Job(const std::vector<std::string>& argv);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  pid_t pid() const { return pid_; }
  bool poll_exit();  // true once the process has exited (reaped)
  bool exited() const { return exited_; }
  int exit_code() const { return exit_code_; }  // -1 when ended by a signal
  int signal() const { return signal_; }
  void pump_stderr();  // forwards what the job wrote to stderr, keeps a tail
  std::string last_error_line() const;
  // The rank mpirun said failed ("process rank N ... exited on signal S"), -1 when none;
  // signal gets S (0 when not given).
  int launcher_failed_rank(int& signal) const;
  // Ends the whole group (and extra pids: ranks under mpirun), waiting up to grace_s after
  // SIGTERM before SIGKILL.
  void terminate(const std::vector<int>& extra_pids, double grace_s);

 private:
  pid_t pid_ = -1;
  int err_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = -1, signal_ = 0;
  std::string tail_;
};

}  // namespace zaya::ft
