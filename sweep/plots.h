// The plots of runs and sweeps, built from run folders and results rows (drawn by svg_plot.h).
#pragma once

#include <string>
#include <vector>

#include "sweep/results.h"
#include "sweep/svg_plot.h"

namespace linattn {

// The metric's axis name: "validation loss (nats/token)", ...
std::string metric_label(const std::string& metric);

// `metric` against training tokens, one line per run, named by `labels`: the evaluations during
// training, or those on the whole split where a run has no others (EvalPoint::whole_split).
LinePlot curve_plot(const std::vector<RunRecord>& runs, const std::vector<std::string>& labels,
                    const std::string& metric);

// The final `metric` of the finished rows against x[i] (a swept value; NaN leaves the row out),
// one line per distinct series[i].
LinePlot final_plot(const std::string& x_name, const std::vector<ResultRow>& rows, const std::vector<double>& x,
                    const std::vector<std::string>& series, const std::string& metric);

}  // namespace linattn
