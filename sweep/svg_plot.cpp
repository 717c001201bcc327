#include "sweep/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace linattn {

namespace {

constexpr double kWidth = 900, kHeight = 480;  // taller when the legend needs it
constexpr double kLegendRow = 18;
constexpr double kLeft = 80, kTop = 40, kBottom = 420;  // the plot area; its right edge leaves room for the legend
// Ten colours that stay apart from each other (the usual categorical palette), then the same in
// three dash patterns: 40 series tell apart.
const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
const char* kDashes[] = {"", " stroke-dasharray=\"6 3\"", " stroke-dasharray=\"2 2\"", " stroke-dasharray=\"8 3 2 3\""};

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

double tick_step(const std::vector<double>& ticks) { return ticks.size() > 1 ? ticks[1] - ticks[0] : 1; }

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(lo))) {
    lo -= 0.5;
    hi += 0.5;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * magnitude;
  for (double m : {1.0, 2.0, 5.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  const long first = long(std::floor(lo / step + 1e-9)), last = long(std::ceil(hi / step - 1e-9));
  for (long i = first; i <= last; ++i) ticks.push_back(double(i) * step);
  return ticks;
}

std::string tick_label(double v, double step) {
  const double a = std::max(std::fabs(v), std::fabs(step));
  const char* suffix = "";
  double unit = 1;
  if (a >= 1e9) unit = 1e9, suffix = "G";
  else if (a >= 1e6) unit = 1e6, suffix = "M";
  else if (a >= 1e4) unit = 1e3, suffix = "k";
  const int decimals = std::max(0, int(-std::floor(std::log10(step / unit) + 1e-9)));
  const double shown = std::fabs(v) < step * 1e-9 ? 0.0 : v / unit;  // a rounding residue: 0, not -0.0
  if (shown == 0 && unit != 1) return "0";                              // not "0k"
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, shown, suffix);
  return buf;
}

std::string render_svg(const LinePlot& plot) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : plot.series)
    for (size_t i = 0; i < s.points.size(); ++i) {
      const auto [x, y] = s.points[i];
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
      if (i < s.band.size())
        for (double b : {s.band[i].first, s.band[i].second})
          if (std::isfinite(b)) y_lo = std::min(y_lo, b), y_hi = std::max(y_hi, b);
    }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;  // nothing measured yet
  size_t longest = 0;
  for (const Series& s : plot.series) longest = std::max(longest, s.name.size());
  const double right = kWidth - 70 - 7 * double(std::clamp<size_t>(longest, 10, 60));
  const std::vector<double> xt = nice_ticks(x_lo, x_hi), yt = nice_ticks(y_lo, y_hi);
  const Scale sx{xt.front(), xt.back(), kLeft, right}, sy{yt.front(), yt.back(), kBottom, kTop};

  const double height = std::max(kHeight, kTop + 20 + kLegendRow * double(plot.series.size()));
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << kWidth << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << (kLeft + right) / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
    << escaped(plot.title) << "</text>\n";
  // Grid lines and ticks.
  for (double t : xt) {
    const double x = sx(t);
    o << "<line x1=\"" << num(x) << "\" y1=\"" << kTop << "\" x2=\"" << num(x) << "\" y2=\"" << kBottom
      << "\" stroke=\"#e6e6e6\"/>\n<line x1=\"" << num(x) << "\" y1=\"" << kBottom << "\" x2=\"" << num(x)
      << "\" y2=\"" << kBottom + 5 << "\" stroke=\"black\"/>\n<text x=\"" << num(x) << "\" y=\"" << kBottom + 19
      << "\" text-anchor=\"middle\">" << tick_label(t, tick_step(xt)) << "</text>\n";
  }
  for (double t : yt) {
    const double y = sy(t);
    o << "<line x1=\"" << kLeft << "\" y1=\"" << num(y) << "\" x2=\"" << right << "\" y2=\"" << num(y)
      << "\" stroke=\"#e6e6e6\"/>\n<line x1=\"" << kLeft - 5 << "\" y1=\"" << num(y) << "\" x2=\"" << kLeft
      << "\" y2=\"" << num(y) << "\" stroke=\"black\"/>\n<text x=\"" << kLeft - 8 << "\" y=\"" << num(y + 4)
      << "\" text-anchor=\"end\">" << tick_label(t, tick_step(yt)) << "</text>\n";
  }
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << right - kLeft << "\" height=\""
    << kBottom - kTop << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << (kLeft + right) / 2 << "\" y=\"" << kBottom + 44 << "\" text-anchor=\"middle\">"
    << escaped(plot.x_label) << "</text>\n"
    << "<text transform=\"translate(22," << (kTop + kBottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << escaped(plot.y_label) << "</text>\n";
  // The bands first, so that no band covers another series' line; a band runs along its top edge
  // and back along its bottom one.
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const Series& s = plot.series[i];
    if (s.band.empty()) continue;
    std::string edge;
    const size_t n = std::min(s.points.size(), s.band.size());
    for (size_t k = 0; k < n; ++k)
      if (std::isfinite(s.points[k].first) && std::isfinite(s.band[k].second))
        edge += num(sx(s.points[k].first)) + "," + num(sy(s.band[k].second)) + " ";
    for (size_t k = n; k-- > 0;)
      if (std::isfinite(s.points[k].first) && std::isfinite(s.band[k].first))
        edge += num(sx(s.points[k].first)) + "," + num(sy(s.band[k].first)) + " ";
    o << "<polygon fill=\"" << kColors[i % 10] << "\" fill-opacity=\"0.18\" stroke=\"none\" points=\"" << edge
      << "\"/>\n";
  }
  // The series, each with its legend entry.
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const Series& s = plot.series[i];
    const char* color = kColors[i % 10];
    const char* dash = kDashes[i / 10 % 4];
    std::string points;
    for (auto [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) points += num(sx(x)) + "," + num(sy(y)) + " ";
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash << " points=\"" << points
      << "\"/>\n";
    for (auto [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y))
        o << "<circle cx=\"" << num(sx(x)) << "\" cy=\"" << num(sy(y)) << "\" r=\"2.5\" fill=\"" << color << "\"/>\n";
    const double ly = kTop + 10 + kLegendRow * double(i);
    o << "<line x1=\"" << right + 15 << "\" y1=\"" << num(ly) << "\" x2=\"" << right + 40 << "\" y2=\"" << num(ly)
      << "\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash << "/>\n<text x=\"" << right + 46 << "\" y=\""
      << num(ly + 4) << "\">" << escaped(s.name) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace linattn
