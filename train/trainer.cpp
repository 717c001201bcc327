#include "train/trainer.h"

#include <omp.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdarg>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "core/cuda/runtime.h"
#include "core/hdf5.h"
#include "data/mqar.h"
#include "kernels/backend.h"
#include "train/device.h"
#include "train/evaluate.h"
#include "train/memory_plan.h"
#include "train/metrics_log.h"
#include "train/mfu.h"
#include "train/sample.h"
#include "train/schedule.h"
#include "train/shell_quote.h"
#include "train/signals.h"

namespace linattn {

namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

std::string duration(double seconds) {
  char buf[32];
  int s = int(std::max(0.0, seconds));
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ds", s);
  return buf;
}

// The run line's bounds: "max_steps 573, max_time 10m00s".
std::string run_bounds(const TrainConfig& t) {
  std::string bounds;
  auto bound = [&](const std::string& b) { bounds += (bounds.empty() ? "" : ", ") + b; };
  if (t.max_steps) bound("max_steps " + std::to_string(t.max_steps));
  if (t.max_tokens) bound("max_tokens " + std::to_string(t.max_tokens));
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, "%gs", t.max_time);  // duration() rounds to whole seconds
  if (t.max_time) bound("max_time " + (t.max_time == std::floor(t.max_time) ? duration(t.max_time) : fraction));
  return bounds.empty() ? "no bound (Ctrl-C stops it with a checkpoint)" : bounds;
}

// Where each rank runs, "host1 (rank 0), host2 (ranks 1-3, 5)": hosts in the order of their first
// rank, so that a message naming a host (a lost MPI daemon) names its ranks too.
std::string rank_layout(const std::vector<std::string>& hosts) {
  std::vector<std::pair<std::string, std::vector<int>>> by_host;
  for (int r = 0; r < int(hosts.size()); ++r) {
    auto it = std::find_if(by_host.begin(), by_host.end(), [&](const auto& h) { return h.first == hosts[size_t(r)]; });
    if (it == by_host.end()) it = by_host.insert(by_host.end(), {hosts[size_t(r)], {}});
    it->second.push_back(r);
  }
  std::string out;
  for (const auto& [host, ranks] : by_host) {
    std::string list;
    for (size_t i = 0, j = 0; i < ranks.size(); i = j + 1) {
      for (j = i; j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1;) ++j;
      if (!list.empty()) list += ", ";
      list += std::to_string(ranks[i]);
      if (j > i) list.append("-").append(std::to_string(ranks[j]));
    }
    out += (out.empty() ? "" : ", ") + host + (ranks.size() == 1 ? " (rank " : " (ranks ") + list + ")";
  }
  return out;
}

// When a checkpoint of about `needed` bytes did not fit at `path`: the room it lacked and what to do
// ("" when there was room, so that the failure had another cause). The space is measured after the
// partial file was removed.
std::string checkpoint_room(const std::string& path, double needed) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  rlimit limit{};
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && double(limit.rlim_cur) < needed)
    return "the checkpoint needs about " + mib(needed) + ", over this process's file size limit of " +
           mib(double(limit.rlim_cur)) + " (ulimit -f): raise the limit";
  struct statvfs st{};
  if (::statvfs(dir.c_str(), &st) != 0) return "";
  const double free_bytes = double(st.f_bavail) * double(st.f_frsize);
  if (free_bytes >= needed) return "";
  return "the checkpoint needs about " + mib(needed) + " and " + mib(free_bytes) + " are free in '" + dir +
         "': free at least " + mib(needed - free_bytes) + " there (the run deletes older checkpoints, beyond "
         "checkpoint.keep_last, only after a new one is written)";
}

// A fresh run must not write into the folder of another: its metrics would mix, and pruning by
// step number would delete checkpoints of either run.
void refuse_existing_run(const std::string& out_dir) {
  namespace fs = std::filesystem;
  const fs::path metrics = fs::path(out_dir) / "metrics.jsonl";
  const std::string checkpoint = latest_checkpoint(out_dir);
  const bool has_metrics = fs::exists(metrics) && fs::file_size(metrics) > 0;
  LINATTN_REQUIRE(checkpoint.empty() && !has_metrics, "the run folder '", out_dir, "' already holds a run (",
                  checkpoint.empty() ? metrics.string() : checkpoint,
                  "): continue it with --resume ", out_dir, ", or start a new run in another folder with --out DIR "
                  "(or delete this one)");
}

// NCCL over `host`, which sums the gradients of a GPU run across its ranks; its errors (a build
// without NCCL, ranks without a GPU each) stop the run at start-up, pointing at train.device.
std::unique_ptr<Communicator> nccl_for_gradients(const Config& config, Communicator& host) {
  try {
    return make_nccl_communicator(host);
  } catch (const Error& e) {
    throw Error(config.where("train.device") + ": train.device is cuda with " + std::to_string(host.world_size()) +
                " ranks, which sum their gradients with NCCL: " + e.what());
  }
}

}  // namespace

void Trainer::say(const char* format, ...) const {
  if (!comm_->is_root()) return;
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
}

std::string Trainer::resume_checkpoint(const std::string& resume) const {
  const std::string run_dir = resume == "latest" ? config_.train.out_dir : resume;
  if (!std::filesystem::is_directory(run_dir)) return resume;
  std::vector<std::string> skipped;
  std::string path = latest_verified_checkpoint(run_dir, &skipped);
  for (const std::string& s : skipped) say("warning: --resume: skipping the damaged checkpoint %s\n", s.c_str());
  LINATTN_REQUIRE(!path.empty(), "--resume: no ", skipped.empty() ? "" : "intact ", "checkpoint in '", run_dir,
                  "/checkpoints'; train without --resume first, or give a checkpoint's path");
  return path;
}

void check_run_folder(const TrainConfig& t, bool writes) {
  LINATTN_REQUIRE(!std::filesystem::exists(t.out_dir) || std::filesystem::is_directory(t.out_dir), "the run folder '",
                  t.out_dir, "' is a file: give a folder with --out DIR (or train.out_dir); one that does not exist "
                  "is created");
  if (!writes) return;
  const std::string problem = folder_write_problem(t.out_dir);
  LINATTN_REQUIRE(problem.empty(), "the run folder '", t.out_dir, "' cannot be written: ", problem,
                  "; give another folder with --out DIR (or train.out_dir)");
}

Trainer::Trainer(const Config& config, const std::string& resume, Communicator* comm) : config_(config), comm_(comm) {
  if (!comm_) {
    single_ = make_single_communicator();
    comm_ = single_.get();
  }
  const TrainConfig& t = config_.train;
  const int64_t world = comm_->world_size();
  comm_->check_same(config_.text, "config");
  // Before the data and the model: a run folder that cannot be written would fail only at its first
  // record. Rank 0 alone writes there.
  check_run_folder(t, comm_->is_root());
  if (t.threads > 0) omp_set_num_threads(int(t.threads));
  // Ranks sharing a machine share its cores.
  else if (comm_->local_size() > 1) omp_set_num_threads(std::max(1, omp_get_num_procs() / comm_->local_size()));
  LINATTN_REQUIRE(t.batch_size % world == 0, config_.where("train.batch_size"), ": batch_size ", t.batch_size,
                  " (the global batch) must be divisible by the number of ranks, ", world);
  micro_ = t.micro_batch_size ? t.micro_batch_size : t.batch_size / world;
  LINATTN_REQUIRE((t.batch_size / world) % micro_ == 0, config_.where("train.micro_batch_size"),
                  ": each of the ", world, " ranks gets ", t.batch_size / world,
                  " sequences of the global batch, which is not a multiple of micro_batch_size ", micro_);
  // A test's fault on one rank (train/fault_injection.h): every rank checks it, that rank keeps it.
  fault_ = injected_fault_from_env();
  if (fault_) {
    LINATTN_REQUIRE(fault_->rank < world, "LINATTN_INJECT_FAULT names rank ", fault_->rank, ", but the run has ",
                    world, world == 1 ? " rank" : " ranks");
    say("warning: LINATTN_INJECT_FAULT: %s, as asked\n", describe(*fault_).c_str());
    if (fault_->rank != comm_->rank()) fault_.reset();
  }
  dtype_ = t.dtype == "f64" ? DType::f64 : DType::f32;
  device_ = training_device(config_);
  if (device_ == Device::cuda) {
    // Before anything touches a GPU: each rank of a host on its own.
    select_rank_gpu(*comm_);
    if (world > 1) gradient_comm_ = nccl_for_gradients(config_, *comm_);
  }
  if (device_ == Device::cpu && t.precision == "bf16") {
    const std::string why = backend::cpu_bf16_unavailable();
    if (!why.empty())
      say("note: %s: train.precision is bf16, but %s: the bf16 products widen their operands to float32 (the same "
          "sums, slower); train.precision: fp32 is faster here\n", config_.where("train.precision").c_str(),
          why.c_str());
  }
  backend::set_matmul_precision(t.precision == "bf16" ? MatmulPrecision::bf16
                                 : t.tf32                  ? MatmulPrecision::tf32
                                                           : MatmulPrecision::f32);

  // A resume locks its run folder before it picks a checkpoint there: a run still training in it
  // would otherwise rotate that checkpoint away under it (and is refused, naming its PID).
  if (!resume.empty() && comm_->is_root() && std::filesystem::is_directory(t.out_dir))
    folder_lock_ = std::make_unique<FolderLock>(t.out_dir, "the run folder");
  const std::string resume_path = resume.empty() ? "" : resume_checkpoint(resume);
  if (!resume_path.empty()) keep_checkpoint_defaults(config_, resume_path);
  const ModelConfig& m = config_.model;
  if (config_.data.source == "tokens") open_token_data();

  accumulation_ = t.batch_size / world / micro_;
  model_ = std::make_unique<Model>(m, dtype_);
  model_->params().initialize(t.seed);
  model_->set_recompute(t.recompute);
  // On a GPU the parameters, gradients, AdamW moments and activations live there; the host sees
  // them at checkpoints, evaluations and log lines.
  check_model_on_device(config_, *model_, device_);
  model_->params().to(device_);
  if (t.precision == "bf16") model_->params().keep_bf16_copy();  // written before the first step
  arena_ = Arena(device_);
  optimizer_ = std::make_unique<AdamW>(model_->params(), t);
  control_ = make_step_control(device_);
  staged_.resize(size_t(accumulation_));
  seed_ = Tensor::zeros({1}, dtype_, device_);
  losses_ = Tensor::zeros({accumulation_}, dtype_, device_);
  // A graph replays fixed shapes, so the sequence tables of document_boundaries: reset are padded to
  // one size (stage_sequence_tables); the gradient sums of several ranks run on a second stream.
  graphs_ = device_ == Device::cuda && t.cuda_graphs && world == 1;
  data::LoaderOptions lo;
  lo.batch_size = micro_;
  lo.seq_len = config_.data.seq_len;
  lo.seed = t.seed + 1;
  lo.rank = comm_->rank();
  lo.world_size = int(world);
  if (config_.data.source == "mqar") loader_ = std::make_unique<data::MqarTrainLoader>(config_.data.mqar, lo);
  else loader_ = std::make_unique<data::TrainLoader>(train_data_, lo);
  start_.best_val_loss = NAN;
  if (resume.empty()) {
    refuse_existing_run(t.out_dir);
  } else {
    const std::string& path = resume_path;
    std::vector<std::string> warnings;
    load_checkpoint(path, config_, *model_, optimizer_.get(), &start_, &warnings);
    loader_->restore(start_.sampler);
    resumed_ = true;
    say("resumed from %s at step %lld (%lld tokens)\n", path.c_str(), (long long)start_.step,
        (long long)start_.tokens);
    for (const std::string& w : warnings) say("warning: the training settings changed since the checkpoint: %s\n", w.c_str());
  }
  if (world > 1)
    buckets_ = std::make_unique<GradientBuckets>(model_->params(),
                                                 int64_t(config_.distributed.bucket_mb * 1024 * 1024),
                                                 gradient_comm_ ? *gradient_comm_ : *comm_);
  gemm_peak_ = measure_gemm_gflops(device_);
  mfu_peak_ = mfu_peak(device_, device_ == Device::cuda ? cuda::device_info().name : "", backend::matmul_precision(),
                       gemm_peak_);

  say("%s\n", model_->summary().c_str());
  const double pbytes = double(model_->params().layout().total() * int64_t(dtype_size(dtype_)));
  say("device: %s\n", describe_device(device_).c_str());
  if (device_ == Device::cuda)
    say("cuda graphs: %s\n", graphs_ ? "on: the step's work is captured at the second step and replayed"
                             : !t.cuda_graphs ? "off (train.cuda_graphs: false)"
                                              : "off: not yet with several ranks");
  const Parameters& params = model_->params();
  say("memory: parameters %s, gradients %s, AdamW moments %s%s%s (on %s)\n", mib(pbytes).c_str(), mib(pbytes).c_str(),
      mib(2 * pbytes).c_str(), params.has_bf16_copy() ? ", bf16 weight copy " : "",
      params.has_bf16_copy() ? mib(double(params.bf16_values().all().nbytes())).c_str() : "", device_name(device_));
  if (train_data_)
    say("data: %s: %llu training tokens, %llu validation tokens, tokenizer %s (vocab %u), document boundaries %s\n",
        config_.data.path.c_str(), (unsigned long long)train_data_->num_tokens(),
        (unsigned long long)val_data_->num_tokens(), train_data_->tokenizer().c_str(), train_data_->vocab_size(),
        document_boundaries_name(config_.data.document_boundaries));
  else
    say("data: MQAR (docs/mqar.md): vocabulary %lld, %lld key-value pairs, power_a %g, %llu training and %llu "
        "validation examples, seed %llu\n", (long long)config_.data.mqar.vocab_size,
        (long long)config_.data.mqar.num_kv_pairs, config_.data.mqar.power_a,
        (unsigned long long)config_.data.mqar.num_train_examples,
        (unsigned long long)config_.data.mqar.num_val_examples, (unsigned long long)config_.data.mqar.seed);
  const int ranks = comm_->world_size();
  say("train: batch %lld x %lld tokens (%d rank%s (%s) x micro-batch %lld x %lld accumulation step%s), %d thread%s "
      "per rank, %s, products %s, recompute %s, GEMM peak here %.0f GFLOP/s, MFU against %s\n",
      (long long)t.batch_size, (long long)config_.data.seq_len, ranks, ranks == 1 ? "" : "s", comm_->backend(),
      (long long)micro_, (long long)accumulation_, accumulation_ == 1 ? "" : "s", omp_get_max_threads(),
      omp_get_max_threads() == 1 ? "" : "s", t.dtype.c_str(), matmul_precision_name(backend::matmul_precision()),
      ops::recompute_name(t.recompute), gemm_peak_, mfu_peak_.text.c_str());
  if (ranks > 1) {
    const std::vector<std::string> hosts = comm_->host_names();  // every rank takes part
    const size_t distinct = std::set<std::string>(hosts.begin(), hosts.end()).size();
    if (!hosts.empty())
      say("data parallel: %d ranks on %zu host%s: %s\n", ranks, distinct, distinct == 1 ? "" : "s",
          rank_layout(hosts).c_str());
  }
  if (buckets_)
    say("data parallel: %zu gradient buckets of about %g MiB, each all-reduced (%s) as soon as backward completes "
        "it\n", buckets_->buckets().size(), config_.distributed.bucket_mb,
        (gradient_comm_ ? gradient_comm_.get() : comm_)->backend());
  std::fflush(stdout);
}

void Trainer::open_token_data() {
  const std::string& dir = config_.data.path;
  LINATTN_REQUIRE(std::filesystem::is_directory(dir), config_.where("data.path"), ": data folder '", dir,
                "' does not exist. Prepare it with `linattn-data prepare TEXT... --out ", dir,
                "` (./scripts/train prepares the default corpus)");
  train_data_ = data::Dataset::open(dir, "train");
  val_data_ = data::Dataset::open(dir, "val");
  LINATTN_REQUIRE(val_data_->describe_tokenizer() == train_data_->describe_tokenizer() &&
                      val_data_->vocab_size() == train_data_->vocab_size(),
                  dir, ": the validation shards were prepared with ", val_data_->describe_tokenizer(), " (vocabulary ",
                  val_data_->vocab_size(), "), the training shards with ", train_data_->describe_tokenizer(),
                  " (vocabulary ", train_data_->vocab_size(), "); prepare both splits with one tokenizer");
  eot_ = train_data_->eot();
  // reset is the default: on shards that record no end-of-text token there is nothing to cut at.
  if (eot_ == data::no_eot && !config_.locations.count("data.document_boundaries"))
    config_ = with_settings(config_, {"data.document_boundaries=cross"});
  LINATTN_REQUIRE(config_.data.document_boundaries == DocumentBoundaries::cross || eot_ != data::no_eot,
                  config_.where("data.document_boundaries"), ": reset needs the end-of-text token that separates "
                  "documents, and the shards of ", dir, " record none: prepare the data with linattn-data prepare, "
                  "or set data.document_boundaries: cross");
  const ModelConfig& m = config_.model;
  LINATTN_REQUIRE(int64_t(train_data_->vocab_size()) <= m.vocab_size, config_.where("model.vocab_size"),
                ": vocab_size ", m.vocab_size, " is smaller than the data's vocabulary (", train_data_->vocab_size(),
                " tokens, tokenizer '", train_data_->tokenizer(), "'): set model.vocab_size to at least ",
                train_data_->vocab_size());
  for (const auto& [split, data] : {std::pair{"training", train_data_}, {"validation", val_data_}})
    LINATTN_REQUIRE(data->num_tokens() >= uint64_t(config_.data.seq_len) + 1, config_.where("data.seq_len"), ": the ",
                    split, " split (", data->shards().front().info().path, data->shards().size() > 1 ? " and more" : "",
                    ") has only ", data->num_tokens(), " tokens, fewer than one sequence of data.seq_len + 1 = ",
                    config_.data.seq_len + 1, ": lower data.seq_len to at most ", int64_t(data->num_tokens()) - 1,
                    ", or prepare the data with a larger ", split, " split");
}

size_t Trainer::measure_activation_bytes() {
  // Before the first forward: the weights are final now (initialized, resumed or --init-from).
  refresh_bf16_weights(model_->params());
  return activation_peaks(*model_, arena_, micro_, config_.data.seq_len).high_water;
}

std::unique_ptr<data::ValBatches> Trainer::val_batches(int64_t max_tokens) const {
  data::LoaderOptions lo;
  lo.batch_size = micro_;
  lo.seq_len = config_.data.seq_len;
  lo.rank = comm_->rank();
  lo.world_size = comm_->world_size();
  lo.max_tokens = uint64_t(max_tokens);
  if (config_.data.source == "mqar") return std::make_unique<data::MqarValLoader>(config_.data.mqar, lo);
  return std::make_unique<data::ValLoader>(val_data_, lo);
}

void Trainer::train_step(int64_t step, double lr, double& loss, double& norm, bool& ok) {
  if (step_hooks_.started) step_hooks_.started(step);
  // Each micro-batch's loss is a mean over its tokens; seeding backward with 1 / (accumulation * ranks)
  // makes the gradients, summed over the micro-batches and the ranks, those of the mean over the
  // global batch.
  const int64_t world = comm_->world_size();
  const bool injected = fault_ && fault_->step == step + 1;
  if (injected && fault_->kind == InjectedFault::Kind::error)
    throw Error("LINATTN_INJECT_FAULT: the injected error of step " + std::to_string(step + 1));
  // What changes from one step to the next reaches the device first (queued uploads): the tokens,
  // the seed (an injected NaN makes every gradient of this rank NaN; the sums carry it to every
  // rank) and AdamW's step numbers.
  const bool checked = stage_batches();
  const double seed = injected ? NAN : 1.0 / double(accumulation_ * world);
  if (!(seed == seed_value_)) {  // NaN included
    seed_.fill_(seed);
    seed_value_ = seed;
  }
  optimizer_->schedule(lr, control_);
  // The step's work: replayed, captured at the run's second step, or queued op by op. The step of
  // an injected fault runs op by op (its NaN is not the graph's), and so does one whose targets the
  // graph's loss would not count alike (some take no loss).
  const bool replayable = graphs_ && checked && !injected;
  if (replayable && !step_graph_.empty()) {
    step_graph_.launch();
    ok = true;
  } else if (replayable && step > start_.step) {
    ok = capture_step(step);
  } else {
    ok = queue_step_work(step, checked);
  }
  if (step_hooks_.optimizer_queued) step_hooks_.optimizer_queued(step);

  // The step's one read: its control numbers.
  const Tensor host = device_ == Device::cpu ? control_ : control_.to(Device::cpu);
  const double* c = host.data<double>();
  loss = c[step_control::loss] / double(world);
  norm = c[step_control::norm];
  const bool bad = c[step_control::bad] != 0, skip = c[step_control::skip] != 0;
  const int64_t done_steps = step + 1;
  if (config_.train.log_grad_norms && (done_steps % config_.train.log_every == 0 || done_steps == 1))
    log_grad_norms(done_steps, norm);  // AdamW leaves the gradients as they are
  // (on the CPU a non-finite loss was a NonFiniteError, reported by the rank that met it)
  if (ok && bad && device_ != Device::cpu)
    say("warning: step %lld: the loss is %g; skipping the step\n", (long long)done_steps, loss);
  else if (!bad && !std::isfinite(norm))
    say("warning: step %lld: the gradient norm is %g; skipping the step\n", (long long)done_steps, norm);
  ok = !skip;
  if (skip) optimizer_->skipped();
}

bool Trainer::stage_batches() {
  bool checked = device_ == Device::cuda;
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    data::Batch batch = loader_->next();
    StagedBatch& s = staged_[size_t(micro)];
    // (with graphs the tables are staged below, into buffers that stay put)
    s.segments = document_segments(batch.inputs, config_.data.document_boundaries, eot_,
                                   graphs_ ? Device::cpu : device_);
    s.host_inputs = batch.inputs;
    s.host_targets = batch.targets;
    if (device_ == Device::cpu) continue;
    // Checked here, so that the step's work reads them on the device without a look from the host
    // (backend::CheckedDeviceTokens): a target that takes no loss (MQAR's) leaves that to the step.
    const int64_t vocab = config_.model.vocab_size;
    check_token_ids(batch.inputs.data<int32_t>(), batch.inputs.numel(), vocab, "the training batch's inputs");
    const int32_t* t = batch.targets.data<int32_t>();
    for (int64_t i = 0; i < batch.targets.numel() && checked; ++i) checked = t[i] >= 0 && t[i] < vocab;
    // Uploaded into the step's token buffers, which every step's work reads at the same addresses
    // (made at the first step; the loader's batches keep their shape).
    if (!s.inputs.defined()) {
      s.inputs = Tensor::empty(batch.inputs.shape(), DType::i32, device_);
      s.targets = Tensor::empty(batch.targets.shape(), DType::i32, device_);
    }
    LINATTN_CHECK(s.inputs.shape() == batch.inputs.shape() && s.targets.shape() == batch.targets.shape(),
                  "the training batches changed shape: ", batch.inputs.str(), " after ", s.inputs.str());
    cuda::upload_pageable(s.inputs.raw(), batch.inputs.raw(), s.inputs.nbytes());
    cuda::upload_pageable(s.targets.raw(), batch.targets.raw(), s.targets.nbytes());
  }
  stage_sequence_tables();
  return checked;
}

void Trainer::stage_sequence_tables() {
  if (!graphs_ || config_.data.document_boundaries != DocumentBoundaries::reset) return;
  int64_t documents = 0;
  for (const StagedBatch& s : staged_) documents = std::max(documents, int64_t(s.segments.offsets.size()) - 1);
  if (documents > table_capacity_) {
    const int64_t capacity = int64_t(std::bit_ceil(uint64_t(documents)));
    if (!step_graph_.empty())
      say("cuda graphs: a micro-batch of %lld documents exceeds the %lld the captured step's sequence tables "
          "hold; this step is captured anew with room for %lld\n", (long long)documents,
          (long long)table_capacity_, (long long)capacity);
    step_graph_ = cuda::Graph();  // it reads the tables that go now
    table_capacity_ = capacity;
    for (StagedBatch& s : staged_) s.table = Tensor::empty({table_capacity_ + 1}, DType::i32, device_);
  }
  for (StagedBatch& s : staged_) LINATTN_CHECK(s.segments.stage(s.table), "a staged table is too small");
}

bool Trainer::queue_step_work(int64_t step, bool checked) {
  // The staged tokens on the device, where the host checked them; else the host's (copied over in the step).
  const std::optional<backend::CheckedDeviceTokens> on_device =
      checked ? std::make_optional<backend::CheckedDeviceTokens>() : std::nullopt;
  Parameters& params = model_->params();
  params.zero_grad();
  bool ok = true;
  // The micro-batches' losses stay on the device; with the gradient norm and the skip decision they
  // reach the host in one copy, after the update is queued: the host never waits in the middle of a
  // step. (On the CPU the cross-entropy throws on a non-finite loss; on a GPU the loss carries it.)
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    const StagedBatch& batch = staged_[size_t(micro)];
    try {
      ArenaScope scope(arena_);
      // seed_ is the loss's gradient: the head's backward runs in the forward pass
      Variable l = checked ? model_->loss(batch.inputs, batch.targets, batch.segments, ops::kLossChunkBytes, seed_)
                           : model_->loss(batch.host_inputs, batch.host_targets, batch.segments,
                                          ops::kLossChunkBytes, seed_);
      losses_.view_at(micro, {1}).copy_from(l.value());  // device to device: queued
      // The last micro-batch's backward sums each bucket across ranks as soon as it is complete.
      backward({l}, {seed_}, buckets_ && micro == accumulation_ - 1 ? &buckets_->hooks() : nullptr);
    } catch (const NonFiniteError& e) {
      // Only non-finite numbers skip a step; any other error stops the run. The rank that met
      // them says so (with several ranks, rank 0 may not have).
      clear_tape();
      std::string who = comm_->world_size() > 1 ? "rank " + std::to_string(comm_->rank()) + ": " : "";
      std::printf("warning: %sstep %lld: %s; skipping the step\n", who.c_str(),
                  (long long)(step + 1), e.what());
      ok = false;
    }
    arena_.reset();
  }
  // A step this host knows to be bad (a NonFiniteError) is marked where the device decides: a NaN loss.
  if (!ok) losses_.fill_(NAN);
  // The rest of the gradient sums (all of them if the last backward failed).
  if (buckets_) buckets_->finish();
  set_step_loss(control_, losses_);
  // One decision on skipping, the same on every rank: the ranks' loss flags are added up, and the
  // gradients, summed across the ranks, are the same everywhere.
  if (comm_->world_size() > 1) sum_step_loss_across_ranks();
  set_step_control(control_, params, config_.train.grad_clip);
  optimizer_->update(control_);
  return ok;
}

bool Trainer::capture_step(int64_t step) {
  cuda::Graph::begin_capture();
  try {
    const bool ok = queue_step_work(step, true);
    step_graph_ = cuda::Graph::end_capture();
    say("cuda graphs: the work of step %lld captured (%zu operations); each step from now on launches it once\n",
        (long long)(step + 1), step_graph_.operations());
    step_graph_.launch();
    return ok;
  } catch (const std::exception& e) {
    cuda::Graph::abandon_capture();  // nothing of the captured work ran
    clear_tape();
    arena_.reset();
    graphs_ = false;
    say("warning: train.cuda_graphs: step %lld could not be captured as a CUDA graph, so the steps launch their "
        "kernels one by one: %s\n", (long long)(step + 1), e.what());
    return queue_step_work(step, true);
  }
}

void Trainer::sum_step_loss_across_ranks() {
  static_assert(step_control::loss == 0 && step_control::bad == 1, "the first two slots are summed");
  if (control_.device() == Device::cpu) {
    comm_->allreduce_sum(control_.data<double>(), 2);
    return;
  }
  Communicator& c = gradient_comm_ ? *gradient_comm_ : *comm_;
  c.start_allreduce_sum(control_.narrow(0, 2));
  c.wait_all();
}

void Trainer::log_grad_norms(int64_t done_steps, double norm) const {
  const Parameters& params = model_->params();
  say("grad norms step %lld (total %.6g):\n", (long long)done_steps, norm);
  for (size_t i = 0; i < params.size(); ++i) {
    const double n = grad_norm(params, int(i));
    say("  %-40s %12.6g  %5.1f%%\n", params.name(int(i)).c_str(), n, norm > 0 ? 100 * n * n / (norm * norm) : 0.0);
  }
}

void Trainer::save(const TrainState& state) {
  if (!comm_->is_root()) return;
  auto t0 = std::chrono::steady_clock::now();
  std::string path = checkpoint_path(config_.train.out_dir, state.step);
  try {
    save_checkpoint(path, config_, *model_, optimizer_.get(), state);
  } catch (const Error& e) {
    // As large as the earlier checkpoint of the run; without one, its datasets' bytes (the
    // parameters and AdamW's two moments; HDF5's chunk index and the config add about 10%).
    const std::string earlier = latest_checkpoint(config_.train.out_dir);
    const double needed = earlier.empty()
                              ? 3.0 * double(model_->params().layout().total() * int64_t(dtype_size(dtype_)))
                              : double(std::filesystem::file_size(earlier));
    const std::string room = checkpoint_room(path, needed);
    throw Error("the checkpoint of step " + std::to_string(state.step) + " was not written to " + path + ": " +
                e.what() + "\n" + (room.empty() ? "" : room + "\n") +
                (earlier.empty() ? std::string("there is no earlier checkpoint")
                                 : "the earlier checkpoint " + earlier + " is intact; continue from it with --resume " +
                                       shell_quoted(config_.train.out_dir)));
  }
  prune_checkpoints(config_.train.out_dir, config_.checkpoint.keep_last);
  say("checkpoint: %s (%.2f s)\n", path.c_str(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::fflush(stdout);
}


std::optional<MetricsLog> Trainer::open_run_folder() {
  if (!comm_->is_root()) return std::nullopt;  // rank 0 alone writes
  const std::filesystem::path dir(config_.train.out_dir);
  if (!folder_lock_) folder_lock_ = std::make_unique<FolderLock>(dir.string(), "the run folder");
  // Again under the lock: another run may have started there since the constructor looked.
  if (!resumed_) refuse_existing_run(dir.string());
  write_text_atomically((dir / "config.yaml").string(), "# resolved from " + config_.source + "\n" + config_.text);
  const std::string metrics = (dir / "metrics.jsonl").string();
  if (!resumed_) return MetricsLog::start(metrics);
  MetricsCut cut;
  MetricsLog log = MetricsLog::resume(metrics, start_.step, &cut);
  for (const std::string& d : cut.damaged) say("warning: dropped a damaged line of the metrics: %s\n", d.c_str());
  if (cut.records_dropped)
    say("metrics: %s cut back to step %lld (%lld later records dropped)\n", metrics.c_str(),
        (long long)start_.step, (long long)cut.records_dropped);
  return log;
}

void Trainer::stop_for_metrics(const MetricsWriteError& e, const TrainState& state) {
  std::string outcome;
  try {
    save(state);
    outcome = "the run stopped with the checkpoint of step " + std::to_string(state.step) +
              "; once there is space, continue with --resume " + config_.train.out_dir;
  } catch (const Error& not_saved) {
    outcome = not_saved.what();  // it says which earlier checkpoint is intact
  }
  throw Error(std::string(e.what()) + "\n" + outcome);
}

void Trainer::agree_across_ranks(bool& done, bool& interrupted, double& progress) const {
  if (comm_->world_size() == 1) return;
  double v[3] = {comm_->is_root() ? double(done) : 0.0, double(interrupted), comm_->is_root() ? progress : 0.0};
  comm_->allreduce_sum(v, 3);
  done = v[0] > 0;
  interrupted = v[1] > 0;
  progress = v[2];
}

void Trainer::log_step(int64_t done_steps, const LogWindow& window, double lr, double norm, int64_t tokens,
                       double elapsed, const MetricsLog* metrics) const {
  const TrainConfig& t = config_.train;
  const double tok_s = double(t.batch_size * config_.data.seq_len * window.steps) / window.seconds;
  const double ms_per_step = 1e3 * window.seconds / double(window.steps);
  const double loss = window.loss / double(window.steps);
  // Every rank has its share of the cores (or its own GPU), and their peaks add up.
  const double mfu =
      model_->flops_per_token(config_.data.seq_len) * tok_s / (mfu_peak_.gflops * 1e9 * comm_->world_size());
  double eta = INFINITY;
  if (t.max_steps) eta = std::min(eta, double(t.max_steps - done_steps) * ms_per_step / 1e3);
  if (t.max_tokens) eta = std::min(eta, double(t.max_tokens - tokens) / tok_s);
  if (t.max_time) eta = std::min(eta, t.max_time - elapsed);
  if (isatty(fileno(stdout)) && comm_->world_size() == 1) say("\r\033[K");
  say("step %6lld | loss %.4f | lr %.2e | grad norm %.3f | %8.0f tok/s | %7.1f ms/step | %s | ETA %s\n",
      (long long)done_steps, loss, lr, norm, tok_s, ms_per_step, mfu_text(mfu, mfu_peak_, gemm_peak_).c_str(),
      duration(eta).c_str());
  std::fflush(stdout);
  if (metrics)
    metrics->write(done_steps, {{"loss", loss}, {"lr", lr}, {"grad_norm", norm}, {"tokens_per_s", tok_s},
                                {"ms_per_step", ms_per_step}, {"mfu", mfu}});
}

double Trainer::report_eval(int64_t step, bool final, const MetricsLog* metrics, TrainSummary& summary) {
  const TrainConfig& t = config_.train;
  auto t0 = std::chrono::steady_clock::now();
  // Evaluations during training read data.val_tokens tokens; the final one the whole split.
  EvalResult r = linattn::evaluate(*model_, *val_batches(final ? 0 : config_.data.val_tokens), arena_, comm_,
                                   config_.data.document_boundaries, eot_);
  const std::string sample = t.sample_every && val_data_ && (final || step % t.sample_every == 0) &&
                                     comm_->is_root()
                                 ? training_sample_line(*model_, *val_data_, t, step)
                                 : "";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (isatty(fileno(stdout)) && comm_->world_size() == 1) say("\r\033[K");  // over the step counter
  const bool recall = std::isfinite(r.recall_accuracy);
  char recall_text[48] = "", bpb_text[32] = "";  // MQAR has recall and no bytes
  if (recall) std::snprintf(recall_text, sizeof recall_text, " | recall %.4f", r.recall_accuracy);
  if (std::isfinite(r.bits_per_byte)) std::snprintf(bpb_text, sizeof bpb_text, " | bpb %.4f", r.bits_per_byte);
  say("eval  step %6lld | val loss %.4f | ppl %.3f%s | %lld tokens%s | documents %s\n", (long long)step, r.loss,
      r.perplexity, bpb_text, (long long)r.tokens, recall_text,
      document_boundaries_name(config_.data.document_boundaries));
  std::fflush(stdout);
  MetricFields fields{{"val_loss", r.loss}, {"val_ppl", r.perplexity}, {"val_bpb", r.bits_per_byte},
                      {"val_document_reset", config_.data.document_boundaries == DocumentBoundaries::reset ? 1.0 : 0.0}};
  if (recall) fields.push_back({"recall_accuracy", r.recall_accuracy});
  if (!sample.empty()) say("%s\n", sample.c_str());
  summary.last = r;
  // Only evaluations of the whole split compare with each other (a prefix is easier or harder).
  if ((final || config_.data.val_tokens == 0) && r.loss < summary.best.loss) summary.best = r;
  if (metrics) metrics->write(step, fields);
  return seconds;
}

TrainSummary Trainer::run() {
  const TrainConfig& t = config_.train;
  const std::optional<MetricsLog> metrics_log = open_run_folder();
  const MetricsLog* metrics = metrics_log ? &*metrics_log : nullptr;  // rank 0 only
  // The run folder is free again once run() returns or throws.
  struct Unlock {
    std::unique_ptr<FolderLock>& lock;
    ~Unlock() { lock.reset(); }
  } unlock{folder_lock_};
  size_t activations = measure_activation_bytes();
  say("memory: activations %s peak per micro-batch (measured)\n", mib(double(activations)).c_str());

  const int64_t tokens_per_step = t.batch_size * config_.data.seq_len;
  const bool tty = isatty(fileno(stdout)) && comm_->world_size() == 1;
  say("run: %s, out %s\n", run_bounds(t).c_str(), t.out_dir.c_str());
  std::fflush(stdout);

  TrainSummary summary;
  summary.best.loss = std::isnan(start_.best_val_loss) ? INFINITY : start_.best_val_loss;
  summary.best.perplexity = std::exp(summary.best.loss);
  summary.best.bits_per_byte = NAN;  // the checkpoint keeps the loss only
  summary.tokens = start_.tokens;
  // The training clock (max_time, ETA, checkpoints' elapsed time) leaves out the evaluations.
  auto start = std::chrono::steady_clock::now();
  double eval_seconds = 0;
  auto elapsed = [&] {
    return start_.elapsed + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
           eval_seconds;
  };
  // The steps since the last log line; a resumed run's first window started before its checkpoint.
  LogWindow window{start_.log_seconds, start_.log_loss_sum, start_.log_steps};
  auto state_now = [&](int64_t step) {
    TrainState s;
    s.step = step;
    s.tokens = summary.tokens;
    s.elapsed = elapsed();
    s.best_val_loss = std::isfinite(summary.best.loss) ? summary.best.loss : NAN;
    s.log_loss_sum = window.loss;
    s.log_steps = window.steps;
    s.log_seconds = window.seconds;
    s.sampler = loader_->state();
    return s;
  };
  // Writes metrics records; when one cannot be written the run stops with a checkpoint of `at_step`.
  auto recorded = [&](int64_t at_step, const std::function<void()>& write) {
    try {
      write();
    } catch (const MetricsWriteError& e) {
      stop_for_metrics(e, state_now(at_step));
    }
  };
  int64_t bad_in_row = 0, saved_step = -1;

  int64_t step = start_.step;
  for (;; ++step) {
    double progress = schedule_progress(t, step, summary.tokens, tokens_per_step, elapsed());
    bool done = (t.max_steps && step >= t.max_steps) || (t.max_tokens && summary.tokens >= t.max_tokens) ||
                (t.max_time && elapsed() >= t.max_time);
    bool interrupted = interrupt_requested();
    agree_across_ranks(done, interrupted, progress);
    if (done || interrupted) {
      summary.interrupted = !done;
      break;
    }
    const double lr = learning_rate(t, step, progress);
    auto t0 = std::chrono::steady_clock::now();
    double loss = 0, norm = 0;
    bool ok = true;
    train_step(step, lr, loss, norm, ok);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ok) {
      ++bad_in_row;
      LINATTN_REQUIRE(bad_in_row < t.max_bad_steps, "stopping: ",
                    bad_in_row == 1 ? std::string("a step") : std::to_string(bad_in_row) + " steps in a row",
                    " had a non-finite loss or gradient norm. The model diverged: lower train.lr (now ", t.lr,
                    ", from ", config_.where("train.lr"), ") or raise train.warmup_steps, and check the data");
      continue;
    }
    bad_in_row = 0;
    summary.losses.push_back(loss);
    summary.tokens += tokens_per_step;
    window.seconds += seconds;
    window.loss += loss;
    ++window.steps;
    const int64_t done_steps = step + 1;
    recorded(done_steps, [&] {
      if (done_steps % t.log_every == 0 || done_steps == 1) {
        log_step(done_steps, window, lr, norm, summary.tokens, elapsed(), metrics);
        window = {};
      } else if (tty) {
        say("\r\033[Kstep %lld  loss %.4f", (long long)done_steps, loss);
        std::fflush(stdout);
      }
      if (t.eval_every && done_steps % t.eval_every == 0 && !(t.max_steps && done_steps == t.max_steps))
        eval_seconds += report_eval(done_steps, false, metrics, summary);
    });
    if (config_.checkpoint.every && done_steps % config_.checkpoint.every == 0) {
      save(state_now(done_steps));
      saved_step = done_steps;
    }
  }
  summary.steps = step;
  summary.seconds = elapsed();
  if (summary.interrupted) {
    if (saved_step != step) save(state_now(step));  // interrupted right after a checkpoint: that one
    return summary;
  }
  recorded(step, [&] { report_eval(step, true, metrics, summary); });
  if (!config_.checkpoint.every || step % config_.checkpoint.every != 0) save(state_now(step));
  // The last record of a finished run (linattn-sweep skips such runs): its tokens and training time.
  if (metrics)
    recorded(step, [&] {
      metrics->write(step, {{"done", 1}, {"tokens", double(summary.tokens)}, {"seconds", summary.seconds}});
    });
  return summary;
}

}  // namespace linattn
