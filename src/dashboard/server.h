// zaya dashboard's HTTP side: a GET-only server (cpp-httplib) for a fixed set of paths:
//   /                                  the page (page.cpp)
//   /dashboard.js                      its script
//   /javascript/chart.js/chart.min.js  Debian's Chart.js (libjs-chart.js), read at start-up
//   /api/runs                          every run's state: [{name, path, state, message, ...}]
//   /api/metrics?run=I&since=N&gen=G   run I's records from index N on (see RunLog)
// Nothing else is served: no file name from a request ever reaches the file system.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dashboard/run_log.h"

namespace zaya::dashboard {

struct DashboardOptions {
  std::vector<std::string> runs;  // run directories or metrics.jsonl files
  std::string host = "127.0.0.1";
  int port = 8050;                // 0: any free port
  double refresh_s = 3;           // how often the page fetches new records
  std::string chart_js = "/usr/share/javascript/chart.js/chart.min.js";
};

class DashboardServer {
 public:
  // Checks the options and reads Chart.js (a one-line zaya::Error when it is missing).
  explicit DashboardServer(DashboardOptions opt);
  ~DashboardServer();

  // Binds the socket; returns the port (the chosen one when the option was 0).
  int bind();
  // Serves until stop(); call after bind().
  void serve();
  void stop();

  const std::vector<std::unique_ptr<RunLog>>& runs() const { return runs_; }
  // The runs' display names: directory names, or the paths as given where two share one.
  const std::vector<std::string>& names() const { return names_; }
  static constexpr const char* kChartPath = "/javascript/chart.js/chart.min.js";
  static constexpr size_t kMaxRecordsPerReply = 5000;

 private:
  struct Http;
  DashboardOptions opt_;
  std::string chart_js_;
  std::vector<std::unique_ptr<RunLog>> runs_;
  std::vector<std::string> names_;
  std::unique_ptr<Http> http_;
};

}  // namespace zaya::dashboard
