// linattn-train: trains the hybrid model a YAML config describes and reports validation perplexity.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/runtime.h"
#include "tools/cli.h"
#include "train/device.h"
#include "train/init_from.h"
#include "train/memory_plan.h"
#include "train/shell_quote.h"
#include "train/signals.h"
#include "train/trainer.h"

namespace {

namespace cli = linattn::cli;

struct Args {
  std::string config_path, out_dir, resume, init_from;
  std::vector<std::string> overrides;
  bool dry_run = false, config_reference = false;
};

[[noreturn]] void usage_error(const std::string& message) { cli::usage_error("linattn-train", message, 2); }

bool is_yaml(const std::string& s) {
  for (const std::string tail : {".yaml", ".yml"})
    if (s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0) return true;
  return false;
}

// --resume RUN_DIR continues that run, in that folder, by default with its own config.
void resume_in_folder(Args& args) {
  namespace fs = std::filesystem;
  if (!args.out_dir.empty() && !(fs::exists(args.out_dir) && fs::equivalent(args.out_dir, args.resume)))
    usage_error("--resume " + args.resume + " continues the run in that folder, but --out names another ('" +
                args.out_dir + "'): drop --out");
  args.out_dir = args.resume;
  if (!args.config_path.empty()) return;
  args.config_path = (fs::path(args.resume) / "config.yaml").string();
  if (!fs::exists(args.config_path))
    usage_error("the run folder '" + args.resume + "' has no config.yaml: give the config, as in linattn-train "
                "CONFIG.yaml --resume " + args.resume);
}

Args parse_args(int argc, char** argv) {
  Args args;
  CLI::App app(
      "Trains the language model CONFIG.yaml describes on its data, evaluating validation loss,\n"
      "perplexity and bits per byte as it goes (README.md lists every config key and its default).\n\n"
      "  linattn-train CONFIG.yaml [options]\n"
      "  linattn-train --resume RUN_DIR [--set section.key=value ...]",
      "linattn-train");
  app.add_option("CONFIG.yaml", args.config_path, "the run's config (configs/*.yaml)");
  app.add_option("--set", args.overrides,
                 "override one config value, e.g. --set train.max_steps=100 --set model.attn.window_size=64")
      ->type_name("section.key=value")
      ->allow_extra_args(false);
  app.add_option("--out", args.out_dir,
                 "the run folder: config.yaml, metrics.jsonl and checkpoints/ go there (train.out_dir); a fresh run "
                 "refuses a folder that holds another run")
      ->type_name("DIR");
  CLI::Option* resume = app.add_option("--resume", args.resume,
                 "continue a run exactly (the losses are those the uninterrupted run would have printed) from the "
                 "newest intact checkpoint of the run folder RUN_DIR (default: the config's run folder), or from "
                 "the checkpoint CKPT.h5. With RUN_DIR and no CONFIG, the run's own config (RUN_DIR/config.yaml) "
                 "is used")
      ->type_name("[RUN_DIR|CKPT.h5]")
      ->expected(0, 1);
  app.add_option("--init-from", args.init_from,
                 "start from the weights in FILE (a linattn checkpoint or export .h5, or a safetensors file or folder "
                 "with fla's parameter names, docs/interop.md) with a fresh optimizer at step 0; every shape that "
                 "differs from the config's model is named, and nothing trains")
      ->type_name("FILE");
  app.add_flag("--dry-run", args.dry_run,
               "print the memory the run needs per rank (weights, bf16 copy, gradients, moments, activations: "
               "predicted without building the model at its size) and whether it fits the GPU; then, where the "
               "run can start here, validate the data, build the model, print its summary and the measured "
               "activation peak beside the prediction, and exit");
  app.add_flag("--config-reference", args.config_reference,
               "print every config key (default, values, meaning) as README.md's config reference, then exit");
  app.footer(
      "Data parallel: mpirun -np N linattn-train CONFIG.yaml (train.batch_size is the global batch).\n\n"
      "Ctrl-C (or SIGTERM) finishes the current step, writes a checkpoint, prints the command that\n"
      "continues the run and exits; a second Ctrl-C exits at once (the last complete checkpoint stays intact).");
  cli::parse(app, argc, argv, 2);
  if (args.config_reference) return args;
  if (resume->count() > 0 && args.resume.empty()) args.resume = "latest";  // --resume without its value
  // `--resume CONFIG.yaml`: the config, after a --resume without its value.
  if (is_yaml(args.resume)) {
    if (!args.config_path.empty())
      usage_error("a second config '" + args.resume + "' (the first is '" + args.config_path + "'); give one "
                  "CONFIG.yaml (a run folder to continue goes after --resume)");
    args.config_path = std::exchange(args.resume, "latest");
  }
  if (!args.resume.empty() && args.resume != "latest" && !std::filesystem::exists(args.resume))
    usage_error("--resume " + args.resume + ": no such run folder or checkpoint");
  if (args.resume != "latest" && std::filesystem::is_directory(args.resume)) resume_in_folder(args);
  if (args.config_path.empty()) usage_error("no config given: linattn-train CONFIG.yaml");
  if (!args.init_from.empty() && !args.resume.empty())
    usage_error("--init-from starts a new run from weights; --resume continues a run with its own: give one of them");
  return args;
}

// The command line that continues this run: this one without its --resume (and the value that
// --resume took), plus --resume RUN_DIR.
std::string resume_command(const std::vector<std::string>& argv, const std::string& resumed, const std::string& run_dir,
                           int world_size) {
  std::string cmd = world_size > 1 ? "mpirun -np " + std::to_string(world_size) + " " : "";
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].rfind("--resume=", 0) == 0) continue;
    if (argv[i] == "--resume") {
      if (i + 1 < argv.size() && argv[i + 1] == resumed) ++i;
      continue;
    }
    cmd += linattn::shell_quoted(argv[i]) + " ";
  }
  return cmd + "--resume " + linattn::shell_quoted(run_dir);
}

// Why --dry-run cannot build the model and run a step here (no GPU, or too little memory), or "".
std::string not_built_here(const linattn::Config& config, const linattn::MemoryPlan& plan) {
  const bool cuda = config.train.device == "cuda";
  if (cuda && linattn::cuda::device_count() == 0) return "train.device is cuda and there is no GPU";
  const double have = cuda ? double(linattn::cuda::device_info().total_bytes)
                           : double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  const double share = cuda ? linattn::gpu_usable_share : 0.8;
  if (plan.total() <= share * have) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "it needs %.1f GiB, more than %.0f%% of the %s's %.1f GiB",
                plan.total() / double(1 << 30), 100 * share, cuda ? "GPU" : "machine", have / double(1 << 30));
  return buf;
}

// "loss 2.3456, perplexity 10.447, bits per byte 1.2345" (bits per byte when the data has it).
std::string eval_text(const linattn::EvalResult& r) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "loss %.4f, perplexity %.3f", r.loss, r.perplexity);
  std::string out = buf;
  if (std::isfinite(r.bits_per_byte)) {
    std::snprintf(buf, sizeof buf, ", bits per byte %.4f", r.bits_per_byte);
    out += buf;
  }
  if (std::isfinite(r.recall_accuracy)) {
    std::snprintf(buf, sizeof buf, ", recall accuracy %.4f", r.recall_accuracy);
    out += buf;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any other thread starts, so that every thread inherits the blocked signals.
  linattn::take_interrupt_signals();
  // Before MPI sees argv (it may change it): the command that continues the run is printed from it.
  const std::vector<std::string> command(argv, argv + argc);
  Args args = parse_args(argc, argv);
  // README.md's config reference, printed from the key declarations (train/config_keys.cpp).
  if (args.config_reference) {
    std::fputs(linattn::config_reference_markdown().c_str(), stdout);
    return 0;
  }
  // Under mpirun every rank runs this; rank 0 alone prints and writes.
  std::unique_ptr<linattn::Communicator> comm = linattn::make_communicator(&argc, &argv);
  try {
    if (!args.out_dir.empty()) args.overrides.push_back("train.out_dir=" + args.out_dir);
    linattn::Config config = linattn::load_config(args.config_path, args.overrides);
    // --dry-run: the predicted memory first (it needs no GPU and builds nothing at the model's size).
    double predicted_activations = 0;
    if (args.dry_run) {
      linattn::check_run_folder(config.train, comm->is_root());  // at once, before the probes
      const linattn::MemoryPlan plan = linattn::plan_memory(config, comm->world_size());
      predicted_activations = plan.activations;
      if (comm->is_root()) std::fputs(linattn::describe(plan, config).c_str(), stdout);
      const std::string why_not = not_built_here(config, plan);
      if (!why_not.empty()) {
        if (comm->is_root()) std::printf("dry run: the config is valid; the model is not built here: %s\n", why_not.c_str());
        return 0;
      }
      std::fflush(stdout);
    }
    linattn::Trainer trainer(config, args.resume, comm.get());
    if (!args.init_from.empty()) {
      size_t n = linattn::init_from(args.init_from, trainer.model(), args.config_path);
      if (comm->is_root())
        std::printf("initialized from %s (%s); optimizer fresh, step 0\n", args.init_from.c_str(),
                    cli::counted((long long)n, "tensor").c_str());
    }
    if (args.dry_run) {
      const double measured = double(trainer.measure_activation_bytes());
      if (!comm->is_root()) return 0;
      std::printf("memory: activations %.1f MiB per micro-batch (measured; predicted %.1f MiB, %+.1f%%)\n",
                  measured / (1024.0 * 1024.0), predicted_activations / (1024.0 * 1024.0),
                  100.0 * (predicted_activations - measured) / measured);
      if (config.train.device == "cuda")
        std::printf("%s\n", linattn::device_memory_budget(linattn::Device::cuda).c_str());
      std::printf("dry run: the config is valid and the model runs\n");
      return 0;
    }
    linattn::arm_interrupts(comm->rank(), comm->world_size());
    linattn::TrainSummary s = trainer.run();
    if (!comm->is_root()) return s.interrupted ? 130 : 0;
    std::printf("%s after %s (%lld tokens, %.0f s)\n", s.interrupted ? "interrupted" : "done",
                cli::counted((long long)s.steps, "step").c_str(), (long long)s.tokens, s.seconds);
    // Only what was measured: an interrupted run may not have evaluated at all.
    if (s.last.tokens > 0)
      std::printf("validation: last %s%s\n", eval_text(s.last).c_str(),
                  std::isfinite(s.best.loss) ? (" | best " + eval_text(s.best)).c_str() : "");
    if (s.interrupted)
      std::printf("continue with: %s\n",
                  resume_command(command, args.resume, config.train.out_dir, comm->world_size()).c_str());
    return s.interrupted ? 130 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-train: error%s: %s\n",
                 comm->world_size() > 1 ? (" on rank " + std::to_string(comm->rank())).c_str() : "",
                 linattn::error_message(e).c_str());
    if (comm->world_size() > 1) comm->abort(1);  // the other ranks must not wait for this one
    return 1;
  }
}
