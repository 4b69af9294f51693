#include "dashboard/server.h"

#include <httplib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "dashboard/page.h"

namespace zaya::dashboard {
namespace fs = std::filesystem;

struct DashboardServer::Http {
  httplib::Server server;
};

namespace {

std::string read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ZAYA_CHECK(f, "Chart.js not found at ", path, " (Debian package libjs-chart.js; or --chart-js FILE)");
  std::ostringstream os;
  os << f.rdbuf();
  ZAYA_CHECK(f.good() || f.eof(), "Chart.js at ", path, ": read failed");
  std::string s = os.str();
  ZAYA_CHECK(!s.empty(), "Chart.js at ", path, " is empty (Debian package libjs-chart.js; or --chart-js FILE)");
  return s;
}

// A query parameter as a non-negative integer; false when absent or not one.
bool param_u64(const httplib::Request& rq, const char* key, uint64_t& out) {
  if (!rq.has_param(key)) return false;
  const std::string v = rq.get_param_value(key);
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoull(v);
  return true;
}

bool loopback_name(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The host part of a Host header ("127.0.0.1:8050", "[::1]:8050", "localhost").
std::string host_of(const std::string& h) {
  if (!h.empty() && h[0] == '[') return h.substr(1, h.find(']') - 1);
  return h.substr(0, h.find(':'));
}

void reply_json(httplib::Response& res, const nlohmann::json& j, int status = 200) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  // Non-finite numbers are written as null by nlohmann::json, so the reply is always JSON.
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

}  // namespace

DashboardServer::DashboardServer(DashboardOptions opt) : opt_(std::move(opt)), http_(std::make_unique<Http>()) {
  ZAYA_CHECK(!opt_.runs.empty(), "dashboard: give at least one run directory");
  ZAYA_CHECK(opt_.port >= 0 && opt_.port <= 65535, "dashboard: --port ", opt_.port, " is not a TCP port (0-65535)");
  ZAYA_CHECK(std::isfinite(opt_.refresh_s) && opt_.refresh_s >= 0.5 && opt_.refresh_s <= 3600,
             "dashboard: --refresh ", opt_.refresh_s, " is out of range (0.5 to 3600 seconds)");
  chart_js_ = read_whole(opt_.chart_js);
  std::map<std::string, int> base_count;
  for (const std::string& r : opt_.runs) {
    runs_.push_back(std::make_unique<RunLog>(r));
    runs_.back()->refresh();
    fs::path d = fs::path(runs_.back()->dir()).lexically_normal();
    if (d.filename().empty()) d = d.parent_path();
    names_.push_back(d.filename().string().empty() ? r : d.filename().string());
    ++base_count[names_.back()];
  }
  for (size_t i = 0; i < names_.size(); ++i)
    if (base_count[names_[i]] > 1) names_[i] = opt_.runs[i];
}

DashboardServer::~DashboardServer() = default;

int DashboardServer::bind() {
  httplib::Server& s = http_->server;
  // A worker holds a keep-alive connection while it idles; a browser opens up to 6.
  s.new_task_queue = [] { return new httplib::ThreadPool(12); };
  s.set_payload_max_length(4096);  // GET only: a request carries no body worth reading
  s.set_keep_alive_max_count(100);

  // Bound to loopback, the server answers only requests addressed to loopback: a web page
  // elsewhere that rebinds its own name to 127.0.0.1 cannot read the runs through a browser.
  if (loopback_name(opt_.host))
    s.set_pre_routing_handler([](const httplib::Request& rq, httplib::Response& res) {
      if (loopback_name(host_of(rq.get_header_value("Host")))) return httplib::Server::HandlerResponse::Unhandled;
      res.status = 403;
      res.set_content("error 403: Host is not a loopback name\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(std::string(page_html()), "text/html; charset=utf-8");
  });
  s.Get("/dashboard\\.js", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(std::string(page_js()), "text/javascript; charset=utf-8");
  });
  s.Get("/javascript/chart\\.js/chart\\.min\\.js", [this](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "max-age=3600");
    res.set_content(chart_js_, "text/javascript; charset=utf-8");
  });
  s.Get("/api/runs", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json runs = nlohmann::json::array();
    for (size_t i = 0; i < runs_.size(); ++i) {
      runs_[i]->refresh();
      nlohmann::json j = runs_[i]->summary();
      j["id"] = i;
      j["name"] = names_[i];
      runs.push_back(std::move(j));
    }
    reply_json(res, {{"refresh_ms", int64_t(opt_.refresh_s * 1000)}, {"runs", std::move(runs)}});
  });
  s.Get("/api/metrics", [this](const httplib::Request& rq, httplib::Response& res) {
    uint64_t run = 0, since = 0, gen = 0;
    if (!param_u64(rq, "run", run) || run >= runs_.size())
      return reply_json(res, {{"error", cat("run: give an index from 0 to ", runs_.size() - 1)}}, 400);
    if (rq.has_param("since") && !param_u64(rq, "since", since))
      return reply_json(res, {{"error", "since: give a record index (0 or more)"}}, 400);
    if (rq.has_param("gen") && !param_u64(rq, "gen", gen))
      return reply_json(res, {{"error", "gen: give the generation of the records held"}}, 400);
    RunLog& r = *runs_[run];
    r.refresh();
    nlohmann::json j = r.records_since(size_t(since), gen, kMaxRecordsPerReply);
    j["run"] = run;
    j["summary"] = r.summary();
    reply_json(res, j);
  });
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) res.set_content(cat("error ", res.status, "\n"), "text/plain");  // keep an API error's JSON
  });

  int port = opt_.port;
  if (port == 0) {
    port = s.bind_to_any_port(opt_.host);
    ZAYA_CHECK(port > 0, "dashboard: cannot listen on ", opt_.host, " (no free port)");
  } else {
    ZAYA_CHECK(s.bind_to_port(opt_.host, port), "dashboard: cannot listen on ", opt_.host, ":", port,
               " (in use, or not an address of this machine)");
  }
  return port;
}

void DashboardServer::serve() { http_->server.listen_after_bind(); }

void DashboardServer::stop() { http_->server.stop(); }

}  // namespace zaya::dashboard
