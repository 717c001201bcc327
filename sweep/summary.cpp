#include "sweep/summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/error.h"

namespace linattn {

namespace {

std::string fixed(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

std::string metric_words(const std::string& metric) {
  if (metric == "recall_accuracy") return "final MQAR recall accuracy (higher is better)";
  if (metric == "bpb") return "final validation bits per byte (lower is better)";
  return "final validation loss (lower is better)";
}

// The tuned values without their keys when there is one key: "1.0e-3" for "train.lr=1.0e-3".
std::string tuned_label(const std::string& tuned, size_t tune_keys) {
  if (tune_keys != 1) return tuned;
  return tuned.substr(tuned.find('=') + 1);
}

// "2.4123 ± 0.0150", or the mean alone for one seed.
std::string mean_sd(const Spread& s) {
  if (s.n == 0) return "";
  return fixed(s.mean) + (s.n >= 2 ? " ± " + fixed(s.sd) : "");
}

std::string md(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

Spread spread_of(const std::vector<double>& values) {
  Spread s;
  s.n = int(values.size());
  if (values.empty()) return s;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / double(s.n);
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  if (s.n >= 2) {
    double squares = 0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(squares / double(s.n - 1));
  }
  return s;
}

std::string sweep_metric(const std::vector<ResultRow>& rows) {
  for (const ResultRow& r : rows)
    if (std::isfinite(r.recall)) return "recall_accuracy";
  return "val_loss";
}

bool higher_is_better(const std::string& metric) { return metric == "recall_accuracy"; }

double row_metric(const ResultRow& row, const std::string& metric) {
  if (metric == "val_loss") return row.val_loss;
  if (metric == "bpb") return row.val_bpb;
  if (metric == "recall_accuracy") return row.recall;
  throw Error("unknown metric '" + metric + "': give val_loss, bpb or recall_accuracy");
}

bool better_beyond_spread(const Spread& a, const Spread& b, const std::string& metric) {
  if (a.n < 2 || b.n < 2) return false;
  return higher_is_better(metric) ? a.min > b.max : a.max < b.min;
}

std::vector<ConfigSummary> summarize(const std::vector<ResultRow>& rows, const std::string& metric) {
  const bool higher = higher_is_better(metric);
  auto better = [&](double a, double b) { return higher ? a > b : a < b; };
  std::vector<ConfigSummary> configs;
  std::vector<std::vector<std::vector<double>>> values, speeds, bpbs;  // [config][point]: finished runs'
  std::map<std::string, size_t> config_of;
  for (const ResultRow& r : rows) {
    const auto [at, fresh] = config_of.emplace(r.config, configs.size());
    if (fresh) {
      ConfigSummary c;
      c.config = r.config;
      c.group = r.group;
      c.values = r.values;
      c.params = r.params;
      c.state = r.state;
      configs.push_back(c);
      values.emplace_back();
      speeds.emplace_back();
      bpbs.emplace_back();
    }
    const size_t ci = at->second;
    ConfigSummary& c = configs[ci];
    size_t pi = 0;
    while (pi < c.points.size() && c.points[pi].tuned != r.tuned) ++pi;
    if (pi == c.points.size()) {
      c.points.push_back({r.tuned, 0, {}, 0});
      values[ci].emplace_back();
      speeds[ci].emplace_back();
      bpbs[ci].emplace_back();
    }
    ++c.points[pi].runs;
    c.points[pi].diverged += r.status == "diverged";
    const double v = row_metric(r, metric);
    if (r.status == "done" && std::isfinite(v)) {
      values[ci][pi].push_back(v);
      if (std::isfinite(r.tokens_per_s)) speeds[ci][pi].push_back(r.tokens_per_s);
      if (std::isfinite(r.val_bpb)) bpbs[ci][pi].push_back(r.val_bpb);
    }
  }
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    ConfigSummary& c = configs[ci];
    bool stable = false;  // a point with finished runs and none diverged
    for (size_t pi = 0; pi < c.points.size(); ++pi) {
      c.points[pi].metric = spread_of(values[ci][pi]);
      stable |= c.points[pi].metric.n > 0 && c.points[pi].diverged == 0;
    }
    for (size_t pi = 0; pi < c.points.size(); ++pi) {
      const TunedPoint& p = c.points[pi];
      if (p.metric.n > 0 && (!stable || p.diverged == 0) && (c.chosen < 0 || better(p.metric.mean, c.result().mean)))
        c.chosen = int(pi);
    }
    if (c.chosen >= 0) {
      c.tokens_per_s = spread_of(speeds[ci][size_t(c.chosen)]).mean;
      c.bpb = spread_of(bpbs[ci][size_t(c.chosen)]);
    }
  }
  // Each group's best mean, then every configuration against it.
  std::map<std::string, ConfigSummary*> best;
  for (ConfigSummary& c : configs) {
    if (c.chosen < 0) continue;
    ConfigSummary*& b = best[c.group];
    if (!b || better(c.result().mean, b->result().mean)) b = &c;
  }
  for (auto& [group, b] : best) {
    b->best_mean = true;
    bool all_behind = true, any_tied = false;
    for (ConfigSummary& c : configs) {
      if (c.group != group || c.chosen < 0 || &c == b) continue;
      if (c.result().n < 2 || b->result().n < 2) c.verdict = "not judged";
      else if (better_beyond_spread(b->result(), c.result(), metric)) c.verdict = "behind";
      else c.verdict = "tied for best";
      all_behind &= c.verdict == "behind";
      any_tied |= c.verdict == "tied for best";
    }
    b->verdict = all_behind ? "best" : any_tied ? "tied for best" : "not judged";
  }
  return configs;
}

void mark_best_configs(std::vector<ResultRow>& rows, const std::vector<ConfigSummary>& configs) {
  for (ResultRow& r : rows) {
    r.best = false;
    for (const ConfigSummary& c : configs)
      if (c.config == r.config && c.best_mean)
        r.best = r.status == "done" && r.tuned == c.points[size_t(c.chosen)].tuned;
  }
}

std::string summary_markdown(const std::vector<std::string>& keys, const std::vector<std::string>& searched,
                             const std::vector<ConfigSummary>& configs, const std::string& metric, size_t seeds) {
  std::vector<size_t> shown;  // the configuration's keys
  for (size_t k = 0; k < keys.size(); ++k)
    if (std::find(searched.begin(), searched.end(), keys[k]) == searched.end()) shown.push_back(k);
  size_t tune_keys = 0;
  for (const std::string& k : searched) tune_keys += k != "train.seed";
  const std::string tuned_header = tune_keys == 1 ? searched.front() + " (best)" : "tuned (best)";
  const std::string runs_per_point = std::to_string(std::max<size_t>(seeds, 1));

  std::ostringstream out;
  out << "## Configurations\n\nThe " << metric_words(metric) << " of each configuration";
  if (tune_keys) out << " at its best tuned value (the best mean over the seeds)";
  out << ", over " << runs_per_point << (seeds > 1 ? " seeds" : " seed")
      << ": mean ± sample standard deviation (n − 1), and the range min–max of the seeds.\n\n| configuration |";
  for (size_t k : shown) out << " " << md(keys[k]) << " |";
  if (tune_keys) out << " " << md(tuned_header) << " |";
  const bool bpb = metric == "val_loss";  // a language model's loss, also in bits per byte
  out << " seeds done | mean ± sd | min–max | verdict | params | state | tokens/s |" << (bpb ? " bits per byte |" : "")
      << "\n|---|";
  for (size_t i = 0; i < shown.size() + (tune_keys ? 1 : 0) + 7 + (bpb ? 1 : 0); ++i) out << "---|";
  out << "\n";
  for (const ConfigSummary& c : configs) {
    const bool has = c.chosen >= 0;
    out << "| " << md(c.config) << (c.best_mean ? " **(best mean)**" : "") << " |";
    for (size_t k : shown) out << " " << md(c.values.at(k)) << " |";
    if (tune_keys) {
      // The first or last value of three or more: a better one may lie beyond the search.
      const bool edge = has && c.points.size() >= 3 && (c.chosen == 0 || size_t(c.chosen) + 1 == c.points.size());
      out << " " << (has ? md(tuned_label(c.points[size_t(c.chosen)].tuned, tune_keys)) : "") << (edge ? " (edge)" : "")
          << " |";
    }
    const Spread s = has ? c.result() : Spread{};
    out << " " << (has ? std::to_string(s.n) + "/" + std::to_string(c.points[size_t(c.chosen)].runs) : "0") << " | "
        << mean_sd(s) << " | " << (s.n >= 2 ? fixed(s.min) + "–" + fixed(s.max) : "") << " | " << c.verdict << " | "
        << c.params << " | " << c.state << " | ";
    if (std::isfinite(c.tokens_per_s)) out << std::llround(c.tokens_per_s);
    out << " |";
    if (bpb) out << " " << mean_sd(c.bpb) << " |";
    out << "\n";
  }

  // The verdicts in words, group by group.
  if (tune_keys)
    out << "\n(edge): the chosen value is the first or the last of the search as listed; a better one may lie "
           "beyond it.\n";
  out << "\nA difference is called one only where the ranges (min–max) of two configurations' seeds do not "
         "overlap, each with two finished seeds or more (docs/ablations.md, \"How a sweep decides\"). "
         "By group (configurations that differ only in what the sweep compares):\n\n";
  std::vector<std::string> groups;
  for (const ConfigSummary& c : configs)
    if (std::find(groups.begin(), groups.end(), c.group) == groups.end()) groups.push_back(c.group);
  for (const std::string& g : groups) {
    const ConfigSummary* best = nullptr;
    std::map<std::string, std::vector<std::string>> by_verdict;
    for (const ConfigSummary& c : configs) {
      if (c.group != g) continue;
      if (c.best_mean) best = &c;
      else by_verdict[c.chosen >= 0 ? c.verdict : "no finished run"].push_back(c.config);
    }
    out << "- " << (g.empty() ? "all configurations" : md(g)) << ": ";
    if (!best) {
      out << "no finished run yet.\n";
      continue;
    }
    out << "best mean **" << md(best->config) << "**";
    if (tune_keys) out << " at " << md(best->points[size_t(best->chosen)].tuned);
    out << " (" << mean_sd(best->result()) << ")";
    auto list = [&](const char* verdict, const char* words) {
      const auto it = by_verdict.find(verdict);
      if (it == by_verdict.end()) return;
      out << "; " << words;
      for (size_t i = 0; i < it->second.size(); ++i) out << (i ? ", " : "") << md(it->second[i]);
    };
    list("behind", "ahead, beyond the spread, of ");
    list("tied for best", "within the spread (no difference shown) of ");
    list("not judged", "not judged against (fewer than 2 finished seeds): ");
    list("no finished run", "no finished run yet: ");
    out << ".\n";
  }

  if (tune_keys) {
    std::vector<std::string> tuned;  // the columns
    for (const ConfigSummary& c : configs)
      for (const TunedPoint& p : c.points)
        if (std::find(tuned.begin(), tuned.end(), p.tuned) == tuned.end()) tuned.push_back(p.tuned);
    out << "\n## The search\n\nThe mean ± sd of each configuration at each tuned value";
    if (tune_keys == 1) out << " of " << md(searched.front());
    out << "; **bold**: the one chosen (where a seed diverged, only when every value has a seed "
         "that diverged); (k/n): k of its n seeds finished.\n\n| configuration |";
    for (const std::string& t : tuned) out << " " << md(tuned_label(t, tune_keys)) << " |";
    out << "\n|---|";
    for (size_t i = 0; i < tuned.size(); ++i) out << "---|";
    out << "\n";
    for (const ConfigSummary& c : configs) {
      out << "| " << md(c.config) << " |";
      for (const std::string& t : tuned) {
        out << " ";
        for (size_t pi = 0; pi < c.points.size(); ++pi) {
          const TunedPoint& p = c.points[pi];
          if (p.tuned != t) continue;
          const bool chosen = int(pi) == c.chosen;
          out << (p.metric.n == 0 ? "—" : (chosen ? "**" : "") + mean_sd(p.metric) + (chosen ? "**" : ""));
          if (p.metric.n < p.runs)
            out << " (" << p.metric.n << "/" << p.runs
                << (p.diverged ? ", " + std::to_string(p.diverged) + " diverged" : "") << ")";
        }
        out << " |";
      }
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace linattn
