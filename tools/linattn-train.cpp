// linattn-train: trains the hybrid model a YAML config describes and reports validation perplexity.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace {

const char* kUsage = R"(usage: linattn-train CONFIG.yaml [--set section.key=value ...] [--out DIR] [--resume [CKPT.h5|latest]] [--dry-run]

Trains the language model CONFIG.yaml describes on its data, evaluating validation loss,
perplexity and bits per byte as it goes (README.md lists every config key and its default).

options:
  --set KEY=VALUE   override one config value, e.g. --set train.max_steps=100 --set model.attn.window_size=64
  --out DIR         where metrics.jsonl and the resolved config go (train.out_dir)
  --resume [CKPT]   continue from a checkpoint (default: the newest in the run folder's checkpoints/),
                    exactly: the losses are those the uninterrupted run would have printed
  --dry-run         validate the config, build the model, print its summary and memory budget, then exit
  -h, --help        this help

Data parallel: mpirun -np N linattn-train CONFIG.yaml (train.batch_size is the global batch).

Ctrl-C (or SIGTERM) finishes the current step, writes a checkpoint and exits; a second Ctrl-C exits
at once (the last complete checkpoint stays intact).
)";

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, out_dir, resume;
  std::vector<std::string> overrides;
  bool dry_run = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--set" && i + 1 < argc) {
      overrides.push_back(argv[++i]);
    } else if (a.rfind("--set=", 0) == 0) {
      overrides.push_back(a.substr(6));
    } else if (a == "--out" && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (a == "--resume") {
      resume = "latest";
      if (i + 1 < argc) {
        std::string next = argv[i + 1];
        if (next == "latest" || (next.size() > 3 && next.substr(next.size() - 3) == ".h5")) resume = argv[++i];
      }
    } else if (a == "--dry-run") {
      dry_run = true;
    } else if (a.rfind("--", 0) == 0 || !config_path.empty()) {
      std::fprintf(stderr, "linattn-train: unexpected argument '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    } else {
      config_path = a;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  // Under mpirun every rank runs this; rank 0 alone prints and writes.
  std::unique_ptr<linattn::Communicator> comm = linattn::make_communicator(&argc, &argv);
  try {
    if (!out_dir.empty()) overrides.push_back("train.out_dir=" + out_dir);
    linattn::Config config = linattn::load_config(config_path, overrides);
    linattn::Trainer trainer(config, resume, comm.get());
    if (dry_run) {
      if (!comm->is_root()) return 0;
      std::printf("memory: activations %.1f MiB per micro-batch (measured)\n",
                  double(trainer.measure_activation_bytes()) / (1024.0 * 1024.0));
      std::printf("dry run: the config is valid and the model runs\n");
      return 0;
    }
    linattn::install_interrupt_handlers();
    linattn::TrainSummary s = trainer.run();
    if (!comm->is_root()) return s.interrupted ? 130 : 0;
    std::printf("%s after %lld steps (%lld tokens, %.0f s)\n", s.interrupted ? "interrupted" : "done",
                (long long)s.steps, (long long)s.tokens, s.seconds);
    std::printf("validation: last loss %.4f, perplexity %.3f, bits per byte %.4f | best loss %.4f, perplexity %.3f, "
                "bits per byte %.4f\n",
                s.last.loss, s.last.perplexity, s.last.bits_per_byte, s.best.loss, s.best.perplexity,
                s.best.bits_per_byte);
    return s.interrupted ? 130 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-train: error%s: %s\n",
                 comm->world_size() > 1 ? (" on rank " + std::to_string(comm->rank())).c_str() : "",
                 linattn::error_message(e).c_str());
    if (comm->world_size() > 1) comm->abort(1);  // the other ranks must not wait for this one
    return 1;
  }
}
