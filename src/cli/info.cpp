// zaya info: what this build runs on (GEMM library, core, threads, CPU features, and the
// instruction-set tier each decode kernel picked on this CPU).
#include <cstdio>

#include "cli/command.h"
#include "kernels/attention_group.h"
#include "kernels/gemm.h"
#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"

ZAYA_COMMAND("info", "Print the runtime: BLAS library and core, oneDNN, threads, CPU features", [](CLI::App& app) {
  app.callback([] {
    std::printf("%s\n", zaya::gemm_runtime_info().c_str());
    zaya::AttnShape s{};
    s.hd = 128;  // ZAYA1's head
    std::printf("decode kernels: bf16 weights %s, quantized weights %s, attention over the KV cache %s\n",
                zaya::linear_bf16_kernel(), zaya::linear_quant_kernel(), zaya::attention_group_kernel(s, true));
  });
});
