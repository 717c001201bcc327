// linattn-plot: the validation curves of any runs, as one SVG.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/hdf5.h"
#include "sweep/plots.h"
#include "tools/cli.h"

namespace {

using namespace linattn;
namespace fs = std::filesystem;

struct Args {
  std::vector<std::string> dirs;
  std::string out, metric = "val_loss";
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app(
      "Draws the validation metric of each run against the training tokens it had seen, one line per\n"
      "run (named by its folder), from RUN_DIR/metrics.jsonl and RUN_DIR/config.yaml, as an SVG that a\n"
      "browser opens. The last point of a finished run is its final evaluation, on the whole validation\n"
      "split; the others read data.val_tokens tokens.",
      "linattn-plot");
  app.add_option("RUN_DIR", a.dirs, "the run folders (linattn-train's --out)");
  app.add_option("--out", a.out, "where to write it (default: METRIC.svg in the working directory)")
      ->type_name("FILE.svg");
  app.add_option("--metric", a.metric,
                 "val_loss (nats per token, the default), bpb (bits per byte) or recall_accuracy (MQAR runs)")
      ->type_name("M")
      ->check(cli::one_of({"val_loss", "bpb", "recall_accuracy"}));
  cli::parse(app, argc, argv, 1);
  if (a.dirs.empty()) cli::usage_error("linattn-plot", "no run folder given: linattn-plot RUN_DIR...", 1);
  if (a.out.empty()) a.out = a.metric + ".svg";
  return a;
}

// A run's name in the legend: its folder's.
std::string label(const std::string& dir) {
  const fs::path p = fs::path(dir).lexically_normal();
  return p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
}

int run(const Args& a) {
  std::vector<RunRecord> runs;
  std::vector<std::string> labels;
  size_t measured = 0;
  for (const std::string& dir : a.dirs) {
    runs.push_back(read_run(dir));
    for (const std::string& d : runs.back().damaged)
      std::fprintf(stderr, "linattn-plot: warning: left out a damaged line: %s\n", d.c_str());
    labels.push_back(label(dir));
    for (const EvalPoint& e : runs.back().evals) measured += std::isfinite(metric_value(e, a.metric));
  }
  LINATTN_REQUIRE(measured > 0, "no evaluation of ", a.metric, " in these runs",
                  a.metric == "recall_accuracy" ? " (only MQAR runs, data.source: mqar, measure it)"
                                                : " yet (a run evaluates every train.eval_every steps and at its end)");
  LINATTN_REQUIRE(!fs::path(a.out).has_parent_path() || fs::is_directory(fs::path(a.out).parent_path()),
                  "cannot write '", a.out, "': its folder does not exist");
  write_text_atomically(a.out, render_svg(curve_plot(runs, labels, a.metric)));
  std::printf("wrote %s: %s of %s\n", a.out.c_str(), a.metric.c_str(), cli::counted((long long)runs.size(), "run").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-plot: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
