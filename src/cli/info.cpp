// zaya info: what this build runs on (GEMM library, core, threads, CPU features).
#include <cstdio>

#include "cli/command.h"
#include "kernels/gemm.h"

ZAYA_COMMAND("info", "Print the runtime: BLAS library and core, oneDNN, threads, CPU features", [](CLI::App& app) {
  app.callback([] { std::printf("%s\n", zaya::gemm_runtime_info().c_str()); });
});
