// linattn-train: trains the hybrid model a YAML config describes and reports validation perplexity.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "train/device.h"
#include "train/init_from.h"
#include "train/shell_quote.h"
#include "train/signals.h"
#include "train/trainer.h"

namespace {

const char* kUsage = R"(usage: linattn-train CONFIG.yaml [--set section.key=value ...] [--out DIR] [--resume [RUN_DIR|CKPT.h5]] [--init-from FILE] [--dry-run]
       linattn-train --resume RUN_DIR [--set section.key=value ...]

Trains the language model CONFIG.yaml describes on its data, evaluating validation loss,
perplexity and bits per byte as it goes (README.md lists every config key and its default).

options:
  --set KEY=VALUE   override one config value, e.g. --set train.max_steps=100 --set model.attn.window_size=64
  --out DIR         the run folder: config.yaml, metrics.jsonl and checkpoints/ go there (train.out_dir);
                    a fresh run refuses a folder that holds another run
  --resume [WHAT]   continue a run exactly (the losses are those the uninterrupted run would have
                    printed) from the newest intact checkpoint of the run folder RUN_DIR (default:
                    the config's run folder), or from the checkpoint CKPT.h5. With RUN_DIR and no
                    CONFIG, the run's own config (RUN_DIR/config.yaml) is used
  --init-from FILE  start from the weights in FILE (a linattn checkpoint or export .h5, or a safetensors
                    file or folder with fla's parameter names, docs/interop.md) with a fresh optimizer at
                    step 0; every shape that differs from the config's model is named, and nothing trains
  --dry-run         validate the config and the data, build the model, print its summary, the device
                    (train.device) and the memory budget on it, then exit
  -h, --help        this help

Data parallel: mpirun -np N linattn-train CONFIG.yaml (train.batch_size is the global batch).

Ctrl-C (or SIGTERM) finishes the current step, writes a checkpoint, prints the command that
continues the run and exits; a second Ctrl-C exits at once (the last complete checkpoint stays intact).
)";

struct Args {
  std::string config_path, out_dir, resume, init_from;
  std::vector<std::string> overrides;
  bool dry_run = false;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "linattn-train: %s\n\n%s", message.c_str(), kUsage);
  std::exit(2);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// An --resume in argv[i] with its optional value: a run folder, a checkpoint or "latest", not an
// option or the config. Returns how many arguments it takes.
int resume_option_length(const std::vector<std::string>& argv, size_t i) {
  if (argv[i] != "--resume") return 0;
  const bool has_value = i + 1 < argv.size() && argv[i + 1][0] != '-' && !ends_with(argv[i + 1], ".yaml") &&
                         !ends_with(argv[i + 1], ".yml");
  return has_value ? 2 : 1;
}

Args parse_args(int argc, char** argv) {
  const std::vector<std::string> all(argv, argv + argc);
  Args args;
  // The value of option argv[i], which must be there.
  auto value = [&](int& i, const char* example) -> std::string {
    std::string option = argv[i];
    if (i + 1 >= argc || argv[i + 1][0] == '-') usage_error(option + " needs a value: " + example);
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else if (a == "--set") {
      args.overrides.push_back(value(i, "--set section.key=value, e.g. --set train.max_steps=100"));
    } else if (a.rfind("--set=", 0) == 0) {
      args.overrides.push_back(a.substr(6));
    } else if (a == "--out") {
      args.out_dir = value(i, "--out DIR, the run folder");
    } else if (int n = resume_option_length(all, size_t(i))) {
      args.resume = n == 2 ? argv[++i] : "latest";
    } else if (a == "--init-from") {
      args.init_from = value(i, "--init-from FILE, a .h5 or safetensors file (or a folder with model.safetensors)");
    } else if (a == "--dry-run") {
      args.dry_run = true;
    } else if (a.rfind("-", 0) == 0) {
      usage_error("unknown option '" + a + "'");
    } else if (!args.config_path.empty()) {
      usage_error("a second config '" + a + "' (the first is '" + args.config_path +
                  "'); give one CONFIG.yaml (a run folder to continue goes after --resume)");
    } else {
      args.config_path = a;
    }
  }
  if (!args.resume.empty() && args.resume != "latest" && !std::filesystem::exists(args.resume))
    usage_error("--resume " + args.resume + ": no such run folder or checkpoint");
  if (args.resume != "latest" && std::filesystem::is_directory(args.resume)) {
    // --resume RUN_DIR continues that run, in that folder, by default with its own config.
    namespace fs = std::filesystem;
    if (!args.out_dir.empty() && !(fs::exists(args.out_dir) && fs::equivalent(args.out_dir, args.resume)))
      usage_error("--resume " + args.resume + " continues the run in that folder, but --out names another ('" +
                  args.out_dir + "'): drop --out");
    args.out_dir = args.resume;
    if (args.config_path.empty()) {
      args.config_path = (fs::path(args.resume) / "config.yaml").string();
      if (!fs::exists(args.config_path))
        usage_error("the run folder '" + args.resume + "' has no config.yaml: give the config, as in linattn-train "
                    "CONFIG.yaml --resume " + args.resume);
    }
  }
  if (args.config_path.empty()) usage_error("no config given");
  if (!args.init_from.empty() && !args.resume.empty())
    usage_error("--init-from starts a new run from weights; --resume continues a run with its own: give one of them");
  return args;
}

// The command line that continues this run: this one without its --resume, plus --resume RUN_DIR.
std::string resume_command(const std::vector<std::string>& argv, const std::string& run_dir, int world_size) {
  std::string cmd = world_size > 1 ? "mpirun -np " + std::to_string(world_size) + " " : "";
  for (size_t i = 0; i < argv.size(); ++i) {
    if (int n = resume_option_length(argv, i)) i += size_t(n - 1);
    else cmd += linattn::shell_quoted(argv[i]) + " ";
  }
  return cmd + "--resume " + linattn::shell_quoted(run_dir);
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
  // README.md's config reference, printed from the key declarations (train/config_keys.cpp).
  if (argc == 2 && std::string(argv[1]) == "--config-reference") {
    std::fputs(linattn::config_reference_markdown().c_str(), stdout);
    return 0;
  }
  Args args = parse_args(argc, argv);
  // Under mpirun every rank runs this; rank 0 alone prints and writes.
  std::unique_ptr<linattn::Communicator> comm = linattn::make_communicator(&argc, &argv);
  try {
    if (!args.out_dir.empty()) args.overrides.push_back("train.out_dir=" + args.out_dir);
    linattn::Config config = linattn::load_config(args.config_path, args.overrides);
    linattn::Trainer trainer(config, args.resume, comm.get());
    if (!args.init_from.empty()) {
      size_t n = linattn::init_from(args.init_from, trainer.model(), args.config_path);
      if (comm->is_root()) std::printf("initialized from %s (%zu tensors); optimizer fresh, step 0\n", args.init_from.c_str(), n);
    }
    if (args.dry_run) {
      if (!comm->is_root()) return 0;
      std::printf("memory: activations %.1f MiB per micro-batch (measured)\n",
                  double(trainer.measure_activation_bytes()) / (1024.0 * 1024.0));
      if (config.train.device == "cuda")
        std::printf("%s\n", linattn::device_memory_budget(linattn::Device::cuda).c_str());
      std::printf("dry run: the config is valid and the model runs\n");
      return 0;
    }
    linattn::arm_interrupts();
    linattn::TrainSummary s = trainer.run();
    if (!comm->is_root()) return s.interrupted ? 130 : 0;
    std::printf("%s after %lld steps (%lld tokens, %.0f s)\n", s.interrupted ? "interrupted" : "done",
                (long long)s.steps, (long long)s.tokens, s.seconds);
    // Only what was measured: an interrupted run may not have evaluated at all.
    if (s.last.tokens > 0)
      std::printf("validation: last %s%s\n", eval_text(s.last).c_str(),
                  std::isfinite(s.best.loss) ? (" | best " + eval_text(s.best)).c_str() : "");
    if (s.interrupted)
      std::printf("continue with: %s\n", resume_command(command, config.train.out_dir, comm->world_size()).c_str());
    return s.interrupted ? 130 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-train: error%s: %s\n",
                 comm->world_size() > 1 ? (" on rank " + std::to_string(comm->rank())).c_str() : "",
                 linattn::error_message(e).c_str());
    if (comm->world_size() > 1) comm->abort(1);  // the other ranks must not wait for this one
    return 1;
  }
}
