// The metrics of lm-evaluation-harness, computed as it computes them (lm_eval/api/metrics.py):
// per-sample values aggregated by a mean (acc, acc_norm, exact_match) with the sample
// standard error, and the perplexity aggregations over summed log-likelihoods.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zaya::eval {

double mean(const std::vector<double>& x);
// lm-eval's mean_stderr: sample standard deviation (n - 1) over sqrt(n). NaN for n < 2.
double mean_stderr(const std::vector<double>& x);
// lm-eval's pooled_sample_stderr for a group (MMLU): sqrt(sum((n_i - 1) * se_i^2 * n_i) /
// (sum n_i - k) / sum n_i), from the members' stderrs and sizes.
double pooled_stderr(const std::vector<double>& stderrs, const std::vector<double>& sizes);
// Index of the first maximum (numpy argmax).
int argmax(const std::vector<double>& x);

// Multiple choice: acc = argmax of the summed log-probs is gold; acc_norm = argmax of the
// sums divided by each choice's length in characters (Unicode code points of the UTF-8
// text, lm-eval's len(str)) is gold; acc_bytes the same divided by UTF-8 bytes.
struct ChoiceScores {
  double acc = 0, acc_norm = 0, acc_bytes = 0;
  int pred = 0, pred_norm = 0, pred_bytes = 0;
};
// Code points of UTF-8 text: every byte that does not continue a sequence (10xxxxxx).
size_t count_chars(const std::string& s);
ChoiceScores score_choices(const std::vector<double>& loglik, const std::vector<std::string>& choices, int gold);

// LAMBADA's perplexity: exp(-mean(loglik)). Rolling: weighted perplexity over words or
// bytes, bits per byte.
double perplexity(const std::vector<double>& loglik);
double weighted_perplexity(const std::vector<double>& loglik, const std::vector<double>& weights);
double bits_per_byte(const std::vector<double>& loglik, const std::vector<double>& bytes);
// lm-eval's bootstrap stderr of an aggregation (its perplexity_stderr): `iters` resamples
// with replacement, the sample stddev of the statistic. A fixed seed (our RNG, not Python's).
double bootstrap_stderr_perplexity(const std::vector<double>& loglik, int iters, uint64_t seed);

// Words as lm-eval counts them for word_perplexity: len(re.split(r"\s+", doc)).
int count_words(const std::string& doc);

// exact_match after lm-eval's normalisation: optional lower-casing and removal of
// string.punctuation, and the regexes_to_ignore removed first.
struct MatchOptions {
  bool ignore_case = false, ignore_punctuation = false;
  std::vector<std::string> regexes_to_ignore;
};
std::string normalize_answer(std::string s, const MatchOptions& o);
double exact_match(const std::string& pred, const std::string& ref, const MatchOptions& o);

}  // namespace zaya::eval
