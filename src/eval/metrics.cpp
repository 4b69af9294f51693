#include "eval/metrics.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <regex>

#include "core/error.h"

namespace zaya::eval {

double mean(const std::vector<double>& x) {
  if (x.empty()) return std::nan("");
  double s = 0;
  for (double v : x) s += v;
  return s / double(x.size());
}

double mean_stderr(const std::vector<double>& x) {
  const size_t n = x.size();
  if (n < 2) return std::nan("");
  const double mu = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - mu) * (v - mu);
  return std::sqrt(ss / double(n - 1)) / std::sqrt(double(n));
}

double pooled_stderr(const std::vector<double>& se, const std::vector<double>& n) {
  ZAYA_CHECK(se.size() == n.size() && !n.empty(), "pooled_stderr: sizes differ");
  double num = 0, total = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    num += (n[i] - 1) * se[i] * se[i] * n[i];
    total += n[i];
  }
  if (total - double(n.size()) <= 0) return std::nan("");
  return std::sqrt(num / (total - double(n.size())) / total);
}

int argmax(const std::vector<double>& x) {
  int best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[size_t(best)]) best = int(i);
  return best;
}

size_t count_chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

ChoiceScores score_choices(const std::vector<double>& ll, const std::vector<std::string>& choices, int gold) {
  ZAYA_CHECK(ll.size() == choices.size() && !ll.empty(), "score_choices: ", ll.size(), " scores for ", choices.size(),
             " choices");
  std::vector<double> norm(ll.size()), per_byte(ll.size());
  for (size_t i = 0; i < ll.size(); ++i) {  // an empty choice counts 1
    norm[i] = ll[i] / double(std::max<size_t>(count_chars(choices[i]), 1));
    per_byte[i] = ll[i] / double(std::max<size_t>(choices[i].size(), 1));
  }
  ChoiceScores s;
  s.pred = argmax(ll);
  s.pred_norm = argmax(norm);
  s.pred_bytes = argmax(per_byte);
  s.acc = s.pred == gold ? 1.0 : 0.0;
  s.acc_norm = s.pred_norm == gold ? 1.0 : 0.0;
  s.acc_bytes = s.pred_bytes == gold ? 1.0 : 0.0;
  return s;
}

double perplexity(const std::vector<double>& ll) { return std::exp(-mean(ll)); }

double weighted_perplexity(const std::vector<double>& ll, const std::vector<double>& w) {
  double a = 0, b = 0;
  for (size_t i = 0; i < ll.size(); ++i) {
    a += ll[i];
    b += w[i];
  }
  return std::exp(-a / b);
}

double bits_per_byte(const std::vector<double>& ll, const std::vector<double>& bytes) {
  double a = 0, b = 0;
  for (size_t i = 0; i < ll.size(); ++i) {
    a += ll[i];
    b += bytes[i];
  }
  return -a / b / std::log(2.0);
}

double bootstrap_stderr_perplexity(const std::vector<double>& ll, int iters, uint64_t seed) {
  const size_t n = ll.size();
  if (n < 2 || iters < 2) return std::nan("");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<double> stats(static_cast<size_t>(iters) + 0);
  for (int it = 0; it < iters; ++it) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += ll[pick(rng)];
    stats[size_t(it)] = std::exp(-s / double(n));
  }
  // lm-eval: sample_stddev of the bootstrap statistics (not divided by sqrt(iters)).
  const double mu = mean(stats);
  double ss = 0;
  for (double v : stats) ss += (v - mu) * (v - mu);
  return std::sqrt(ss / double(iters - 1));
}

int count_words(const std::string& doc) {
  // re.split(r"\s+", doc): pieces between runs of whitespace, leading/trailing empties kept.
  int pieces = 1;
  bool in_ws = false;
  for (unsigned char c : doc) {
    const bool ws = std::strchr(" \t\n\r\f\v", c) != nullptr && c != 0;
    if (ws && !in_ws) ++pieces;
    in_ws = ws;
  }
  return pieces;
}

std::string normalize_answer(std::string s, const MatchOptions& o) {
  for (const std::string& re : o.regexes_to_ignore) s = std::regex_replace(s, std::regex(re), "");
  if (o.ignore_case)
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (o.ignore_punctuation) {
    static const char* kPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";  // Python's string.punctuation
    std::string t;
    for (char c : s)
      if (!std::strchr(kPunct, c) || c == 0) t += c;
    s = t;
  }
  return s;
}

double exact_match(const std::string& pred, const std::string& ref, const MatchOptions& o) {
  return normalize_answer(pred, o) == normalize_answer(ref, o) ? 1.0 : 0.0;
}

}  // namespace zaya::eval
