#include "sweep/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

namespace linattn {

std::string metric_label(const std::string& metric) {
  if (metric == "val_loss") return "validation loss (nats/token)";
  if (metric == "bpb") return "validation bits per byte";
  return "MQAR recall accuracy";
}

namespace {

// The evaluations a curve draws: those during training when there are some (a final one on the
// whole split reads other tokens than they do and would bend the line at its end), else all.
std::vector<EvalPoint> drawn(const std::vector<EvalPoint>& evals) {
  const bool partial = std::any_of(evals.begin(), evals.end(), [](const EvalPoint& e) { return !e.whole_split; });
  std::vector<EvalPoint> out;
  for (const EvalPoint& e : evals)
    if (!(partial && e.whole_split)) out.push_back(e);
  return out;
}

// The mean of a spread and its band, as a point of a series.
void add_point(Series& s, double x, const Spread& spread) {
  s.points.push_back({x, spread.mean});
  s.band.push_back({spread.min, spread.max});
}

// The points of a series (and its band) in the order of x.
void sort_by_x(Series& s) {
  std::vector<size_t> order(s.points.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s.points[a].first < s.points[b].first; });
  Series sorted{s.name, {}, {}};
  for (size_t i : order) {
    sorted.points.push_back(s.points[i]);
    sorted.band.push_back(s.band[i]);
  }
  s = sorted;
}

// The first tuned value of "train.lr=1.0e-3, train.lr_min=1.0e-4" as a number; NaN when it is none.
double tuned_number(const std::string& tuned) {
  const size_t from = tuned.find('=') + 1;
  const std::string text = tuned.substr(from, tuned.find(", ", from) - from);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' ? v : NAN;
}

std::string band_words() { return " (mean over seeds; band: min to max)"; }

}  // namespace

LinePlot curve_plot(const std::vector<RunRecord>& runs, const std::vector<std::string>& labels,
                    const std::string& metric) {
  LinePlot p{metric_label(metric) + " against training tokens", "training tokens", metric_label(metric), {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s{labels.at(i), {}};
    for (const EvalPoint& e : drawn(runs[i].evals)) s.points.push_back({e.tokens, metric_value(e, metric)});
    p.series.push_back(s);
  }
  return p;
}

LinePlot final_plot(const std::string& x_name, const std::vector<ResultRow>& rows, const std::vector<double>& x,
                    const std::vector<std::string>& series, const std::string& metric) {
  LinePlot p{"final " + metric_label(metric) + " against " + x_name, x_name, metric_label(metric), {}};
  std::map<std::string, size_t> line_of;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    if (r.status != "done" || !std::isfinite(x.at(i))) continue;
    auto [it, fresh] = line_of.emplace(series.at(i), p.series.size());
    if (fresh) p.series.push_back({series[i], {}});
    const double y = metric == "val_loss" ? r.val_loss : metric == "bpb" ? r.val_bpb : r.recall;
    p.series[it->second].points.push_back({x[i], y});
  }
  for (Series& s : p.series) std::sort(s.points.begin(), s.points.end());
  return p;
}

LinePlot band_curve_plot(const std::vector<std::vector<RunRecord>>& sets, const std::vector<std::string>& labels,
                         const std::string& metric) {
  LinePlot p{metric_label(metric) + " against training tokens" + band_words(), "training tokens",
             metric_label(metric), {}};
  for (size_t i = 0; i < sets.size(); ++i) {
    std::map<int64_t, std::pair<double, std::vector<double>>> by_step;  // step: tokens, the runs' values
    for (const RunRecord& run : sets[i])
      for (const EvalPoint& e : drawn(run.evals)) {
        auto& [tokens, values] = by_step[e.step];
        tokens = e.tokens;
        values.push_back(metric_value(e, metric));
      }
    Series s{labels.at(i), {}, {}};
    for (const auto& [step, at] : by_step)
      if (at.second.size() == sets[i].size()) add_point(s, at.first, spread_of(at.second));
    p.series.push_back(s);
  }
  return p;
}

LinePlot final_band_plot(const std::string& x_name, const std::vector<ConfigSummary>& configs,
                         const std::vector<double>& x, const std::vector<std::string>& series,
                         const std::string& metric) {
  LinePlot p{"final " + metric_label(metric) + " against " + x_name + band_words(), x_name, metric_label(metric), {}};
  std::map<std::string, size_t> line_of;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (configs[i].chosen < 0 || !std::isfinite(x.at(i))) continue;
    auto [it, fresh] = line_of.emplace(series.at(i), p.series.size());
    if (fresh) p.series.push_back({series[i], {}, {}});
    add_point(p.series[it->second], x[i], configs[i].result());
  }
  for (Series& s : p.series) sort_by_x(s);
  return p;
}

LinePlot tune_plot(const std::string& key, const std::vector<ConfigSummary>& configs, const std::string& metric) {
  bool positive = true;
  for (const ConfigSummary& c : configs)
    for (const TunedPoint& t : c.points) positive &= tuned_number(t.tuned) > 0;  // NaN: false
  const std::string x_name = positive ? "log10 " + key : key;
  LinePlot p{"final " + metric_label(metric) + " against " + key + band_words(), x_name, metric_label(metric), {}};
  for (const ConfigSummary& c : configs) {
    Series s{c.config, {}, {}};
    for (const TunedPoint& t : c.points) {
      const double v = tuned_number(t.tuned);
      if (std::isfinite(v) && t.metric.n > 0) add_point(s, positive ? std::log10(v) : v, t.metric);
    }
    sort_by_x(s);
    p.series.push_back(s);
  }
  return p;
}

}  // namespace linattn
