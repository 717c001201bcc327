// Line plots as SVG, written by hand: axes with round ticks, one polyline per series, a legend.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace linattn {

// Round tick values covering [lo, hi]: steps of 1, 2 or 5 x 10^k, about `target` of them; the
// first tick is at or below lo and the last at or above hi (the axis then spans them).
// lo == hi gets a unit-wide axis around it.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// A tick's text: enough decimals for the step between ticks, large values with k, M or G.
std::string tick_label(double v, double step);

// [lo, hi] onto [from, to] pixels (to < from for a y axis, which grows upward).
struct Scale {
  double lo, hi, from, to;
  double operator()(double v) const { return from + (v - lo) / (hi - lo) * (to - from); }
};

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite ones are left out
  // Empty, or (low, high) at each point: a shaded band around the line (the spread over seeds).
  std::vector<std::pair<double, double>> band = {};
};

struct LinePlot {
  std::string title, x_label, y_label;
  std::vector<Series> series;
};

// The plot as a complete SVG document (each band under its line ; 900 x 480 px, taller for a legend of more
// than 23 series; the legend to the right of the axes).
std::string render_svg(const LinePlot& plot);

}  // namespace linattn
