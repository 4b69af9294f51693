#include "ft/job.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/error.h"

namespace zaya::ft {

bool process_alive(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == EPERM;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

Job::Job(const std::vector<std::string>& argv) {
  ZAYA_CHECK(!argv.empty(), "launch: empty command");
  int fds[2];
  ZAYA_CHECK(::pipe(fds) == 0, "launch: pipe failed (", std::strerror(errno), ")");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  ZAYA_CHECK(pid_ >= 0, "launch: fork failed (", std::strerror(errno), ")");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "zaya launch: error: cannot run %s (%s)\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // both sides set it: no race with the first signal
  ::close(fds[1]);
  err_fd_ = fds[0];
  ::fcntl(err_fd_, F_SETFL, ::fcntl(err_fd_, F_GETFL) | O_NONBLOCK);
}

Job::~Job() {
  if (!exited_) terminate({}, 2.0);
  if (err_fd_ >= 0) ::close(err_fd_);
}

bool Job::poll_exit() {
  if (exited_) return true;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  exited_ = true;
  if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) signal_ = WTERMSIG(status);
  return true;
}

void Job::pump_stderr() {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(err_fd_, buf, sizeof buf);
    if (n <= 0) return;
    ssize_t w = ::write(2, buf, size_t(n));
    (void)w;
    tail_.append(buf, size_t(n));
    if (tail_.size() > 16384) tail_.erase(0, tail_.size() - 8192);
  }
}

std::string Job::last_error_line() const {
  std::string best, line;
  for (size_t at = 0; at < tail_.size();) {
    const size_t nl = tail_.find('\n', at);
    line = tail_.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    if (line.find("error:") != std::string::npos) best = line;
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return best;
}

int Job::launcher_failed_rank(int& signal) const {
  signal = 0;
  const size_t at = tail_.rfind("process rank ");
  if (at == std::string::npos) return -1;
  const int rank = std::atoi(tail_.c_str() + at + 13);
  const size_t sig = tail_.find("on signal ", at);
  if (sig != std::string::npos && sig < at + 200) signal = std::atoi(tail_.c_str() + sig + 10);
  return rank;
}

void Job::terminate(const std::vector<int>& extra_pids, double grace_s) {
  auto signal_all = [&](int sig) {
    if (!exited_) ::kill(pid_, sig);
    ::kill(-pid_, sig);  // the group outlives its leader while ranks run
    for (int p : extra_pids)
      if (p > 0 && p != pid_ && process_alive(p)) ::kill(p, sig);
  };
  auto all_gone = [&] {
    poll_exit();
    if (!exited_) return false;
    for (int p : extra_pids)
      if (p != pid_ && process_alive(p)) return false;
    return true;
  };
  signal_all(SIGTERM);
  signal_all(SIGCONT);  // a stopped process acts on SIGTERM only once it runs again
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (!all_gone() && std::chrono::steady_clock::now() < deadline) {
    pump_stderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!all_gone()) signal_all(SIGKILL);
  if (!exited_) {
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) {
      exited_ = true;
      if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) signal_ = WTERMSIG(status);
    }
  }
  pump_stderr();
}

}  // namespace zaya::ft
