// The plot's scales and ticks on known data: round steps that cover the data, labels with the
// decimals the step needs, and points that land where the axes say.
#include "sweep/svg_plot.h"

#include <gtest/gtest.h>

#include <cmath>

namespace linattn {
namespace {

void expect_ticks(double lo, double hi, const std::vector<double>& want) {
  const std::vector<double> got = nice_ticks(lo, hi);
  ASSERT_EQ(got.size(), want.size()) << "[" << lo << ", " << hi << "]";
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9 * std::max(1.0, std::fabs(want[i])));
}

TEST(NiceTicks, RoundStepsThatCoverTheData) {
  expect_ticks(0.13, 0.87, {0, 0.2, 0.4, 0.6, 0.8, 1.0});       // raw step 0.148 -> 0.2
  expect_ticks(3.7, 5.46, {3.5, 4, 4.5, 5, 5.5});               // 0.352 -> 0.5
  expect_ticks(0, 1e6, {0, 2e5, 4e5, 6e5, 8e5, 1e6});           // exactly on ticks: no extra one
  expect_ticks(-0.3, 0.3, {-0.4, -0.2, 0, 0.2, 0.4});           // 0.12 -> 0.2, the ends rounded outward
}

TEST(NiceTicks, OneValueGetsAUnitWideAxis) { expect_ticks(5, 5, {4.4, 4.6, 4.8, 5.0, 5.2, 5.4, 5.6}); }

TEST(TickLabel, DecimalsFollowTheStepAndLargeValuesGetAUnit) {
  EXPECT_EQ(tick_label(0.4, 0.2), "0.4");
  EXPECT_EQ(tick_label(0.05, 0.05), "0.05");
  EXPECT_EQ(tick_label(0, 0.05), "0.00");
  EXPECT_EQ(tick_label(400, 100), "400");
  EXPECT_EQ(tick_label(25000, 5000), "25k");
  EXPECT_EQ(tick_label(1.2e6, 2e5), "1.2M");
  EXPECT_EQ(tick_label(3e9, 1e9), "3G");
  EXPECT_EQ(tick_label(-1e-17, 0.1), "0.0");  // a rounding residue of 0 is not "-0.0"
  EXPECT_EQ(tick_label(0, 50000), "0");       // zero on an axis in thousands is not "0k"
}

TEST(Scale, MapsTheEndsOntoThePixels) {
  const Scale x{0, 10, 80, 560}, y{0, 1, 420, 40};
  EXPECT_DOUBLE_EQ(x(0), 80);
  EXPECT_DOUBLE_EQ(x(5), 320);
  EXPECT_DOUBLE_EQ(x(10), 560);
  EXPECT_DOUBLE_EQ(y(0.25), 325);  // y grows upward
}

TEST(RenderSvg, PointsLandOnTheAxesCornersAndNamesAreEscaped) {
  LinePlot p{"title", "tokens", "loss", {{"a<b", {{0, 0}, {NAN, 3}, {10, 1}}}}};
  const std::string svg = render_svg(p);
  // x ticks 0..10, y ticks 0..1: (0, 0) is the lower left corner, (10, 1) the upper right; the NaN
  // point is left out. The legend's names are short, so the area ends at 900 - 70 - 7 x 10.
  EXPECT_NE(svg.find("points=\"80.0,420.0 760.0,40.0 \""), std::string::npos) << svg;
  EXPECT_NE(svg.find(">a&lt;b</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_NE(svg.find(">0.2</text>"), std::string::npos);  // a y tick
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}

TEST(RenderSvg, ABandIsAShadedPolygonUnderItsLineAndWidensTheAxis) {
  // The line at 0.5; its band from 0 to 1 sets the y axis to 0..1.
  LinePlot p{"t", "x", "y", {{"mean", {{0, 0.5}, {10, 0.5}}, {{0, 1}, {0, 1}}}}};
  const std::string svg = render_svg(p);
  // Along the top edge (y = 1 at 40 px), then back along the bottom one (y = 0 at 420 px).
  const size_t band = svg.find("<polygon fill=\"#1f77b4\" fill-opacity=\"0.18\" stroke=\"none\" "
                               "points=\"80.0,40.0 760.0,40.0 760.0,420.0 80.0,420.0 \"/>");
  EXPECT_NE(band, std::string::npos) << svg;
  const size_t line = svg.find("points=\"80.0,230.0 760.0,230.0 \"");
  EXPECT_NE(line, std::string::npos) << svg;
  EXPECT_LT(band, line);
}

TEST(RenderSvg, ALongLegendMakesThePlotTaller) {
  LinePlot p{"t", "x", "y", {}};
  for (int i = 0; i < 36; ++i) p.series.push_back({"run" + std::to_string(i), {{0, double(i)}, {1, double(i)}}});
  const std::string svg = render_svg(p);
  // 36 rows of 18 px below the 40 px top and 20 px of margin; the last entry at 40 + 10 + 35 x 18.
  EXPECT_NE(svg.find("height=\"708\""), std::string::npos) << svg.substr(0, 200);
  EXPECT_NE(svg.find("y=\"684.0\">run35</text>"), std::string::npos);
  // Series 10 and 20 share series 0's colour, each with its own dash pattern.
  EXPECT_NE(svg.find("stroke=\"#1f77b4\" stroke-width=\"2\" stroke-dasharray=\"6 3\" points"), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"#1f77b4\" stroke-width=\"2\" stroke-dasharray=\"2 2\" points"), std::string::npos);
}

}  // namespace
}  // namespace linattn
