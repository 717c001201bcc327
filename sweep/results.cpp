#include "sweep/results.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "data/json.h"
#include "layers/model.h"
#include "layers/state_size.h"
#include "train/metrics_log.h"

namespace linattn {

namespace {

namespace fs = std::filesystem;

double number(const data::Json& record, const char* key) {
  return record.contains(key) && record[key].is_number() ? record[key].get<double>() : NAN;
}

// A number for a table: "" when not measured, else printf's `format`.
std::string cell(double v, const char* format) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A markdown table cell: '|' escaped, lines joined.
std::string md_field(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" / ") : std::string(1, c);
  return out;
}

// The numeric columns of a row, in table order.
std::vector<std::string> measured(const ResultRow& r) {
  return {std::to_string(r.params), std::to_string(r.state), cell(r.tokens, "%.0f"), cell(r.tokens_per_s, "%.0f"),
          cell(r.val_loss, "%.4f"), cell(r.val_ppl, "%.3f"), cell(r.val_bpb, "%.4f"), cell(r.recall, "%.4f")};
}

const std::vector<std::string> kColumns = {"params", "state", "tokens", "tokens_per_s",
                                           "val_loss", "val_ppl", "val_bpb", "recall_accuracy"};

}  // namespace

RunRecord read_run(const std::string& dir) {
  RunRecord run;
  run.dir = dir;
  const fs::path config = fs::path(dir) / "config.yaml", metrics = fs::path(dir) / "metrics.jsonl";
  LINATTN_REQUIRE(fs::is_regular_file(config), "'", dir, "' is no run folder: it has no config.yaml (give folders "
                  "that linattn-train wrote, the --out or train.out_dir of a run)");
  run.config = load_config(config.string());
  const double tokens_per_step = double(run.config.train.batch_size * run.config.data.seq_len);
  std::ifstream in(metrics, std::ios::binary);
  LINATTN_REQUIRE(in, "cannot read '", metrics.string(), "': the run has not started yet");
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  std::map<int64_t, EvalPoint> evals;
  std::set<int64_t> done_steps;  // a finished run's final evaluation is at the step of its "done" record
  int64_t last_step = 0;
  size_t line_number = 0;
  for (size_t from = 0; from < text.size();) {
    const size_t end = text.find('\n', from);
    if (end == std::string::npos) break;  // the half-written last line of a run writing or killed
    const std::string line = text.substr(from, end - from);
    from = end + 1;
    const std::string where = metrics.string() + ":" + std::to_string(++line_number);
    if (line.empty()) continue;
    data::Json r;
    try {
      r = parse_json_line(line, metrics.string(), line_number);
    } catch (const Error& e) {
      run.damaged.push_back(e.what());
      continue;
    }
    if (!r.is_object() || !std::isfinite(number(r, "step"))) {
      run.damaged.push_back(where + ": not a record (no \"step\" number)");
      continue;
    }
    const int64_t step = int64_t(number(r, "step"));
    last_step = std::max(last_step, step);
    if (r.contains("val_loss")) {
      EvalPoint& e = evals[step];
      e = {step, double(step) * tokens_per_step, number(r, "val_loss"), number(r, "val_ppl"),
           number(r, "val_bpb"), number(r, "recall_accuracy")};
    }
    // A resumed run past its end appends more: the last record counts.
    if (r.contains("done")) {
      done_steps.insert(step);
      run.done = true;
      run.tokens = number(r, "tokens");
      run.tokens_per_s = run.tokens / number(r, "seconds");
    }
  }
  for (auto& [step, e] : evals) {
    e.whole_split = run.config.data.val_tokens == 0 || done_steps.count(step);
    run.evals.push_back(e);
  }
  if (!run.done) {
    run.tokens_per_s = NAN;
    run.tokens = double(last_step) * tokens_per_step;
  }
  return run;
}

double metric_value(const EvalPoint& e, const std::string& metric) {
  if (metric == "val_loss") return e.val_loss;
  if (metric == "bpb") return e.val_bpb;
  if (metric == "recall_accuracy") return e.recall_accuracy;
  throw Error("unknown metric '" + metric + "': give val_loss, bpb or recall_accuracy");
}

void fill_sizes(ResultRow& row, const Config& config) {
  row.params = Model(config.model, DType::f32).params().count();
  row.state = state_size(config.model, config.data.seq_len);
}

void fill_row(ResultRow& row, const RunRecord& run) {
  fill_sizes(row, run.config);
  row.tokens = run.tokens;
  row.tokens_per_s = run.tokens_per_s;
  if (!run.done || run.evals.empty()) return;  // the final evaluation is the one that counts
  const EvalPoint& last = run.evals.back();
  row.val_loss = last.val_loss;
  row.val_ppl = last.val_ppl;
  row.val_bpb = last.val_bpb;
  row.recall = last.recall_accuracy;
}

void mark_best(std::vector<ResultRow>& rows) {
  std::map<std::string, bool> has_recall;
  for (const ResultRow& r : rows) has_recall[r.group] |= std::isfinite(r.recall);
  std::map<std::string, ResultRow*> best;
  for (ResultRow& r : rows) {
    r.best = false;
    const double score = has_recall[r.group] ? -r.recall : r.val_loss;  // lower is better
    if (r.status != "done" || !std::isfinite(score)) continue;
    ResultRow*& b = best[r.group];
    const double best_score = b ? (has_recall[r.group] ? -b->recall : b->val_loss) : INFINITY;
    if (score < best_score) b = &r;
  }
  for (auto& [group, r] : best) r->best = true;
}

std::string results_csv(const std::vector<std::string>& keys, const std::vector<ResultRow>& rows) {
  std::ostringstream out;
  out << "name";
  for (const std::string& k : keys) out << "," << csv_field(k);
  for (const std::string& c : kColumns) out << "," << c;
  out << ",status,best,error\n";
  for (const ResultRow& r : rows) {
    out << csv_field(r.name);
    for (const std::string& v : r.values) out << "," << csv_field(v);
    for (const std::string& v : measured(r)) out << "," << v;
    out << "," << r.status << "," << (r.best ? 1 : 0) << "," << csv_field(r.error) << "\n";
  }
  return out.str();
}

std::string results_markdown(const std::vector<std::string>& keys, const std::vector<ResultRow>& rows,
                             bool searched) {
  std::ostringstream out;
  out << "| run |";
  for (const std::string& k : keys) out << " " << md_field(k) << " |";
  out << " params | state | tokens | tokens/s | val loss | ppl | bpb | MQAR acc | status |\n|---|";
  for (size_t i = 0; i < keys.size() + kColumns.size() + 1; ++i) out << "---|";
  out << "\n";
  for (const ResultRow& r : rows) {
    out << "| " << md_field(r.name) << (r.best ? " **(best)**" : "") << " |";
    for (const std::string& v : r.values) out << " " << md_field(v) << " |";
    for (const std::string& v : measured(r)) out << " " << v << " |";
    out << " " << r.status << (r.error.empty() ? "" : ": " + md_field(r.error)) << " |\n";
  }
  out << (searched ? "\n**(best)**: the finished runs of the best configuration of their group (the best mean "
                     "over seeds at its chosen value; \"Configurations\" above)."
                   : "\n**(best)**: the best finished run of its group (rows that differ only in what the sweep "
                     "compares): highest MQAR recall accuracy, else lowest final validation loss.")
      << " state: the scalars a model carries "
         "from token to token at data.seq_len (linear mixers' states plus attention KV caches). The final "
         "validation loss, perplexity and bits per byte are those of the whole validation split.\n";
  return out.str();
}

}  // namespace linattn
