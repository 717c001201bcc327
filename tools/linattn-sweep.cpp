// linattn-sweep: runs the runs of a sweep file, one after another or --jobs at a time, each as linattn-train,
// and keeps results.csv, results.md and the plots of the sweep folder up to date after each.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/hdf5.h"
#include "sweep/plots.h"
#include "sweep/results.h"
#include "sweep/summary.h"
#include "sweep/sweep_file.h"
#include "tools/cli.h"
#include "train/checkpoint.h"
#include "train/folder_lock.h"
#include "train/shell_quote.h"

namespace {

using namespace linattn;
namespace fs = std::filesystem;

struct Args {
  std::string path;
  std::vector<std::string> only;
  std::vector<std::string> sets;  // --set KEY=VALUE for every run
  std::string out;                // --out: instead of the sweep file's out_dir
  int jobs = 1;
  bool dry_run = false;
  bool results_only = false;
  std::string again;  // this command, to continue an interrupted sweep with
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app(
      "Runs every run of SWEEP.yaml (a base config plus overrides; README.md, \"linattn-sweep\") one\n"
      "after another (or --jobs N at a time), each as linattn-train with its run folder OUT_DIR/NAME. After\n"
      "each run (with several jobs, at most every 10 s) it writes OUT_DIR/results.csv, OUT_DIR/results.md\n"
      "and the plots OUT_DIR/*.svg.\n\n"
      "Every run's config is checked before the first starts: a problem is reported at the sweep file's\n"
      "line. Run again, the sweep skips finished runs and resumes an interrupted one from its newest\n"
      "checkpoint. A run that fails is recorded as failed (with the end of its error output) and the\n"
      "sweep goes on; run the sweep again to retry it. A run whose loss diverged is kept as diverged,\n"
      "not retried.\n\n"
      "With tune: and seeds:, each configuration trains at every tuned value with every seed, and\n"
      "results.md reports each at its value with the best mean over the seeds (mean, sd, min-max).",
      "linattn-sweep");
  app.add_option("SWEEP.yaml", a.path, "the sweep file");
  app.add_flag("--dry-run", a.dry_run, "check the sweep file and every run's config, list the runs and their "
                                       "commands, exit");
  app.add_option("--only", a.only, "run only the run NAME (repeatable); the results still list every run")
      ->type_name("NAME")
      ->allow_extra_args(false);
  app.add_option("--jobs,-j", a.jobs, "train N runs at once, 1 to 4096, each in its own process (default 1); with "
                                      "more than one, each run's output goes to RUN_DIR/train.log")
      ->type_name("N")
      ->check(cli::whole_number(1, 4096));
  app.add_option("--set", a.sets, "KEY=VALUE for every run, after the sweep file's own overrides (repeatable; "
                                  "e.g. --set train.device=cuda); not a key the runs differ in")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_option("--out", a.out, "the sweep folder, instead of the sweep file's out_dir")->type_name("DIR");
  app.add_flag("--results-only", a.results_only, "train nothing: write results.csv, results.md and the plots again "
                                                 "from the run folders as they are (e.g. a sweep copied from another "
                                                 "machine), and exit");
  app.footer(
      "Ctrl-C (or SIGTERM, or its terminal closing) stops the running runs at the end of their step (each\n"
      "writes a checkpoint) and then the sweep; the same command continues it. A sweep killed outright\n"
      "(SIGKILL) leaves its runs to stop so on their own.");
  cli::parse(app, argc, argv, 1);
  a.again = "linattn-sweep";
  for (int i = 1; i < argc; ++i) a.again += " " + shell_quoted(argv[i]);
  if (a.path.empty()) cli::usage_error("linattn-sweep", "no sweep file given: linattn-sweep SWEEP.yaml", 1);
  return a;
}

volatile sig_atomic_t g_signals = 0;  // SIGINT/SIGTERM/SIGHUP received
volatile sig_atomic_t g_last_signal = 0;
void on_signal(int sig) {
  g_last_signal = sig;
  g_signals = g_signals + 1;
}

// What stopped the runs, for their lines.
const char* stopped_by() {
  return g_last_signal == SIGHUP ? "SIGHUP (its terminal closed)" : g_last_signal == SIGTERM ? "SIGTERM" : "the Ctrl-C";
}

std::string duration(double seconds) {
  if (!std::isfinite(seconds)) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

// A command line to copy into a shell.
std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quoted(w);
  }
  return out;
}

// The run folder holds a finished run: the trainer's last record is in its metrics.
bool finished(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "metrics.jsonl");
  for (std::string line; std::getline(in, line);)
    if (line.find("\"done\": ") != std::string::npos) return true;
  return false;
}

fs::path error_file(const std::string& dir) { return fs::path(dir) / "sweep-error.txt"; }
// A run stopped by the trainer because its loss went non-finite (too high a learning rate): an
// outcome of the sweep, kept and not retried (removing the run folder trains it again).
fs::path diverged_file(const std::string& dir) { return fs::path(dir) / "sweep-diverged.txt"; }

// Nothing is left to train in the run folder: the run finished or diverged.
bool settled(const std::string& dir) { return finished(dir) || fs::exists(diverged_file(dir)); }

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The last `n` non-empty lines of `text`.
std::string last_lines(const std::string& text, int n) {
  std::vector<std::string> lines;
  size_t from = 0;
  while (from < text.size()) {
    size_t end = text.find('\n', from);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(from, end - from);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t cr = line.rfind('\r');  // a progress line redrawn in place: its last state
    if (cr != std::string::npos) line = line.substr(cr + 1);
    if (!line.empty()) lines.push_back(line);
    from = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > size_t(n) ? lines.size() - size_t(n) : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : "\n") + lines[i];
  return out;
}

struct Outcome {
  int status = 0;           // exit status, or 128 + signal
  std::string stderr_tail;  // the end of what it wrote to stderr
};

// A training run in progress: its process, and its stderr read here.
struct Child {
  size_t k = 0, i = 0;  // its place in the runs to do, and its run
  pid_t pid = -1;
  int stderr_fd = -1;   // the read end of its stderr
  int log_fd = -1;      // RUN_DIR/train.log, which takes its stdout and stderr; -1: they go to ours
  std::string kept;     // the end of its stderr
  std::chrono::steady_clock::time_point start;
};

// Starts `argv` in its own process group (so that a Ctrl-C reaches it once, forwarded from here),
// its stdout on ours or into `log_fd`, its stderr into a pipe that `drain` reads.
Child start_child(const std::vector<std::string>& argv, int log_fd) {
  int pipe_fds[2];
  // Closed on exec: the runs started later do not hold this one's pipe.
  LINATTN_REQUIRE(pipe2(pipe_fds, O_CLOEXEC) == 0, "cannot create a pipe: ", std::strerror(errno));
  std::fflush(stdout);
  const pid_t sweep = getpid();
  const pid_t pid = fork();
  LINATTN_REQUIRE(pid >= 0, "cannot start a process: ", std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    // A sweep killed outright (SIGKILL) leaves no run behind: the run gets SIGTERM, as from a Ctrl-C.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != sweep) _exit(130);
    // Out of the terminal's foreground group, reading the terminal would stop it (mpirun reads stdin).
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, 0);
    if (log_fd >= 0) dup2(log_fd, 1);
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run '%s': %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(pipe_fds[1]);
  Child c;
  c.pid = pid;
  c.stderr_fd = pipe_fds[0];
  c.log_fd = log_fd;
  c.start = std::chrono::steady_clock::now();
  return c;
}

// Copies what the child wrote to stderr to its log (or to our stderr) and keeps its end; false
// once the child has closed its stderr (it is ending).
bool drain(Child& c) {
  char buf[4096];
  const ssize_t n = read(c.stderr_fd, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  if (c.log_fd >= 0) {
    if (write(c.log_fd, buf, size_t(n)) < 0) {}  // a full disk shows in the run's own files
  } else {
    fwrite(buf, 1, size_t(n), stderr);
  }
  c.kept.append(buf, size_t(n));
  if (c.kept.size() > 65536) c.kept.erase(0, c.kept.size() - 32768);
  return true;
}

// Waits for the child's end (forwarding signals meanwhile) and closes its files.
Outcome finish(Child& c, const std::function<void()>& forward) {
  close(c.stderr_fd);
  if (c.log_fd >= 0) close(c.log_fd);
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) forward();
  Outcome out;
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  out.stderr_tail = last_lines(c.kept, 5);
  if (WIFSIGNALED(status))
    out.stderr_tail += (out.stderr_tail.empty() ? "" : "\n") + std::string("killed by signal ") +
                       std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return out;
}

// `value` as a number; NaN when it is not one.
double number(const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  return !value.empty() && *end == '\0' ? v : NAN;
}

// The value of a grid key in run i as a number (NaN where it is not one).
double grid_number(const Sweep& s, size_t i, const std::string& key) {
  for (const Override& o : s.runs[i].point)
    if (o.key == key) return number(o.value);
  return NAN;
}

// The line of run i in a plot against a grid key: its runs entry and its other grid values.
std::string series_label(const Sweep& s, size_t i, const std::string& key) {
  std::string label = s.runs[i].entry;
  for (const Override& o : s.runs[i].point)
    if (o.key != key) label += (label.empty() ? "" : " ") + o.key.substr(o.key.rfind('.') + 1) + "=" + o.value;
  return label.empty() ? "runs" : label;
}

// Grid keys with two numbers or more and nothing else: those the final metric is drawn against.
std::vector<std::string> numeric_grid_keys(const Sweep& s) {
  std::vector<std::string> keys;
  for (const std::string& key : s.grid_keys) {
    std::set<double> seen;
    bool all = true;
    for (size_t i = 0; i < s.runs.size(); ++i) {
      const double x = grid_number(s, i, key);
      all &= !std::isnan(x);
      seen.insert(x);
    }
    if (all && seen.size() >= 2) keys.push_back(key);
  }
  return keys;
}

// The plots of a sweep without tune and seeds: every run's curve; the final metric against each
// numeric grid key, one line per runs entry and other grid values.
void write_run_plots(const Sweep& s, const fs::path& out, const std::vector<ResultRow>& rows,
                     const std::vector<RunRecord>& records, const std::vector<std::string>& labels,
                     const std::string& metric) {
  write_text_atomically(out / "val_loss.svg", render_svg(curve_plot(records, labels, "val_loss")));
  if (metric == "recall_accuracy")
    write_text_atomically(out / "recall_accuracy.svg", render_svg(curve_plot(records, labels, "recall_accuracy")));
  for (const std::string& key : numeric_grid_keys(s)) {
    std::vector<double> x;
    std::vector<std::string> series;
    for (size_t i = 0; i < s.runs.size(); ++i) {
      x.push_back(grid_number(s, i, key));
      series.push_back(series_label(s, i, key));
    }
    write_text_atomically(out / ("final_" + metric + "_vs_" + folder_name(key) + ".svg"),
                          render_svg(final_plot(key, rows, x, series, metric)));
  }
}

// The plots of a sweep with tune or seeds, each configuration at its chosen value: its curve, the
// mean of its seeds in a band from their minimum to their maximum; its final metric against each
// numeric grid key; and, for one tuned key, the whole search against that key.
void write_search_plots(const Sweep& s, const fs::path& out, const std::vector<ResultRow>& rows,
                        const std::vector<RunRecord>& records, const std::vector<int>& record_of,
                        const std::vector<ConfigSummary>& configs, const std::string& metric) {
  std::vector<size_t> first_run;  // of each configuration
  for (const ConfigSummary& c : configs)
    for (size_t i = 0; i < s.runs.size(); ++i)
      if (s.runs[i].config == c.config) {
        first_run.push_back(i);
        break;
      }
  std::vector<std::vector<RunRecord>> sets;
  std::vector<std::string> labels;
  for (const ConfigSummary& c : configs) {
    if (c.chosen < 0) continue;
    const std::string& tuned = c.points[size_t(c.chosen)].tuned;
    sets.emplace_back();
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].config == c.config && rows[i].tuned == tuned && rows[i].status == "done" && record_of[i] >= 0)
        sets.back().push_back(records[size_t(record_of[i])]);
    labels.push_back(c.config + (tuned.empty() ? "" : " (" + tuned + ")"));
  }
  write_text_atomically(out / "val_loss.svg", render_svg(band_curve_plot(sets, labels, "val_loss")));
  if (metric == "recall_accuracy")
    write_text_atomically(out / "recall_accuracy.svg", render_svg(band_curve_plot(sets, labels, "recall_accuracy")));
  for (const std::string& key : numeric_grid_keys(s)) {
    std::vector<double> x;
    std::vector<std::string> series;
    for (size_t i : first_run) {
      x.push_back(grid_number(s, i, key));
      series.push_back(series_label(s, i, key));
    }
    write_text_atomically(out / ("final_" + metric + "_vs_" + folder_name(key) + ".svg"),
                          render_svg(final_band_plot(key, configs, x, series, metric)));
  }
  // Against the first tuned key, when its values tell the tuned points apart.
  std::set<std::string> points, firsts;
  for (const SweepRun& r : s.runs) {
    points.insert(r.tuned);
    firsts.insert(r.tuned.substr(0, r.tuned.find(", ")));
  }
  if (!s.tune_keys.empty() && firsts.size() == points.size())
    write_text_atomically(out / ("final_" + metric + "_vs_" + folder_name(s.tune_keys[0]) + ".svg"),
                          render_svg(tune_plot(s.tune_keys[0], configs, metric)));
}

// results.csv, results.md and the plots, from every run folder of the sweep as it is now.
void write_results(const Sweep& s) {
  std::vector<ResultRow> rows;
  std::vector<RunRecord> records;
  std::vector<std::string> labels;
  std::vector<int> record_of;  // each row's record; -1: none
  bool any_recall = false;
  for (size_t i = 0; i < s.runs.size(); ++i) {
    const SweepRun& r = s.runs[i];
    const std::string dir = s.run_dir(i);
    ResultRow row;
    row.name = r.name;
    row.config = r.config;
    row.tuned = r.tuned;
    row.group = r.group;
    for (const std::string& key : s.keys) {
      row.values.push_back("");
      for (const Override& o : r.overrides)
        if (o.key == key) row.values.back() = o.value;
    }
    fill_sizes(row, load_config(s.base, s.set_items(i)));
    const bool has_metrics = fs::exists(fs::path(dir) / "metrics.jsonl") && fs::exists(fs::path(dir) / "config.yaml");
    row.status = finished(dir)                          ? "done"
                 : fs::exists(diverged_file(dir))       ? "diverged"
                 : fs::exists(error_file(dir))          ? "failed"
                 : !latest_checkpoint(dir).empty()      ? "interrupted"
                 : has_metrics                          ? "interrupted"
                                                        : "pending";
    if (row.status == "failed") row.error = read_text(error_file(dir));
    if (row.status == "diverged") row.error = read_text(diverged_file(dir));
    record_of.push_back(-1);
    if (has_metrics) {
      RunRecord run = read_run(dir);
      for (const std::string& d : run.damaged) std::fprintf(stderr, "warning: left out a damaged line: %s\n", d.c_str());
      fill_row(row, run);
      for (const EvalPoint& e : run.evals) any_recall |= std::isfinite(e.recall_accuracy);
      record_of.back() = int(records.size());
      records.push_back(std::move(run));
      labels.push_back(r.name);
    }
    rows.push_back(row);
  }
  const std::string metric = any_recall ? "recall_accuracy" : "val_loss";
  const bool search = !s.tune_keys.empty() || !s.seeds.empty();
  std::vector<ConfigSummary> configs;
  std::string summary;
  if (search) {
    configs = summarize(rows, metric);
    mark_best_configs(rows, configs);
    std::vector<std::string> searched = s.tune_keys;
    if (!s.seeds.empty()) searched.push_back("train.seed");
    summary = summary_markdown(s.keys, searched, configs, metric, s.seeds.size()) + "\n## Every run\n\n";
  } else {
    mark_best(rows);
  }
  fs::create_directories(s.out_dir);
  const fs::path out(s.out_dir);
  // Each through a temporary file: a full disk leaves the last complete one, and an error.
  write_text_atomically(out / "results.csv", results_csv(s.keys, rows));
  write_text_atomically(out / "results.md", "# " + s.path + "\n\nBase config: " + s.base + "\n\n" + summary +
                                                results_markdown(s.keys, rows, search));
  if (search) write_search_plots(s, out, rows, records, record_of, configs, metric);
  else write_run_plots(s, out, rows, records, labels, metric);
}

// Every --only name is a run of the sweep.
void check_only(const Sweep& s, const std::vector<std::string>& only) {
  for (const std::string& name : only) {
    std::string names;
    bool known = false;
    for (const SweepRun& r : s.runs) known |= r.name == name, names += (names.empty() ? "" : ", ") + r.name;
    LINATTN_REQUIRE(known, "--only ", name, ": the sweep has no such run (its runs: ", names, ")");
  }
}

// The command of run i: a fresh start, or the continuation of its run folder.
std::vector<std::string> run_command(const Sweep& s, size_t i, bool resume) {
  const std::string train = (fs::read_symlink("/proc/self/exe").parent_path() / "linattn-train").string();
  std::vector<std::string> argv = s.launcher;
  argv.push_back(train);
  if (resume) {
    argv.insert(argv.end(), {"--resume", s.run_dir(i)});
    return argv;
  }
  argv.push_back(s.base);
  for (const std::string& item : s.set_items(i)) argv.insert(argv.end(), {"--set", item});
  argv.insert(argv.end(), {"--out", s.run_dir(i)});
  return argv;
}

// --dry-run: each run's state, size and command.
void list_runs(const Sweep& s, const std::vector<size_t>& todo) {
  for (size_t i : todo) {
    const std::string dir = s.run_dir(i);
    const bool done = finished(dir), diverged = !done && settled(dir);
    const bool resume = !done && !diverged && !latest_checkpoint(dir).empty();
    ResultRow sizes;
    fill_sizes(sizes, load_config(s.base, s.set_items(i)));
    std::printf("  %-28s %-15s %9lld parameters, state %lld scalars\n      %s\n", s.runs[i].name.c_str(),
                done ? "done (skipped)" : diverged ? "diverged (skipped)" : resume ? "resumes" : "new",
                (long long)sizes.params,
                (long long)sizes.state, joined(run_command(s, i, resume)).c_str());
  }
  std::printf("dry run: the sweep file and every run's config are valid\n");
}

// The final result of a finished run, for its progress line: "val loss 1.7335 (bpb 2.501)" or
// "recall 0.996"; "" when it cannot be read.
std::string final_result(const std::string& dir) {
  try {
    const RunRecord run = read_run(dir);
    if (run.evals.empty()) return "";
    const EvalPoint& e = run.evals.back();
    char buf[96];
    if (std::isfinite(e.recall_accuracy))
      std::snprintf(buf, sizeof buf, "recall %.3f, val loss %.4f", e.recall_accuracy, e.val_loss);
    else
      std::snprintf(buf, sizeof buf, "val loss %.4f (bpb %.3f)", e.val_loss, e.val_bpb);
    return buf;
  } catch (const std::exception&) {
    return "";
  }
}

// Runs the runs `todo` not finished (or diverged) before, `jobs` at a time; the exit status: 130
// when interrupted, 1 when a run failed, else 0. With one job a run's output goes to the terminal
// and the results are written after each run; with more, each run's output goes to
// RUN_DIR/train.log, the terminal gets a line per start and end, and the results are written at
// most every 10 s and at the end.
int run_sweep(const Sweep& s, const std::string& again, const std::vector<size_t>& todo, int jobs) {
  // One sweep at a time in its folder (each run locks its own run folder too).
  const FolderLock sweep_lock(s.out_dir, "the sweep folder");
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: a blocking call returns, and the signal is seen
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A closed terminal: the runs (in process groups of their own) would not hear of it.
  sigaction(SIGHUP, &sa, nullptr);

  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double run_seconds = 0;  // of the runs this invocation trained to their end
  int trained = 0, failed = 0, diverged = 0, remaining = 0;  // remaining: not settled, running ones included
  for (size_t i : todo) remaining += !settled(s.run_dir(i));
  const size_t n = todo.size();
  // Mean run time over the runs trained so far, `jobs` at a time.
  auto eta = [&] { return trained ? run_seconds / trained * std::ceil(double(remaining) / jobs) : NAN; };
  std::vector<Child> running;
  int forwarded = 0;  // signals passed on to the running children
  const std::function<void()> forward = [&] {
    for (; forwarded < g_signals; ++forwarded)
      for (const Child& c : running) kill(c.pid, SIGINT);
  };
  size_t next = 0;
  double last_written = 0;  // when results were last written (since the start)
  for (;;) {
    // Start runs until `jobs` are running; none after a Ctrl-C.
    while (!g_signals && running.size() < size_t(jobs) && next < n) {
      const size_t k = next++, i = todo[k];
      const std::string dir = s.run_dir(i), name = s.runs[i].name;
      if (settled(dir)) {
        std::printf("[sweep] run %zu/%zu %s: %s before, skipped\n", k + 1, n, name.c_str(),
                    finished(dir) ? "finished" : "diverged");
        continue;
      }
      const bool resume = !latest_checkpoint(dir).empty();
      {
        const FolderLock run_lock(dir, "the run folder");  // not while someone else trains there
        // Started before but without a checkpoint to continue from: start again.
        if (!resume) {
          fs::remove(fs::path(dir) / "metrics.jsonl");
          fs::remove(fs::path(dir) / "config.yaml");
          fs::remove(fs::path(dir) / "train.log");
        }
        fs::remove(error_file(dir));
      }
      int log_fd = -1;
      if (jobs > 1) {
        const std::string log = (fs::path(dir) / "train.log").string();
        log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        LINATTN_REQUIRE(log_fd >= 0, "cannot write ", log, ": ", std::strerror(errno));
      }
      std::printf("[sweep] run %zu/%zu %s: %s | elapsed %s | ETA %s\n", k + 1, n, name.c_str(),
                  resume ? "resuming from its checkpoint" : "starting", duration(since_start()).c_str(),
                  duration(eta()).c_str());
      const std::vector<std::string> command = run_command(s, i, resume);
      std::printf("[sweep] %s\n", joined(command).c_str());
      running.push_back(start_child(command, log_fd));
      running.back().k = k;
      running.back().i = i;
    }
    if (running.empty()) break;
    forward();
    std::vector<pollfd> fds;
    for (const Child& c : running) fds.push_back({c.stderr_fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 200) <= 0) continue;  // a timeout or a signal: look at the signals again
    for (size_t r = running.size(); r-- > 0;) {
      if (!fds[r].revents || drain(running[r])) continue;
      // Its stderr closed: the run is ending.
      Child c = running[r];
      running.erase(running.begin() + long(r));
      const Outcome o = finish(c, forward);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
      const size_t k = c.k, i = c.i;
      const std::string dir = s.run_dir(i), name = s.runs[i].name;
      const bool interrupted = g_signals && o.status == 130;  // its Ctrl-C exit (or SIGINT's default)
      --remaining;
      if (!interrupted && o.status != 0 && o.stderr_tail.find("The model diverged") != std::string::npos) {
        write_text_atomically(diverged_file(dir), s.in_sweep_terms(o.stderr_tail, i));
        ++diverged;
        std::printf("[sweep] run %zu/%zu %s: diverged (a non-finite loss), kept as its outcome and not retried "
                    "(remove %s to train it again); going on\n", k + 1, n, name.c_str(), dir.c_str());
      } else if (!interrupted && (o.status != 0 || !finished(dir))) {
        fs::create_directories(dir);
        // Its error, with the sweep file's place of an override it names.
        write_text_atomically(error_file(dir), o.stderr_tail.empty() ? "exit status " + std::to_string(o.status)
                                                                      : s.in_sweep_terms(o.stderr_tail, i));
        ++failed;
        std::printf("[sweep] run %zu/%zu %s: FAILED (exit status %d); going on\n", k + 1, n, name.c_str(), o.status);
        if (jobs > 1) std::printf("%s\n(the whole output: %s/train.log)\n", o.stderr_tail.c_str(), dir.c_str());
      } else if (!interrupted) {
        ++trained;
        run_seconds += seconds;
        std::printf("[sweep] run %zu/%zu %s: done in %s, %s | %d left (%zu running) | elapsed %s | ETA %s\n", k + 1,
                    n, name.c_str(), duration(seconds).c_str(), final_result(dir).c_str(), remaining, running.size(),
                    duration(since_start()).c_str(), duration(eta()).c_str());
      } else {
        ++remaining;  // it continues from its checkpoint next time
        std::printf("[sweep] run %zu/%zu %s: stopped by %s\n", k + 1, n, name.c_str(), stopped_by());
      }
      // Reading every run folder takes a while in a large sweep: with several jobs, at most every 10 s.
      if (jobs == 1 || since_start() - last_written >= 10) {
        write_results(s);
        last_written = since_start();
      }
    }
  }
  write_results(s);
  if (g_signals) {
    std::printf("[sweep] interrupted after %s; %s left. Continue with: %s\n", duration(since_start()).c_str(),
                cli::counted(remaining, "run").c_str(), again.c_str());
    return 130;
  }
  std::printf("[sweep] done in %s: %d trained, %d failed%s; results in %s\n", duration(since_start()).c_str(), trained,
              failed, diverged ? (", " + std::to_string(diverged) + " diverged").c_str() : "",
              (fs::path(s.out_dir) / "results.md").string().c_str());
  return failed ? 1 : 0;
}

int run(const Args& a) {
  Sweep s = load_sweep(a.path, a.sets);
  if (!a.out.empty()) {
    LINATTN_REQUIRE(!fs::exists(a.out) || fs::is_directory(a.out), "--out ", a.out, " is a file: give the folder the "
                    "sweep's runs and results go to (one that does not exist yet is created)");
    s.out_dir = a.out;
  }
  // Before anything runs, and in a dry run too: each run would fail at its start.
  const std::string problem = folder_write_problem(s.out_dir);
  LINATTN_REQUIRE(problem.empty(), a.out.empty() ? a.path + ": out_dir '" : "--out '", s.out_dir,
                  "' cannot be written: ", problem, "; give another folder for the sweep's runs and results");
  check_only(s, a.only);
  std::vector<size_t> todo;
  for (size_t i = 0; i < s.runs.size(); ++i)
    if (a.only.empty() || std::count(a.only.begin(), a.only.end(), s.runs[i].name)) todo.push_back(i);
  std::printf("sweep %s: %s of %s into %s\n", a.path.c_str(), cli::counted((long long)s.runs.size(), "run").c_str(),
              s.base.c_str(), s.out_dir.c_str());
  if (a.dry_run) {
    list_runs(s, todo);
    return 0;
  }
  if (a.results_only) {
    const FolderLock sweep_lock(s.out_dir, "the sweep folder");
    write_results(s);
    std::printf("results in %s\n", (fs::path(s.out_dir) / "results.md").string().c_str());
    return 0;
  }
  return run_sweep(s, a.again, todo, a.jobs);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-sweep: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
