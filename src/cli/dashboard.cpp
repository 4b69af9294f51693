// zaya dashboard RUN... [--port P] [--host ADDR]: a live page of the runs' metrics.jsonl,
// overlaid one colour per run, refreshed every few seconds (src/dashboard, docs/dashboard.md).
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/log.h"
#include "dashboard/server.h"

namespace {

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

void run(const zaya::dashboard::DashboardOptions& opt) {
  zaya::dashboard::DashboardServer server(opt);
  for (size_t i = 0; i < server.runs().size(); ++i) {
    const auto& r = *server.runs()[i];
    if (r.state() == zaya::dashboard::RunState::Missing)
      zaya::log_warn("dashboard: run directory ", r.dir(), " does not exist (the page shows it as missing until it appears)");
  }
  if (!loopback(opt.host))
    zaya::log_warn("dashboard: listening on ", opt.host, ": anyone who can reach it sees these runs' metrics");
  const int port = server.bind();
  const std::string host = opt.host.find(':') != std::string::npos ? "[" + opt.host + "]" : opt.host;
  std::printf("dashboard: http://%s:%d/ (%zu run%s; Ctrl-C stops)\n", host.c_str(), port, server.runs().size(),
              server.runs().size() == 1 ? "" : "s");
  std::fflush(stdout);
  server.serve();
}

}  // namespace

ZAYA_COMMAND("dashboard", "Serve a live page of runs' metrics (loss, lr, expert load, evals), overlaid for comparison",
             [](CLI::App& app) {
               auto opt = std::make_shared<zaya::dashboard::DashboardOptions>();
               app.add_option("runs", opt->runs, "run directories (out_dir, holding metrics.jsonl) or metrics.jsonl files")
                   ->required();
               app.add_option("--port", opt->port, "TCP port (0: any free port, printed at start)")->capture_default_str();
               app.add_option("--host", opt->host, "address to listen on (loopback by default)")->capture_default_str();
               app.add_option("--refresh", opt->refresh_s, "seconds between the page's fetches")->capture_default_str();
               app.add_option("--chart-js", opt->chart_js, "Chart.js file to serve (Debian's libjs-chart.js)")
                   ->capture_default_str();
               app.callback([opt] { run(*opt); });
             });
