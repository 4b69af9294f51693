// zaya: one binary, one subcommand per file in src/cli/.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/command.h"
#include "core/error.h"
#include "kernels/gemm.h"

namespace zaya::cli {
std::vector<CommandDef>& registry() {
  static std::vector<CommandDef> r;
  return r;
}
}  // namespace zaya::cli

int main(int argc, char** argv) {
  zaya::maybe_reexec_for_blas_core(argv);
  CLI::App app{"zaya: pretraining ZAYA1-family MoE models, and characterising the hardware for it"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "zaya 0.1.0");
  auto& reg = zaya::cli::registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& c : reg) c.setup(*app.add_subcommand(c.name, c.help));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, like every other error (CLI11's own printer adds a second).
    std::fprintf(stderr, "zaya: error: %s (see --help)\n", e.what());
    return e.get_exit_code();
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "zaya: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaya: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
