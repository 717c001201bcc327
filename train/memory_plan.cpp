#include "train/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/cuda/runtime.h"
#include "autograd/ops.h"
#include "kernels/backend.h"
#include "train/device.h"
#include "train/optimizer.h"

namespace linattn {

namespace {

// A probe: a model of the config's sizes with `layers`, its parameter count, bf16 copy and, at each
// of the probe lengths, the arena's high-water mark, the peak of its live bytes and that peak per
// phase of the step; with `loss_chunk_rows`, also the phases' peaks at the longer length with the
// logits made that many rows at a time, which tells each phase's bytes of logits per row.
struct Probe {
  int64_t parameters = 0;
  double bf16_weights = 0;
  double high_water[2] = {0, 0}, live[2] = {0, 0};
  std::vector<size_t> phases[2], phases_half_chunk;
};

// The layers of one kind share every setting.
bool same_kind(const LayerSpec& a, const LayerSpec& b) {
  return a.mixer == b.mixer && a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads &&
         a.window_size == b.window_size && a.rope_theta == b.rope_theta;
}

Probe run_probe(const Config& config, const std::vector<LayerSpec>& layers, Device device, const int64_t (&seqs)[2],
                int64_t loss_chunk_rows = 0) {
  ModelConfig m = config.model;
  m.layers = layers;
  m.num_hidden_layers = int64_t(layers.size());
  // Zero weights: what a step keeps does not depend on their values, and initializing them would
  // take most of the probes' time.
  Model model(m, config.train.dtype == "f64" ? DType::f64 : DType::f32);
  check_model_on_device(config, model, device);  // a layer without kernels there: the config line to fix
  model.set_recompute(config.train.recompute);
  model.params().to(device);
  if (config.train.precision == "bf16") {
    model.params().keep_bf16_copy();
    refresh_bf16_weights(model.params());
  }
  Probe p;
  p.parameters = model.params().layout().total();
  p.bf16_weights = model.params().has_bf16_copy() ? double(model.params().bf16_values().all().nbytes()) : 0;
  Arena arena(device);
  for (int k = 0; k < 2; ++k) {
    const ArenaPeaks peaks = activation_peaks(model, arena, 1, seqs[k]);
    p.high_water[k] = double(peaks.high_water);
    p.live[k] = double(peaks.live);
    p.phases[k] = peaks.phases;
  }
  if (loss_chunk_rows > 0) {
    const size_t value_bytes = config.train.dtype == "f64" ? 8 : 4;
    const size_t chunk_bytes = size_t(loss_chunk_rows) * size_t(config.model.vocab_size) * value_bytes;
    p.phases_half_chunk = activation_peaks(model, arena, 1, seqs[1], chunk_bytes).phases;
  }
  return p;
}

// The line through the two probe lengths' values, at `tokens`.
double at_tokens(const double (&at_probes)[2], const int64_t (&seqs)[2], int64_t tokens) {
  const double slope = (at_probes[1] - at_probes[0]) / double(seqs[1] - seqs[0]);
  return at_probes[0] + slope * double(tokens - seqs[0]);
}

std::string gib(double bytes) {
  char buf[32];
  if (bytes >= double(1 << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1 << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1 << 20));
  return buf;
}

std::string fits_line(const std::string& name, double total_bytes, double need) {
  const bool fits = need <= gpu_usable_share * total_bytes;
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %s %s (%s): %.0f%% of its memory\n", fits ? "fits" : "does NOT fit",
                name.c_str(), gib(total_bytes).c_str(), 100.0 * need / total_bytes);
  return buf;
}

}  // namespace

ArenaPeaks activation_peaks(Model& model, Arena& arena, int64_t batch, int64_t seq, size_t loss_chunk_bytes) {
  Tensor ids = Tensor::zeros({batch, seq}, DType::i32);
  ArenaPeaks peaks;
  arena.reset();
  {
    ArenaScope scope(arena);
    // seeded as the trainer seeds it, so that the head's backward runs in the forward pass as there
    const Tensor& values = model.params().values().all();
    Tensor seed = Tensor::scratch({1}, values.dtype(), values.device());
    seed.fill_(1.0);
    const Variable loss = model.loss(ids, ids, {}, loss_chunk_bytes, seed);
    peaks.phases.push_back(arena.take_phase_peak());
    BackwardHooks hooks;
    hooks.after_node = [&] { peaks.phases.push_back(arena.take_phase_peak()); };
    backward({loss}, {seed}, &hooks);
  }
  model.params().zero_grad();
  peaks.high_water = arena.high_water();
  peaks.live = arena.peak_live();
  arena.reset();
  return peaks;
}

MemoryPlan plan_memory(const Config& config, int world_size) {
  const TrainConfig& t = config.train;
  const int64_t micro = t.micro_batch_size ? t.micro_batch_size : std::max<int64_t>(1, t.batch_size / world_size);
  const int64_t seq = config.data.seq_len;
  // Two short lengths, the longer at most the run's.
  const int64_t hi = std::max<int64_t>(2, std::min<int64_t>(seq, 128));
  const int64_t seqs[2] = {hi / 2, hi};

  // One layer of each kind, in the order they first appear, but the model's last kind last; and how
  // many layers each kind has. The peak comes as backward starts, when everything the layers keep is
  // live and the last layer's backward (or, with recomputation, its replay) adds its own: so an extra
  // layer goes first, and the difference it makes is what it keeps.
  std::vector<LayerSpec> kinds;
  std::vector<int64_t> counts;
  const std::vector<LayerSpec>& layers = config.model.layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& layer = layers[layers.size() - 1 - i];
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const LayerSpec& k) { return same_kind(k, layer); });
    if (it == kinds.end()) {
      kinds.insert(kinds.begin(), layer);
      counts.insert(counts.begin(), 1);
    } else {
      ++counts[size_t(it - kinds.begin())];
    }
  }

  MemoryPlan plan;
  plan.probed_on = config.train.device == "cuda" && cuda::device_count() > 0 ? Device::cuda : Device::cpu;
  // The products in the run's precision while the probes run, as before after them.
  struct PrecisionScope {
    MatmulPrecision before = backend::matmul_precision();
    explicit PrecisionScope(MatmulPrecision p) { backend::set_matmul_precision(p); }
    ~PrecisionScope() { backend::set_matmul_precision(before); }
  } precision(t.precision == "bf16" ? MatmulPrecision::bf16
              : t.tf32                  ? MatmulPrecision::tf32
                                        : MatmulPrecision::f32);
  // The loss's logits in the run: chunks of chunk_rows rows. The longer probe's chunk is
  // probe_rows; the base probe runs again with half that, unless the chunk is a single row (the
  // loss's part is then the same in both probes, and the lines hold it as it is).
  const double value_bytes = t.dtype == "f64" ? 8 : 4;
  const int64_t V = config.model.vocab_size;
  const int64_t chunk_rows = std::max<int64_t>(1, int64_t(ops::kLossChunkBytes / (size_t(V) * size_t(value_bytes))));
  const int64_t probe_rows = std::min(seqs[1], chunk_rows), half_rows = probe_rows / 2;
  const Probe base = run_probe(config, kinds, plan.probed_on, seqs, half_rows);
  double parameters = double(base.parameters), bf16 = base.bf16_weights;
  const int64_t tokens = micro * seq;
  // Each phase of the base probe: its live bytes drawn on a line through the probe lengths, less
  // its logits, which come back on at the micro-batch's tokens capped at a chunk
  // (ops::linear_cross_entropy makes them, and their gradient, a chunk of rows at a time; the
  // probes are shorter than a chunk but for a vocabulary of millions). A phase's logits per row are
  // what its peak loses when the chunk is halved; most phases have none. The step's peak is the
  // largest phase's, times the base probe's share of gaps at the longer length (the gaps grow with
  // the tensors they lie between, not along a line of their own).
  const size_t phases = base.phases[0].size();
  LINATTN_CHECK(base.phases[1].size() == phases && (half_rows == 0 || base.phases_half_chunk.size() == phases),
                "memory plan: the probes ran tapes of ", phases, ", ", base.phases[1].size(), " and ",
                base.phases_half_chunk.size(), " phases");
  double peak = 0;
  for (size_t i = 0; i < phases; ++i) {
    const double per_row =
        half_rows == 0 ? 0.0
                       : std::max(0.0, (double(base.phases[1][i]) - double(base.phases_half_chunk[i])) /
                                           double(probe_rows - half_rows));
    auto logits = [&](int64_t rows) { return per_row * double(std::min(rows, chunk_rows)); };
    const double rest[2] = {double(base.phases[0][i]) - logits(seqs[0]), double(base.phases[1][i]) - logits(seqs[1])};
    peak = std::max(peak, at_tokens(rest, seqs, tokens) + logits(tokens));
  }
  double activations = peak * (base.high_water[1] / base.live[1]);
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (counts[k] == 1) continue;
    std::vector<LayerSpec> more = kinds;
    more.insert(more.begin(), kinds[k]);
    const Probe extra = run_probe(config, more, plan.probed_on, seqs);
    const double n = double(counts[k] - 1);
    parameters += n * double(extra.parameters - base.parameters);
    bf16 += n * (extra.bf16_weights - base.bf16_weights);
    // Live bytes: a small probe's extra layer may fit a gap its high-water mark already counts.
    activations += n * (at_tokens(extra.live, seqs, tokens) - at_tokens(base.live, seqs, tokens));
  }

  plan.parameters = int64_t(parameters);
  plan.weights = parameters * value_bytes;
  plan.gradients = parameters * value_bytes;
  plan.moments = 2 * parameters * value_bytes;
  plan.bf16_weights = bf16;
  plan.activations = activations;
  plan.micro_batch = micro;
  plan.seq_len = seq;
  return plan;
}

std::string describe(const MemoryPlan& plan, const Config& config) {
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "memory per rank (predicted: %.1fM parameters; activations measured on small probes run on %s, "
                "extrapolated to micro-batch %lld x %lld tokens, recompute %s):\n",
                double(plan.parameters) / 1e6, device_name(plan.probed_on), (long long)plan.micro_batch,
                (long long)plan.seq_len, ops::recompute_name(config.train.recompute));
  s += buf;
  auto part = [&](const char* name, double bytes) {
    if (bytes <= 0) return;
    std::snprintf(buf, sizeof buf, "  %-22s %12s\n", name, gib(bytes).c_str());
    s += buf;
  };
  part("weights", plan.weights);
  part("bf16 weight copy", plan.bf16_weights);
  part("gradients", plan.gradients);
  part("AdamW moments", plan.moments);
  part("activations at peak", plan.activations);
  part("total", plan.total());
  if (config.train.device != "cuda") return s;
  if (cuda::device_count() > 0) {
    const cuda::DeviceInfo d = cuda::device_info();
    s += fits_line(d.name, double(d.total_bytes), plan.total());
  } else {
    // What cudaMemGetInfo reports as their total.
    s += fits_line("an H100 80 GB", 79.6 * double(1 << 30), plan.total());
    s += fits_line("an H200 141 GB", 139.8 * double(1 << 30), plan.total());
  }
  if (plan.probed_on == Device::cpu)
    s += "  (no GPU here: the probes ran on the CPU backend; the CUDA kernels keep the same tensors, and their "
         "peak was within 1% of the CPU's in the tests)\n";
  return s;
}

}  // namespace linattn
