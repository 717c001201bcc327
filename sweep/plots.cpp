#include "sweep/plots.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace linattn {

std::string metric_label(const std::string& metric) {
  if (metric == "val_loss") return "validation loss (nats/token)";
  if (metric == "bpb") return "validation bits per byte";
  return "MQAR recall accuracy";
}

LinePlot curve_plot(const std::vector<RunRecord>& runs, const std::vector<std::string>& labels,
                    const std::string& metric) {
  LinePlot p{metric_label(metric) + " against training tokens", "training tokens", metric_label(metric), {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::vector<EvalPoint>& evals = runs[i].evals;
    // The evaluations during training when there are some: a final one on the whole split is
    // left out, since it reads other tokens than they do and would bend the line at its end.
    const bool partial = std::any_of(evals.begin(), evals.end(), [](const EvalPoint& e) { return !e.whole_split; });
    Series s{labels.at(i), {}};
    for (const EvalPoint& e : evals)
      if (!(partial && e.whole_split)) s.points.push_back({e.tokens, metric_value(e, metric)});
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

}  // namespace linattn
