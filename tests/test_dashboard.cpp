// zaya dashboard's library: a run's metrics.jsonl read as it grows (partial lines, malformed
// lines, a file rewritten on resume) and the server's fixed paths over real loopback HTTP.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dashboard/run_log.h"
#include "dashboard/server.h"
#include "test_util.h"

namespace fs = std::filesystem;
using zaya::dashboard::DashboardOptions;
using zaya::dashboard::DashboardServer;
using zaya::dashboard::RunLog;
using zaya::dashboard::RunState;
using zaya::test_util::TempDir;

namespace {

void append(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::app | std::ios::binary);
  f << text;
}

std::string step_line(int step, double loss) {
  return "{\"type\":\"step\",\"step\":" + std::to_string(step) + ",\"loss\":" + std::to_string(loss) + "}\n";
}

}  // namespace

TEST(Dashboard, RunStatesFromMissingToLive) {
  TempDir t("dashboard", "states");
  const std::string dir = t / "run";
  RunLog log(dir);
  log.refresh();
  EXPECT_EQ(log.state(), RunState::Missing);
  EXPECT_NE(log.summary()["message"].get<std::string>().find(dir), std::string::npos);
  fs::create_directories(dir);
  log.refresh();
  EXPECT_EQ(log.state(), RunState::NoLog);
  EXPECT_NE(log.summary()["message"].get<std::string>().find("waiting for first log line"), std::string::npos);
  append(dir + "/metrics.jsonl", "");
  log.refresh();
  EXPECT_EQ(log.state(), RunState::Empty);
  append(dir + "/metrics.jsonl", step_line(1, 5.5));
  log.refresh();
  EXPECT_EQ(log.state(), RunState::Live);
  EXPECT_EQ(log.summary()["records"].get<size_t>(), 1u);
  EXPECT_EQ(log.summary()["last_step"].get<int64_t>(), 1);
  // A metrics.jsonl path names the same run.
  RunLog by_file(dir + "/metrics.jsonl");
  by_file.refresh();
  EXPECT_EQ(by_file.state(), RunState::Live);
  EXPECT_EQ(by_file.dir(), dir);
}

TEST(Dashboard, ReadsOnlyCompleteLinesAsTheyArrive) {
  TempDir t("dashboard", "grow");
  const std::string m = t / "metrics.jsonl";
  RunLog log(t.str());
  append(m, step_line(1, 4.0) + step_line(2, 3.5) + "{\"type\":\"step\",\"step\":3,");
  log.refresh();
  EXPECT_EQ(log.summary()["records"].get<size_t>(), 2u);  // the third line has no newline yet
  EXPECT_EQ(log.summary()["malformed"].get<uint64_t>(), 0u);
  append(m, "\"loss\":3.25}\n");
  log.refresh();
  const auto s = log.summary();
  EXPECT_EQ(s["records"].get<size_t>(), 3u);
  EXPECT_EQ(s["malformed"].get<uint64_t>(), 0u);
  const uint64_t gen = s["generation"].get<uint64_t>();
  auto j = log.records_since(2, gen, 100);
  EXPECT_FALSE(j["reset"].get<bool>());
  ASSERT_EQ(j["records"].size(), 1u);
  EXPECT_EQ(j["records"][0]["step"].get<int>(), 3);
  EXPECT_DOUBLE_EQ(j["records"][0]["loss"].get<double>(), 3.25);
  EXPECT_EQ(j["next"].get<size_t>(), 3u);
  // Pages of at most `max` records.
  j = log.records_since(0, gen, 2);
  EXPECT_EQ(j["records"].size(), 2u);
  EXPECT_EQ(j["next"].get<size_t>(), 2u);
  EXPECT_EQ(j["total"].get<size_t>(), 3u);
}

TEST(Dashboard, MalformedLinesAreSkippedAndCounted) {
  TempDir t("dashboard", "malformed");
  const std::string m = t / "metrics.jsonl";
  append(m, step_line(1, 4.0) + "{not json\n" + "[1, 2]\n" + "\n" + "{\"step\": 2}\n" + step_line(3, 3.0) +
                "{\"type\":\"step\",\"step\":4,\"loss\":NaN}\n");
  RunLog log(t.str());
  log.refresh();
  const auto s = log.summary();
  EXPECT_EQ(s["records"].get<size_t>(), 2u);
  EXPECT_EQ(s["malformed"].get<uint64_t>(), 4u);  // the blank line is neither
  EXPECT_EQ(s["malformed_last"].get<std::string>(), "line 7: not JSON");
  EXPECT_EQ(s["last_step"].get<int64_t>(), 3);
  // A line past the length bound is one malformed line, and the next line is read.
  append(m, std::string(RunLog::kMaxLine + 10, 'x') + "\n" + step_line(5, 2.5));
  log.refresh();
  EXPECT_EQ(log.summary()["malformed"].get<uint64_t>(), 5u);
  EXPECT_EQ(log.summary()["records"].get<size_t>(), 3u);
  EXPECT_EQ(log.summary()["last_step"].get<int64_t>(), 5);
}

TEST(Dashboard, RewrittenFileStartsANewGeneration) {
  TempDir t("dashboard", "rewrite");
  const std::string m = t / "metrics.jsonl";
  append(m, step_line(1, 4.0) + step_line(2, 3.0) + step_line(3, 2.0));
  RunLog log(t.str());
  log.refresh();
  const uint64_t g1 = log.summary()["generation"].get<uint64_t>();
  // A resumed run trims the records past its checkpoint: a new, shorter file (atomic rename).
  {
    std::ofstream f(t / "new.jsonl");
    f << step_line(1, 4.0) << step_line(2, 3.0) << step_line(3, 2.75) << step_line(4, 2.5);
  }
  fs::rename(t / "new.jsonl", m);
  log.refresh();
  const uint64_t g2 = log.summary()["generation"].get<uint64_t>();
  EXPECT_NE(g1, g2);
  auto j = log.records_since(3, g1, 100);  // a client holding the old file's 3 records
  EXPECT_TRUE(j["reset"].get<bool>());
  EXPECT_EQ(j["since"].get<size_t>(), 0u);
  ASSERT_EQ(j["records"].size(), 4u);
  EXPECT_DOUBLE_EQ(j["records"][2]["loss"].get<double>(), 2.75);
  // The same file truncated in place.
  { std::ofstream f(m, std::ios::trunc); f << step_line(1, 9.0); }
  log.refresh();
  EXPECT_NE(log.summary()["generation"].get<uint64_t>(), g2);
  EXPECT_EQ(log.summary()["records"].get<size_t>(), 1u);
}

TEST(Dashboard, MissingChartJsIsAOneLineError) {
  TempDir t("dashboard", "nochart");
  DashboardOptions o;
  o.runs = {t.str()};
  o.chart_js = t / "chart.min.js";
  const std::string e = zaya::test_util::error_of([&] { DashboardServer s(o); });
  EXPECT_NE(e.find("Chart.js not found at " + o.chart_js), std::string::npos) << e;
  EXPECT_NE(e.find("libjs-chart.js"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(Dashboard, ServesOnlyItsFixedPaths) {
  TempDir t("dashboard", "server");
  fs::create_directories(t / "a");
  fs::create_directories(t / "b");
  append(t / "a/metrics.jsonl", step_line(1, 4.0) + "oops\n" + step_line(2, 3.0));
  append(t / "chart.min.js", "/* chart */ var Chart = 1;");
  DashboardOptions o;
  o.runs = {t / "a", t / "b", t / "missing"};
  o.port = 0;
  o.chart_js = t / "chart.min.js";
  DashboardServer server(o);
  EXPECT_EQ(server.names(), (std::vector<std::string>{"a", "b", "missing"}));
  const int port = server.bind();
  ASSERT_GT(port, 0);
  std::thread th([&] { server.serve(); });
  struct Join {  // stops the server on every way out of the test, failed assertions included
    DashboardServer& s;
    std::thread& t;
    ~Join() { s.stop(); t.join(); }
  } join{server, th};
  httplib::Client c("127.0.0.1", port);

  auto res = c.Get("/api/runs");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  auto j = nlohmann::json::parse(res->body);
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][0]["state"], "live");
  EXPECT_EQ(j["runs"][0]["records"].get<size_t>(), 2u);
  EXPECT_EQ(j["runs"][0]["malformed"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["runs"][1]["state"], "no_log");
  EXPECT_EQ(j["runs"][2]["state"], "missing");
  EXPECT_EQ(j["refresh_ms"].get<int>(), 3000);

  const uint64_t gen = j["runs"][0]["generation"].get<uint64_t>();
  append(t / "a/metrics.jsonl", step_line(3, 2.0));
  res = c.Get(("/api/metrics?run=0&since=2&gen=" + std::to_string(gen)).c_str());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  j = nlohmann::json::parse(res->body);
  ASSERT_EQ(j["records"].size(), 1u);  // only the new one
  EXPECT_EQ(j["records"][0]["step"].get<int>(), 3);
  EXPECT_EQ(j["next"].get<size_t>(), 3u);

  res = c.Get("/javascript/chart.js/chart.min.js");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "/* chart */ var Chart = 1;");
  res = c.Get("/");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("/javascript/chart.js/chart.min.js"), std::string::npos);
  res = c.Get("/dashboard.js");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("/api/metrics?run="), std::string::npos);

  for (const char* bad : {"/api/metrics", "/api/metrics?run=3", "/api/metrics?run=-1", "/api/metrics?run=0&since=x",
                          "/api/metrics?run=0&gen=1e3"}) {
    res = c.Get(bad);
    ASSERT_TRUE(res) << bad;
    EXPECT_EQ(res->status, 400) << bad;
    EXPECT_TRUE(nlohmann::json::parse(res->body).contains("error")) << bad;
  }
  for (const char* other : {"/etc/passwd", "/../CMakeLists.txt", "/javascript/chart.js/../../../etc/passwd",
                            "/javascript/chart.js/chart.js", "/dashboard.jsx", "/a/metrics.jsonl", "/api/runs/x"}) {
    res = c.Get(other);
    ASSERT_TRUE(res) << other;
    EXPECT_EQ(res->status, 404) << other;
  }
  // A request addressed to another name (DNS rebinding) is refused.
  res = c.Get("/api/runs", httplib::Headers{{"Host", "rebound.example:80"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  res = c.Get("/api/runs", httplib::Headers{{"Host", "localhost:" + std::to_string(port)}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = c.Post("/api/runs", "x", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_NE(res->status, 200);
}
