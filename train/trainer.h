// The training loop: AdamW with warmup and decay, gradient accumulation and clipping, validation
// loss / perplexity / bits per byte as it trains, progress lines and metrics.jsonl.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "layers/model.h"
#include "core/cuda/graph.h"
#include "train/checkpoint.h"
#include "train/communicator.h"
#include "train/config.h"
#include "train/folder_lock.h"
#include "train/evaluate.h"
#include "train/fault_injection.h"
#include "train/grad_buckets.h"
#include "train/metrics_log.h"
#include "train/mfu.h"
#include "train/optimizer.h"

namespace linattn {

struct TrainSummary {
  int64_t steps = 0;
  int64_t tokens = 0;
  double seconds = 0;
  EvalResult last, best;
  bool interrupted = false;
  std::vector<double> losses;  // training loss of every step taken
};

// Refuses a run folder (train.out_dir) that is a file or, where `writes` (rank 0), cannot be written,
// naming it and the way out; creates nothing.
void check_run_folder(const TrainConfig& t, bool writes);

class Trainer {
 public:
  // Opens the data, builds the model and checks that they fit each other (errors point at the
  // config line to fix). Prints the model summary and the memory budget. With `resume` (a
  // checkpoint path, or "latest" for the newest in the run folder) the weights, optimizer moments,
  // step and data position come from the checkpoint, so the run continues exactly.
  // `comm` spreads each global batch over data-parallel ranks (nullptr: a single process). With
  // train.device: cuda each rank takes GPU local_rank, and NCCL sums the gradients on the GPUs.
  explicit Trainer(const Config& config, const std::string& resume = "", Communicator* comm = nullptr);

  // One forward + backward on a zero batch: measures the activation memory, and proves the model runs.
  size_t measure_activation_bytes();
  TrainSummary run();

  const Model& model() const { return *model_; }
  Model& model() { return *model_; }

  // Observers of each training step (tests count what the host asks of the device between them):
  // `started` before the step's first operation, `optimizer_queued` once its update is queued and
  // before the host reads the step's numbers. Either may be empty.
  struct StepHooks {
    std::function<void(int64_t step)> started, optimizer_queued;
  };
  void set_step_hooks(StepHooks hooks) { step_hooks_ = std::move(hooks); }

 private:
  // One step: forward and backward over the micro-batches, the gradient sums across ranks, the
  // step's control numbers and the AdamW update, all queued without waiting for a GPU; then one
  // read of the control numbers gives the loss, the norm and whether the update was skipped (ok).
  void train_step(int64_t step, double lr, double& loss, double& norm, bool& ok);
  // The step's micro-batches from the loader, on device_ (queued uploads into staged_), with their
  // document segments: what changes from step to step reaches the device before the step's work.
  // Returns whether, on a GPU, the step may read them there unseen by the host
  // (backend::CheckedDeviceTokens: every target takes a loss); throws on an id outside the vocabulary.
  bool stage_batches();
  // With graphs and document_boundaries: reset, the micro-batches' sequence tables staged into
  // table_capacity_-sequence buffers that stay put (ops::Segments::stage); a step with more
  // documents grows them, to the next power of two, and drops the graph, which its step captures
  // anew.
  void stage_sequence_tables();
  // The step's work on the staged micro-batches, from zeroing the gradients to the queued AdamW
  // update; replayed as step_graph_ once captured (capture_step). Returns false when a micro-batch
  // met non-finite numbers on the host (the CPU's cross-entropy), which marks the step bad.
  // checked: stage_batches' answer (the device tokens are read), else the host's are.
  bool queue_step_work(int64_t step, bool checked);
  // Captures queue_step_work as step_graph_ and launches it; where the capture fails, says why,
  // turns the graphs off and queues the work as it is. Returns as queue_step_work.
  bool capture_step(int64_t step);
  // Sums control_'s loss and bad flag over the ranks (on the GPU with NCCL: queued).
  void sum_step_loss_across_ranks();
  // train.log_grad_norms: every parameter's gradient norm and its share of norm^2, the step's total.
  void log_grad_norms(int64_t done_steps, double norm) const;
  // With several ranks, every rank takes rank 0's decision on the bounds and its schedule progress,
  // and an interrupt on any rank stops all of them.
  void agree_across_ranks(bool& done, bool& interrupted, double& progress) const;
  // The steps since the last log line: their time and summed loss.
  struct LogWindow {
    double seconds = 0, loss = 0;
    int64_t steps = 0;
  };
  // The log line of step `done_steps` (1-based) over `window`, on stdout and in metrics.jsonl.
  void log_step(int64_t done_steps, const LogWindow& window, double lr, double norm, int64_t tokens,
                double elapsed, const MetricsLog* metrics) const;
  // Evaluates (data.val_tokens tokens, the whole split when `final`), prints the eval line and the
  // sample, writes metrics.jsonl, keeps the result in `summary`; returns the seconds it took.
  double report_eval(int64_t step, bool final, const MetricsLog* metrics, TrainSummary& summary);
  void save(const TrainState& state);
  // The checkpoint --resume names: the newest intact one of a run folder ("latest": the config's), or the file.
  std::string resume_checkpoint(const std::string& resume) const;
  void open_token_data();  // data.source tokens: the splits of data.path, checked against the config
  // This rank's validation batches, the first max_tokens tokens (0: all).
  std::unique_ptr<data::ValBatches> val_batches(int64_t max_tokens) const;
  // Locks the run folder and writes config.yaml into it; the metrics log on rank 0 (nullopt on the
  // others), cut back to the resumed checkpoint's step.
  std::optional<MetricsLog> open_run_folder();
  // A metrics record that could not be written stops the run, with a checkpoint of `state` where
  // there is room for one; throws the error that says so.
  [[noreturn]] void stop_for_metrics(const MetricsWriteError& e, const TrainState& state);
  // printf on rank 0 only.
  void say(const char* format, ...) const __attribute__((format(printf, 2, 3)));

  Config config_;
  DType dtype_;
  Device device_ = Device::cpu;  // train.device
  std::shared_ptr<const data::Dataset> train_data_, val_data_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<AdamW> optimizer_;
  Tensor control_;  // the step's control numbers (train/optimizer.h), on device_
  // The step's inputs and what its work writes besides the gradients, in memory that stays put, so
  // that a CUDA graph of the work replays onto each step's own: the micro-batches' tokens (on a
  // GPU uploaded into the same tensors each step), the backward seed, the micro-batches' losses.
  struct StagedBatch {
    Tensor inputs, targets;            // on device_
    Tensor host_inputs, host_targets;  // the loader's
    ops::Segments segments;
    Tensor table;  // with graphs: where segments' table is staged, on device_ (stage_sequence_tables)
  };
  std::vector<StagedBatch> staged_;
  Tensor seed_, losses_;
  double seed_value_ = 0;   // what seed_ holds
  bool graphs_ = false;     // train.cuda_graphs, on one GPU
  cuda::Graph step_graph_;  // the captured step work, once captured
  int64_t table_capacity_ = 0;  // the sequences each staged table holds (0: none made yet)
  StepHooks step_hooks_;
  std::unique_ptr<data::TrainBatches> loader_;
  Arena arena_;
  double gemm_peak_ = 0;  // GFLOP/s of a GEMM measured at start-up
  MfuPeak mfu_peak_;      // what MFU divides by (train/mfu.h)
  int64_t accumulation_ = 1;
  int64_t micro_ = 1;  // sequences per forward pass on this rank
  std::unique_ptr<FolderLock> folder_lock_;  // rank 0's: from a resume's choice of checkpoint to the end of run()
  std::unique_ptr<Communicator> single_;
  Communicator* comm_ = nullptr;
  // With train.device: cuda and more than one rank, NCCL over comm_: it sums the device gradients;
  // the host numbers (losses, bad-step flags, evaluation sums, agreement on stopping) go through comm_.
  std::unique_ptr<Communicator> gradient_comm_;
  std::unique_ptr<GradientBuckets> buckets_;  // with more than one rank
  TrainState start_;       // where the run starts: zeros, or the resumed checkpoint's state
  bool resumed_ = false;
  std::optional<InjectedFault> fault_;  // LINATTN_INJECT_FAULT's fault, on the rank it names only
  uint32_t eot_ = data::no_eot;  // the token data's end-of-text token (document boundaries reset)
};

}  // namespace linattn
