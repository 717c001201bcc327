// linattn-plot: the validation curves of any runs, as one SVG.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/hdf5.h"
#include "sweep/plots.h"

namespace {

using namespace linattn;
namespace fs = std::filesystem;

const char* kUsage = R"(usage: linattn-plot RUN_DIR... [--out FILE.svg] [--metric val_loss|bpb|recall_accuracy]

Draws the validation metric of each run against the training tokens it had seen, one line per
run (named by its folder), from RUN_DIR/metrics.jsonl and RUN_DIR/config.yaml, as an SVG that a
browser opens. The last point of a finished run is its final evaluation, on the whole validation
split; the others read data.val_tokens tokens.

options:
  --out FILE.svg   where to write it (default: METRIC.svg in the working directory)
  --metric M       val_loss (nats per token, the default), bpb (bits per byte) or
                   recall_accuracy (MQAR runs)
  -h, --help       this help
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> dirs;
  std::string out, metric = "val_loss";
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        LINATTN_REQUIRE(i + 1 < argc, a, " needs a value (see linattn-plot --help)");
        return argv[++i];
      };
      if (a == "-h" || a == "--help") {
        std::printf("%s", kUsage);
        return 0;
      } else if (a == "--out") {
        out = value();
      } else if (a == "--metric") {
        metric = value();
        LINATTN_REQUIRE(metric == "val_loss" || metric == "bpb" || metric == "recall_accuracy", "--metric ", metric,
                        ": give val_loss, bpb or recall_accuracy");
      } else if (a.rfind("-", 0) == 0) {
        throw Error("unknown option '" + a + "' (see linattn-plot --help)");
      } else {
        dirs.push_back(a);
      }
    }
    LINATTN_REQUIRE(!dirs.empty(), "no run folder given: linattn-plot RUN_DIR... (see --help)");
    if (out.empty()) out = metric + ".svg";
    std::vector<RunRecord> runs;
    std::vector<std::string> labels;
    size_t measured = 0;
    for (const std::string& dir : dirs) {
      runs.push_back(read_run(dir));
      for (const std::string& d : runs.back().damaged)
        std::fprintf(stderr, "linattn-plot: warning: left out a damaged line: %s\n", d.c_str());
      labels.push_back(fs::path(dir).lexically_normal().filename().empty()
                           ? fs::path(dir).lexically_normal().parent_path().filename().string()
                           : fs::path(dir).lexically_normal().filename().string());
      for (const EvalPoint& e : runs.back().evals) measured += std::isfinite(metric_value(e, metric));
    }
    LINATTN_REQUIRE(measured > 0, "no evaluation of ", metric, " in these runs",
                    metric == "recall_accuracy" ? " (only MQAR runs, data.source: mqar, measure it)"
                                                : " yet (a run evaluates every train.eval_every steps and at its end)");
    LINATTN_REQUIRE(!fs::path(out).has_parent_path() || fs::is_directory(fs::path(out).parent_path()), "cannot write '",
                    out, "': its folder does not exist");
    write_text_atomically(out, render_svg(curve_plot(runs, labels, metric)));
    std::printf("wrote %s: %s of %zu runs\n", out.c_str(), metric.c_str(), runs.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-plot: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
