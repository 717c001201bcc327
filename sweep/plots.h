// The plots of runs and sweeps, built from run folders and results rows (drawn by svg_plot.h).
#pragma once

#include <string>
#include <vector>

#include "sweep/results.h"
#include "sweep/summary.h"
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

// `metric` against training tokens, one line per set of runs (the seeds of a configuration at its
// chosen value), named by `labels`: their mean at each evaluation all of them made (chosen as
// curve_plot chooses), in a band from their minimum to their maximum.
LinePlot band_curve_plot(const std::vector<std::vector<RunRecord>>& sets, const std::vector<std::string>& labels,
                         const std::string& metric);

// Each configuration's final `metric` at its chosen point (the mean, in a band from the seeds'
// minimum to their maximum) against x[i] (NaN leaves it out), one line per distinct series[i].
LinePlot final_band_plot(const std::string& x_name, const std::vector<ConfigSummary>& configs,
                         const std::vector<double>& x, const std::vector<std::string>& series,
                         const std::string& metric);

// The search against the first tuned key (`key`; the others of a tune list go with it): each
// configuration's mean (band: min to max over seeds) at every value, against log10 of the value
// when all values are positive numbers. Values that are not numbers are left out.
LinePlot tune_plot(const std::string& key, const std::vector<ConfigSummary>& configs, const std::string& metric);

}  // namespace linattn
