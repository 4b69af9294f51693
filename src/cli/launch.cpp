// zaya launch [--np N] [--max-restarts R] [--heartbeat-timeout S] ... -- <zaya train args>:
// the fault-tolerant supervisor (src/ft/supervisor.h).
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/command.h"
#include "ft/supervisor.h"

ZAYA_COMMAND("launch", "Run zaya train under a supervisor: heartbeats, restarts from verified checkpoints",
             [](CLI::App& app) {
               auto o = std::make_shared<zaya::ft::LaunchOptions>();
               app.add_option("--np", o->np, "ranks (mpirun --oversubscribe -np N when N > 1)")
                   ->capture_default_str()
                   ->check(CLI::PositiveNumber);
               app.add_option("--max-restarts", o->max_restarts, "give up after this many restarts")
                   ->capture_default_str()
                   ->check(CLI::NonNegativeNumber);
               app.add_option("--heartbeat-timeout,--step-timeout", o->step_timeout,
                              "seconds without heartbeat progress between steps before a rank counts as hung")
                   ->capture_default_str()
                   ->check(CLI::PositiveNumber);
               app.add_option("--startup-timeout", o->startup_timeout, "the same, from the start to the first step")
                   ->capture_default_str()
                   ->check(CLI::PositiveNumber);
               app.add_option("--checkpoint-timeout", o->checkpoint_timeout, "the same, during a checkpoint save")
                   ->capture_default_str()
                   ->check(CLI::PositiveNumber);
               app.add_option("--finalize-timeout", o->finalize_timeout,
                              "seconds the job may take to exit after every rank reported done; past it the "
                              "job is ended as hung (exit 3 when the last checkpoint verifies)")
                   ->capture_default_str()
                   ->check(CLI::PositiveNumber);
               app.add_option("--backoff", o->backoff_s, "seconds before the first restart, doubling after each")
                   ->capture_default_str()
                   ->check(CLI::NonNegativeNumber);
               app.add_option("--backoff-max", o->backoff_max_s, "longest wait before a restart")
                   ->capture_default_str()
                   ->check(CLI::NonNegativeNumber);
               app.add_option("--straggler-factor", o->straggler_factor,
                              "report a rank whose median compute time over its last steps (zaya train "
                              "--straggler-window) exceeds the ranks' median by this factor")
                   ->capture_default_str()
                   ->check(CLI::Range(1.0, 1e9));
               app.add_option("--poll", o->poll_s, "heartbeat polling interval (s)")
                   ->capture_default_str()
                   ->check(CLI::Range(0.001, 60.0));
               app.add_option("--term-grace", o->term_grace_s, "seconds between SIGTERM and SIGKILL")
                   ->capture_default_str()
                   ->check(CLI::NonNegativeNumber);
               app.add_option("--mpirun", o->mpirun, "the MPI launcher")->capture_default_str();
               app.add_option("train_args", o->train_args, "zaya train arguments, after --")->required();
               app.callback([o] {
                 o->on_event = [](const std::string& line) {
                   std::printf("%s\n", line.c_str());
                   std::fflush(stdout);
                 };
                 std::exit(zaya::ft::supervise(*o));
               });
             });
