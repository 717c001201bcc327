// linattn-bench gpu-plan: what a training step's CUDA kernels can do on an H100, estimated without a
// GPU. For every kernel launch of the step: its grid, block and dynamic shared memory from the
// launchers' own plans (kernels/cuda/launch_plan.h), its registers, static shared memory and spills
// from the nvcc build's resource report and whether its PTX holds tensor-core instructions
// (cmake/cuda_resources.cmake writes both tables), its theoretical occupancy and waves
// (kernels/cuda/occupancy.h), the FLOPs and DRAM bytes it must at least do and move (counted here,
// from the kernel's algorithm), and the roofline time at the H100's peaks. Then the sums per mixer
// beside fla's measured H100 times (shared/design/gpu.md), and the whole step with its implied MFU.
//
// The roofline time of a launch is max(FLOPs / peak, bytes / bandwidth), divided by the share of
// the 132 SMs its grid can occupy (a grid of 32 blocks uses at most 32 SMs). It is a lower bound:
// it ignores latency, the sequential walk of the inter-chunk pass, launch overheads and the caches.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "core/error.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/occupancy.h"
#include "layers/mixers/parts.h"
#include "train/config.h"

namespace linattn::bench {

namespace {

namespace cu = linattn::cuda;
constexpr double kF32 = 4;  // bytes

// ---- the nvcc build's kernel tables ----

struct KernelFacts {
  int registers = 0;
  int64_t static_smem = 0, spill_bytes = 0;
};

struct BuildTables {
  std::string resources_path, tensor_cores_path;
  bool have_resources = false, have_tensor_cores = false;
  std::map<std::string, KernelFacts> resources;  // by kernel name, sm_90 rows
  std::map<std::string, int> tensor_core_instructions;
};

// The cells of a markdown table row ("| a | b |" -> {"a", "b"}), trimmed.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string cell;
  std::getline(in, cell, '|');  // before the first bar
  while (std::getline(in, cell, '|')) {
    const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  if (!out.empty() && out.back().empty()) out.pop_back();  // after the last bar
  return out;
}

int64_t number(const std::string& s) { return s.empty() || s == "-" ? 0 : std::stoll(s); }

BuildTables read_tables(const std::string& dir) {
  BuildTables t;
  t.resources_path = dir + "/cuda-resources.md";
  t.tensor_cores_path = dir + "/cuda-tensor-cores.md";
  // | file | kernel | arch | registers | static smem | spill stores | spill loads | stack | cmem | check |
  if (std::ifstream in(t.resources_path); in) {
    t.have_resources = true;
    for (std::string line; std::getline(in, line);) {
      const std::vector<std::string> c = cells(line);
      if (c.size() < 7 || c[2] != "sm_90" || c[1].find(" (device function)") != std::string::npos) continue;
      t.resources.emplace(c[1], KernelFacts{int(number(c[3])), number(c[4]), number(c[5]) + number(c[6])});
    }
  }
  // | file | kernel | arch | tensor-core instructions |
  if (std::ifstream in(t.tensor_cores_path); in) {
    t.have_tensor_cores = true;
    for (std::string line; std::getline(in, line);) {
      const std::vector<std::string> c = cells(line);
      if (c.size() < 4 || c[2] != "sm_90") continue;
      t.tensor_core_instructions.emplace(c[1], int(number(c[3])));
    }
  }
  return t;
}

// ---- what a launch costs ----

// One row of the report: a kernel launch (or a cuBLAS GEMM, plan.kernel empty), `launches` times.
struct Launch {
  std::string op;
  cu::LaunchPlan plan;
  double flops = 0, bytes = 0;  // one launch
  bool bf16 = false;            // its operands are bf16 (the tensor cores then run bf16, else tf32)
  int64_t launches = 1;
  std::string gemm;             // a cuBLAS GEMM: "M x N x K"
  bool mixer = false;           // part of a mixer or attention (the model FLOPs count it)
  bool sequential = false;      // a linear mixer's inter-chunk pass: one thread per state entry walks the chunks
  bool again = false;           // work made again (a recomputed product, a replay): its time, not model FLOPs
  bool kept = false;            // a product or attention's core: selective recomputation keeps its output
  bool recording = false;       // made only while the tape records (a node's bf16 copy of what it saves)
};

struct Cost {
  double flops, bytes;
  const char* part = nullptr;  // what of the op the launch does, when it is not the whole op
  bool sequential = false;
};

// Pairs the plans of one launcher call with their costs, in launch order; the counts must agree, so
// a launcher that changes its launches fails here rather than pairing the wrong costs.
std::vector<Launch> launches(const std::string& op, const cu::LaunchPlans& plans, const std::vector<Cost>& costs,
                             bool bf16 = false) {
  LINATTN_CHECK(plans.size() == costs.size(), "gpu-plan: ", op, " launches ", plans.size(),
                " kernels but the report costs ", costs.size(), "; update bench/gpu_plan.cpp to the launcher");
  std::vector<Launch> out;
  for (size_t i = 0; i < plans.size(); ++i) {
    Launch l;
    l.op = costs[i].part ? op + ": " + costs[i].part : op;
    l.plan = plans[i], l.flops = costs[i].flops, l.bytes = costs[i].bytes, l.bf16 = bf16;
    l.sequential = costs[i].sequential;
    out.push_back(l);
  }
  return out;
}

void append(std::vector<Launch>& to, const std::vector<Launch>& more) { to.insert(to.end(), more.begin(), more.end()); }

// A pointwise pass over n elements reading `reads` and writing `writes` float32 arrays (a += counts
// as a read and a write).
Cost pointwise(int64_t n, int reads, int writes, double flops_per_element) {
  return {flops_per_element * double(n), kF32 * double(n) * (reads + writes)};
}

// C[M, N] (+)= A[M, K] B[K, N] through cuBLAS: float32 operands unless bf16; C float32 unless
// bf16_out (bf16 operands, written, not added into).
Launch gemm(const std::string& op, int64_t M, int64_t N, int64_t K, bool accumulate, bool bf16, bool bf16_out = false) {
  Launch l;
  l.op = op;
  l.gemm = std::to_string(M) + " x " + std::to_string(N) + " x " + std::to_string(K);
  l.flops = 2.0 * double(M) * double(N) * double(K);
  const double elt = bf16 ? 2 : kF32;
  l.bytes = elt * (double(M) * K + double(K) * N) + (bf16_out ? 2 : kF32) * double(M) * N * (accumulate ? 2 : 1);
  l.bf16 = bf16;
  return l;
}

// A Linear layer y = x W^T of `rows` tokens: forward (y in bf16 with bf16_out), and backward dx and
// dW (+=). dx is written (beta = 0) by the input's last reader in the forward, the first in the
// backward (Variable::grad_to_write), and added into (dx_adds) by the input's other readers.
void linear(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const std::string& name, int64_t rows, int64_t in,
            int64_t out, bool bf16, bool bf16_out = false, bool dx_adds = false) {
  fwd.push_back(gemm(name + " forward", rows, out, in, false, bf16, bf16_out));
  fwd.back().kept = true;
  bwd.push_back(gemm(name + " dx", rows, in, out, dx_adds, bf16));
  bwd.push_back(gemm(name + " dW", out, in, rows, true, bf16));
}

// ---- the linear mixers' chunk-parallel passes (kernels/cuda/chunk_gla.h) ----

struct MixerShape {
  int64_t B, T, H, D, C = 64;
  int64_t Dv = 0;  // the value columns per head, when they differ from the key columns D
  int64_t values() const { return Dv ? Dv : D; }
};

// One call: K key columns, N value columns, chunks of C = 64 tokens; GLA's gates or none. Training
// passes no initial or final state (cu::MixerStates{}).
struct ChunkShape {
  int64_t B, T, H, K, N;
  bool gated;
  double C() const { return 64; }
  double chunks() const { return std::ceil(double(T) / 64); }
  double rows() const { return double(B * T * H); }                  // tokens x heads
  double slots() const { return double(B * H) * chunks() * K * N; }  // one state per chunk
  double tiles(int64_t columns) const { return std::ceil(double(columns) / 64); }
  // score pairs a 64-column tile computes per chunk: the sub-chunk blocks on and below the diagonal
  // (16-token sub-chunks: C (C + 16) / 2 of the C^2)
  double pairs() const { return C() * (C() + 16) / 2; }
  double g() const { return gated ? 2 : 1; }  // gated scores also take the gate factor per term
};

// chunk_state_kernel: U_c = (phi(K) e^(G_C - G))^T V (forward) or W_c = scale (phi(Q) e^G)^T dO
// (backward) per chunk, 2 C K N; each (key tile, value tile) block reads its slices of both sides.
Cost chunk_state_cost(const ChunkShape& s) {
  const double flops = double(s.B * s.H) * s.chunks() * 2 * s.C() * s.K * s.N + (s.gated ? 2 * s.rows() * s.K : 0);
  const double bytes = kF32 * (s.rows() * (s.tiles(s.N) * s.K * s.g() + s.tiles(s.K) * s.N) + s.slots());
  return {flops, bytes, "chunk states (parallel)"};
}

// state_pass_kernel: the sequential inter-chunk pass, S_{c+1} = e^(G_C) S_c + U_c per state entry and
// chunk (a multiply-add, and the decay's exponential with gates), reading and writing every slot.
Cost state_pass_cost(const ChunkShape& s) {
  return {s.slots() * (s.gated ? 3 : 2), kF32 * 2 * s.slots(), "inter-chunk state pass (sequential)", true};
}

// chunk_apply_kernel per chunk and 64-column value tile: the scores (again per tile), phi(Q) S_c and
// A V (forward), or their transposes for dv; reads Q, K (and G) per tile, V (or dO) and the states
// once, writes (or += for dv) the outputs.
Cost chunk_apply_cost(const ChunkShape& s, bool accumulate, const char* part) {
  const double nt = std::min<int64_t>(s.N, 64), per_tile = s.pairs() * s.K * 2 * s.g() + s.C() * s.K * nt * 2 +
                                                         s.pairs() * nt * 2;
  const double flops = double(s.B * s.H) * s.chunks() * s.tiles(s.N) * per_tile;
  const double bytes =
      kF32 * (s.rows() * (s.tiles(s.N) * s.K * (s.gated ? 3 : 2) + s.N * (accumulate ? 3 : 2)) + s.slots());
  return {flops, bytes, part};
}

// chunk_dqk_kernel per chunk and 64-column key tile: dP = dO V^T (again per tile), dq from dO S_c^T
// and dP K, dk from V dS_{c+1}^T and dP^T Q, the gate gradient's in-chunk sums; reads dO and V per
// tile, Q, K (G) and both states once, += dq, dk (and dg).
Cost chunk_dqk_cost(const ChunkShape& s) {
  const double kt = std::min<int64_t>(s.K, 64);
  const double per_tile = s.pairs() * s.N * 2 + 2 * (s.C() * s.N * kt * 2 + s.pairs() * kt * 2 * s.g()) +
                          (s.gated ? 4 * s.C() * kt : 0);
  const double flops = double(s.B * s.H) * s.chunks() * s.tiles(s.K) * per_tile;
  const double bytes = kF32 * (s.rows() * (s.tiles(s.K) * 2 * s.N + s.K * (s.gated ? 3 : 2) +
                                           s.K * (s.gated ? 6 : 4)) + 2 * s.slots());
  return {flops, bytes, "dq, dk (parallel)"};
}

// gate_pass_kernel: GLA's sequential pass over the chunk totals of dg per (b, h, key column), from
// dht . S_T (no dht in training) — a running sum, read and written per chunk.
Cost gate_pass_cost(const ChunkShape& s) {
  const double totals = double(s.B * s.H) * s.chunks() * s.K;
  return {totals, kF32 * 2 * totals, "inter-chunk gate pass (sequential)", true};
}

// The intra-chunk products in `precision` (train.precision: bf16, train.tf32): bf16 or tf32 operands
// on the tensor cores where the kernel's PTX has them; the operands still come from float32 tensors.
std::vector<Launch> linear_attention(const MixerShape& m, MatmulPrecision precision, std::vector<Launch>& bwd) {
  const ChunkShape s{m.B, m.T, m.H, m.D, m.D, false};
  const bool bf16 = precision == MatmulPrecision::bf16;
  std::vector<Launch> fwd =
      launches("linear_attn forward",
               cu::linear_attention_forward_plans(m.B, m.T, m.H, m.D, m.D, false, {}, precision),
               {chunk_state_cost(s), state_pass_cost(s), chunk_apply_cost(s, false, "outputs (parallel)")}, bf16);
  append(bwd, launches("linear_attn backward",
                       cu::linear_attention_backward_plans(m.B, m.T, m.H, m.D, m.D, false, {}, precision),
                       {chunk_state_cost(s), state_pass_cost(s), chunk_state_cost(s), state_pass_cost(s),
                        chunk_apply_cost(s, true, "dv (parallel)"), chunk_dqk_cost(s)},
                       bf16));
  return fwd;
}

std::vector<Launch> gla(const MixerShape& m, MatmulPrecision precision, std::vector<Launch>& bwd) {
  const bool bf16 = precision == MatmulPrecision::bf16;
  const ChunkShape s{m.B, m.T, m.H, m.D, m.values(), true};
  Cost cumsum = pointwise(m.B * m.T * m.H * m.D, 1, 1, 1);
  cumsum.part = "gate cumsum";
  Cost offset = pointwise(m.B * m.T * m.H * m.D, 2, 1, 1);  // dg += its chunk's offset
  offset.part = "gate offsets";
  std::vector<Launch> fwd =
      launches("gla forward", cu::gla_forward_plans(m.B, m.T, m.H, m.D, m.values(), {}, precision),
               {cumsum, chunk_state_cost(s), state_pass_cost(s), chunk_apply_cost(s, false, "outputs (parallel)")},
               bf16);
  append(bwd, launches("gla backward", cu::gla_backward_plans(m.B, m.T, m.H, m.D, m.values(), {}, precision),
                       {cumsum, chunk_state_cost(s), state_pass_cost(s), chunk_state_cost(s), state_pass_cost(s),
                        chunk_apply_cost(s, true, "dv (parallel)"), chunk_dqk_cost(s), gate_pass_cost(s), offset},
                       bf16));
  return fwd;
}

// DeltaNet and Gated DeltaNet (deltanet.cu), per (b, h) and chunk of C in multiply-adds (the gates add
// O(C^2) per chunk, left out). The forward's three launches: chunk_factors K K^T, Q K^T and A^-1
// (2 C^2 D + C^3 / 3), reading q, k, beta, the gate and writing A^-1, PG; chunk_states R = V - K S0,
// U' = A^-1 R and the state update (2 C D^2 + C^2 D), reading k, v, A^-1 and writing S0, U', R;
// chunk_outputs Q S0 and P U' (C D^2 + C^2 D), reading q, S0, PG, U' and writing o.
std::vector<Cost> deltanet_forward_costs(const MixerShape& m) {
  const double C = double(m.C), D = double(m.D), chunks = std::ceil(double(m.T) / m.C);
  const double n = chunks * double(m.B * m.H), rows = double(m.B * m.T * m.H);
  return {{2 * n * (2 * C * C * D + C * C * C / 3), kF32 * (rows * (2 * D + 2) + n * 2 * C * C), "factors (parallel)"},
          {2 * n * (2 * C * D * D + C * C * D), kF32 * (rows * 2 * D + n * (C * C + D * D + 2 * C * D)),
           "inter-chunk state pass (sequential)", true},
          {2 * n * (C * D * D + C * C * D), kF32 * (rows * 2 * D + n * (D * D + C * C + C * D)), "outputs (parallel)"}};
}

// The backward's three launches: chunk_backward_inputs scale P^T dO and scale Q^T diag(gamma) dO
// (C^2 D / 2 + C D^2), reading q, dO, PG and writing both to the scratch; chunk_backward_states
// K dS1, A^-T dU' and K^T dr (2 C D^2 + C^2 D / 2), every tile of state columns reading k and A^-1,
// the scratch read and written; chunk_backward_grads the products with S0 and dS1 (3 C D^2), dP,
// dQ and dK through P (3 C^2 D / 2) and through A (3 C^2 D / 2), reading q, k, v, dO, beta, the
// gate, `saved` and the scratch, and adding to dq, dk, dv, dbeta, da (read and written).
std::vector<Cost> deltanet_backward_costs(const MixerShape& m) {
  const double C = double(m.C), D = double(m.D), chunks = std::ceil(double(m.T) / m.C);
  const double n = chunks * double(m.B * m.H), rows = double(m.B * m.T * m.H), tiles = std::ceil(D / 8);
  const double work = n * (D * D + C * D), saved = n * (D * D + 2 * C * C + 2 * C * D);
  return {{2 * n * (C * C * D / 2 + C * D * D), kF32 * (rows * 2 * D + n * C * C + work), "dS inputs (parallel)"},
          {2 * n * (2 * C * D * D + C * C * D / 2), kF32 * (tiles * (rows * D + n * C * C) + 2 * work),
           "inter-chunk dS pass (sequential)", true},
          {2 * n * (3 * C * D * D + 3 * C * C * D), kF32 * (rows * (10 * D + 4) + saved + work),
           "gradients (parallel)"}};
}

// `precision`: the per-chunk launches' products, forward and backward (the sequential passes and the
// triangular solve run float32 on the CUDA cores).
std::vector<Launch> deltanet(const MixerShape& m, MatmulPrecision precision, std::vector<Launch>& bwd,
                             const std::string& name) {
  append(bwd, launches(name + " backward", cu::deltanet_backward_plans(m.B, m.T, m.H, m.D, m.D, m.C, precision),
                       deltanet_backward_costs(m), precision == MatmulPrecision::bf16));
  return launches(name + " forward", cu::deltanet_forward_plans(m.B, m.T, m.H, m.D, m.D, m.C, precision),
                  deltanet_forward_costs(m), precision == MatmulPrecision::bf16);
}

// Causal softmax attention over `window` keys (<= 0: global). Per query-key pair the forward does
// S = q k (2 dk) and o += p v (2 dv); the backward's dk/dv pass recomputes S and dP (2 dk + 2 dv) and
// adds dV and dK (2 dv + 2 dk), its dq pass recomputes S and dP and adds dQ (4 dk + 2 dv). Bytes: the
// tensors once each (the 50 MB L2 keeps the key blocks that the query blocks share).
std::vector<Launch> attention(const MixerShape& m, int64_t window, bool bf16, std::vector<Launch>& bwd, int64_t Hkv = 0) {
  if (Hkv == 0) Hkv = m.H;
  const double T = double(m.T), W = window <= 0 || window >= m.T ? T : double(window);
  const double pairs = double(m.B * m.H) * (W * T - W * (W - 1) / 2);
  const double D = double(m.D), rows = double(m.B * m.T * m.H), elt = bf16 ? 2 : kF32;
  const std::string name = window > 0 ? "attention (window " + std::to_string(window) + ")" : "attention (global)";
  std::vector<Launch> fwd = launches(name + " forward", cu::attention_forward_plans(bf16, m.B, m.T, m.H, m.D, m.D),
                                     {{pairs * 4 * D, elt * rows * 4 * D + kF32 * rows}}, bf16);
  append(bwd, launches(name + " backward", cu::attention_backward_plans(bf16, m.B, m.T, m.H, Hkv, m.D, m.D),
                       {{rows * 2 * D, elt * rows * 2 * D + kF32 * rows},
                        {pairs * 8 * D, elt * rows * (4 * D + 4 * D) + 2 * kF32 * rows},
                        {pairs * 6 * D, elt * rows * (4 * D + 2 * D) + 2 * kF32 * rows}},
                       bf16));
  return fwd;
}

// ---- the training step ----

// One layer: GLA (fla's GatedLinearAttention: q and k of H heads x Dk, v and the output gate g of
// H x Dv), Gated DeltaNet (fla's GatedDeltaNet: H heads of Dk = Dv, short convolutions of `conv`
// taps, chunks of `chunk`) or softmax attention (H query and Hkv key/value heads of Dk = Dv, RoPE, a
// window or global), then the SwiGLU MLP.
enum class LayerMixer { gla, gated_deltanet, attention };

struct LayerShape {
  LayerMixer mixer = LayerMixer::gla;
  int64_t H = 0, Dk = 0, Dv = 0, Hkv = 0, window = 0, conv = 0, chunk = 64;
  bool operator==(const LayerShape& o) const {
    return mixer == o.mixer && H == o.H && Dk == o.Dk && Dv == o.Dv && Hkv == o.Hkv && window == o.window &&
           conv == o.conv && chunk == o.chunk;
  }
  std::string name() const {
    char buf[96];
    if (mixer == LayerMixer::attention)
      std::snprintf(buf, sizeof buf, "attention (H%ld, %ld kv heads, D%ld, %s)", long(H), long(Hkv), long(Dk),
                    window > 0 ? ("window " + std::to_string(window)).c_str() : "global");
    else if (mixer == LayerMixer::gated_deltanet)
      std::snprintf(buf, sizeof buf, "Gated DeltaNet (H%ld, D%ld, conv %ld)", long(H), long(Dk), long(conv));
    else
      std::snprintf(buf, sizeof buf, "GLA (H%ld, Dk %ld, Dv %ld)", long(H), long(Dk), long(Dv));
    return buf;
  }
};

// A training step's model and micro-batch.
struct StepShape {
  std::string name;
  int64_t B, T, d, intermediate, vocab;
  bool tied;
  std::vector<LayerShape> layers;
  ops::Recompute recompute = ops::Recompute::none;  // train.recompute
  std::string note;  // where the step comes from
};

// The distinct layers of `layers`, in order of first appearance.
std::vector<LayerShape> layer_kinds(const std::vector<LayerShape>& layers) {
  std::vector<LayerShape> kinds;
  for (const LayerShape& l : layers)
    if (std::find(kinds.begin(), kinds.end(), l) == kinds.end()) kinds.push_back(l);
  return kinds;
}

// A model of `layers` GLA layers of H heads of D keys and values (expand_k 1).
StepShape gla_step(const std::string& name, int64_t B, int64_t T, int64_t H, int64_t D, int64_t layers, int64_t vocab,
                   int64_t intermediate, bool tied) {
  const std::vector<LayerShape> kinds(size_t(layers), {LayerMixer::gla, H, D, D});
  return {name, B, T, H * D, intermediate, vocab, tied, kinds, ops::Recompute::none, ""};
}

// RMSNorm's backward, in one launch: reads x (the kept bf16 copy under bf16), dy, rstd, writes dx as
// the prior gradient plus the norm's part (its dx blocks; with dx_copy also dx's bf16 copy, the
// operand of the products of add_rmsnorm's branch), reads x and dy again for the weight gradient's
// column sums (its dw blocks), and its last block adds the chunks' partial sums.
void rmsnorm_backward(std::vector<Launch>& bwd, const std::string& name, int64_t N, int64_t D, bool bf16,
                      bool dx_copy = false) {
  const double n = double(N) * D, x_bytes = bf16 ? 2 : kF32;
  const cu::RowChunks chunks = cu::row_chunks(N, (D + 31) / 32, D);
  append(bwd, launches(name + " backward", cu::rmsnorm_backward_plans(N, D, true),
                       {{9 * n + double(chunks.count) * D,
                         n * (2 * x_bytes + 4 * kF32 + (dx_copy ? 2 : 0)) +
                             kF32 * (2 * N + double(chunks.count + 2) * D)}}));
}

// RMSNorm of N rows of D: forward reads x, writes y and rstd, and under bf16 (a SaveInBf16 scope) the
// bf16 copies of y (the products' operand) and of x (what the node keeps).
void rmsnorm(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const std::string& name, int64_t N, int64_t D,
             bool bf16) {
  const double n = double(N) * D;
  append(fwd, launches(name + " forward", cu::rmsnorm_forward_plans(N, D),
                       {{4 * n, n * (2 * kF32 + (bf16 ? 4 : 0)) + kF32 * N}}));
  rmsnorm_backward(bwd, name, N, D, bf16);
}

// The residual sum and its norm in one pass (ops::add_rmsnorm): the forward reads the stream and the
// branch's output and writes their sum, y and rstd (under bf16 also the copies of y and of the sum);
// the backward is RMSNorm's, whose dx is written as the gradient passed on plus the norm's part, and
// under bf16 its copy, which the branch's product reads (branch_copy: where the branch's gradient
// reaches its product as it is; across a recomputed region's edge it is converted there instead).
void add_rmsnorm(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const std::string& name, int64_t N, int64_t D,
                 bool bf16, bool branch_copy) {
  const double n = double(N) * D;
  append(fwd, launches(name + " forward", cu::rmsnorm_forward_plans(N, D),
                       {{5 * n, n * (4 * kF32 + (bf16 ? 4 : 0)) + kF32 * N}}));
  rmsnorm_backward(bwd, name, N, D, bf16, bf16 && branch_copy);
}

void pointwise_op(std::vector<Launch>& to, const std::string& op, const std::string& functor, int64_t n, int reads,
                  int writes, double flops) {
  append(to, launches(op, {cu::elementwise_plan(functor, n)}, {pointwise(n, reads, writes, flops)}));
}

// A conversion of n elements to bf16 (convert.cu) or back.
Launch conversion(const std::string& op, int64_t n, bool to_bf16) {
  return launches(op, {cu::pointwise_plan(to_bf16 ? "to_bf16_kernel" : "from_bf16_kernel", n)},
                  {{0, double(n) * (kF32 + 2)}})[0];
}

// The conversions of a layer's step in bf16 (train.precision: bf16), counted in the emulation
// (docs/benchmarks.md): `saved`, the float32 activations a node keeps in bf16 that no kernel wrote a
// copy of (converted in the forward, while recording); `gradients`, the upstream gradients a
// product's backward converts into its bf16 operand; `widened`, the kept copies a backward whose
// kernels read float32 widens.
void bf16_conversions(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const std::vector<int64_t>& saved,
                      const std::vector<int64_t>& gradients, const std::vector<int64_t>& widened) {
  for (int64_t n : saved) {
    fwd.push_back(conversion("saved activation into bf16", n, true));
    fwd.back().recording = true;
  }
  for (int64_t n : gradients) bwd.push_back(conversion("gradient into bf16 for its products", n, true));
  for (int64_t n : widened) bwd.push_back(conversion("saved activation widened", n, false));
}

// The output gradients a layer's products convert into their bf16 operand: o_proj's and down_proj's
// come with their bf16 copy from the next norm's backward (ops::add_rmsnorm), but for down_proj's
// under recomputation, which reaches it from the next region's replay as float32 (n elements).
std::vector<int64_t> region_gradients(const StepShape& s, int64_t n) {
  if (s.recompute == ops::Recompute::none) return {};
  return {n};
}

// The per-head RMSNorm and swish gate of a mixer's output, h = silu(g) * rmsnorm(o), in one pass that
// writes the output projection's operand h (ops::rmsnorm_gate_linear; R rows of D): the backward
// makes h again from the kept o and g for the weight's gradient, then one launch takes dh to do, dg
// (its dx blocks) and the norm weight's column sums (its dw blocks).
void gated_norm(std::vector<Launch>& fwd, std::vector<Launch>& bwd, int64_t R, int64_t D, bool bf16) {
  const double n = double(R) * D, elt = bf16 ? 2 : kF32;  // elt: the operand's and the kept copies' bytes
  append(fwd, launches("g_norm and swish gate", cu::rmsnorm_gate_forward_plans(R, D),
                       {{10 * n, n * (2 * kF32 + elt) + kF32 * R}}));
  append(bwd, launches("g_norm and swish gate made again", cu::rmsnorm_gate_forward_plans(R, D),
                       {{8 * n, n * 3 * elt + kF32 * R}}));
  const cu::RowChunks chunks = cu::row_chunks(R, (D + 31) / 32, D);
  append(bwd, launches("g_norm and swish gate backward", cu::rmsnorm_gate_backward_plans(R, D, true),
                       {{30 * n + double(chunks.count) * D,  // dx blocks: x, g, dh in, dx, dg out; dw: x, g, dh
                         n * (4 * elt + 4 * kF32) + kF32 * (R + double(chunks.count + 2) * D)}}));
}

// The projections of one input as one product (ops::linears): the GEMMs of one Linear of all their
// outputs (written in bf16 with bf16 products), the outputs split off (float32 and their bf16
// copies) and their gradients joined (into the bf16 operand of the backward's products).
void projections(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const std::string& name, int64_t rows, int64_t in,
                 int64_t out, bool bf16, bool dx_adds = false) {
  linear(fwd, bwd, name, rows, in, out, bf16, bf16, dx_adds);
  const double n = double(rows) * double(out), elt = bf16 ? 2 : kF32;
  append(fwd, launches(name + " split", {cu::pointwise_plan("split_columns_kernel", rows * out)},
                       {{0, n * (elt + kF32 + (bf16 ? elt : 0))}}));
  fwd.back().kept = true;  // of the product
  append(bwd, launches(name + " gradients joined", {cu::pointwise_plan("join_columns_kernel", rows * out)},
                       {{0, n * (kF32 + elt)}}));
}

// The SwiGLU MLP as one node (ops::swiglu_mlp): gate and up as one product whose [N, 2 I] output
// (bf16 with bf16 products: the node keeps it as the product wrote it) SwiGLU reads as it is,
// writing the down product's operand h; the backward recomputes h from the kept output and writes
// the gradient [dgate | dup] as the operand of the two products (no split, no join).
void swiglu_mlp(std::vector<Launch>& fwd, std::vector<Launch>& bwd, int64_t N, int64_t d, int64_t I, bool bf16) {
  const double n = double(N) * double(I), elt = bf16 ? 2 : kF32;
  linear(fwd, bwd, "mlp gate_proj and up_proj", N, d, 2 * I, bf16, bf16);
  append(fwd, launches("mlp swiglu", {cu::elementwise_plan("SwigluJoinedForward", N * I)},
                       {{6 * n, n * (2 * elt + elt)}}));
  fwd.back().kept = true;  // the replay takes both products, so the node's SwiGLU is not run again
  append(bwd, launches("mlp swiglu recomputed", {cu::elementwise_plan("SwigluJoinedForward", N * I)},
                       {{6 * n, n * (2 * elt + elt)}}));
  append(bwd, launches("mlp swiglu backward", {cu::elementwise_plan("SwigluJoinedBackward", N * I)},
                       {{12 * n, n * (2 * elt + kF32 + 2 * elt)}}));
  linear(fwd, bwd, "mlp down_proj", N, I, d, bf16);
}

struct Step {
  std::vector<Launch> launches;
  int64_t params = 0;
};

// What a layer adds up to: its parameters, and for selective recomputation under bf16 saving the
// elements of the outputs its first run keeps in bf16 (autograd/checkpoint.h): `rounded`, the
// conversions that adds to the step (the products that have no bf16 copy of their own, where
// recompute none converts none either: o_proj's and down_proj's; the projections' split and the
// MLP's SwiGLU pass write theirs, and a product a node keeps, such as gk_proj.1's, is converted
// under none too), and `widened`, those the replay widens back into float32 (all but the MLP's gate
// and up, which SwiGLU reads in bf16).
struct LayerPlan {
  int64_t params = 0;
  std::vector<int64_t> rounded, widened;
};

// A GLA layer (the default mixer; fla's GatedLinearAttention layer): the last block's MLP residual and
// attn_norm in one pass (ops::add_rmsnorm), the q, k, v, g projections and the rank-16 gate's first
// as one product (ops::linears), the gate's second with its bias, logsigmoid scaled by 1/16 (one
// pass), the GLA kernels, the per-head RMSNorm and swish gate in one pass, the output projection, its
// residual and mlp_norm in one pass, the SwiGLU MLP (one node: gate and up as one product, no split).
LayerPlan gla_layer(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const StepShape& s, const LayerShape& l,
                    MatmulPrecision precision) {
  const bool gemm_bf16 = precision == MatmulPrecision::bf16;  // the GEMMs' operand bytes
  const int64_t N = s.B * s.T, d = s.d, I = s.intermediate, rank = 16, kd = l.H * l.Dk, vd = l.H * l.Dv;
  add_rmsnorm(fwd, bwd, "residual + attn_norm", N, d, gemm_bf16, s.recompute == ops::Recompute::none);
  projections(fwd, bwd, "q, k, v, g_proj and gk_proj.0", N, d, 2 * kd + 2 * vd + rank, gemm_bf16);
  // gk_proj.1, its bias and logsigmoid / 16 as one node (ops::linear_activation): the bias pass reads
  // the product and writes the gate and (bf16) the kept input's copy; its backward reads that and
  // the gate's gradient and writes dz (the products' operand) and the bias's column sums
  linear(fwd, bwd, "gk_proj.1", N, rank, kd, gemm_bf16);
  const double gate_n = double(N * kd), elt = gemm_bf16 ? 2 : kF32;
  append(fwd, launches("gk_proj.1 bias and gate logsigmoid / 16",
                       cu::bias_activation_forward_plans(Activation::logsigmoid, N, kd),
                       {{6 * gate_n, gate_n * (2 * kF32 + elt)}}));
  const cu::RowChunks bias_chunks = cu::row_chunks(N, (kd + 31) / 32, kd);
  append(bwd, launches("gk_proj.1 bias and gate logsigmoid / 16 backward",
                       cu::bias_activation_backward_plans(Activation::logsigmoid, N, kd),
                       {{7 * gate_n, gate_n * (elt + kF32 + elt) + kF32 * double(bias_chunks.count * kd)}}));
  std::vector<Launch> mixer_bwd;
  std::vector<Launch> mixer_fwd = gla({s.B, s.T, l.H, l.Dk, 64, l.Dv}, precision, mixer_bwd);
  for (Launch& m : mixer_fwd) m.mixer = true;
  for (Launch& m : mixer_bwd) m.mixer = true;
  append(fwd, mixer_fwd);
  gated_norm(fwd, bwd, N * l.H, l.Dv, gemm_bf16);
  linear(fwd, bwd, "o_proj", N, vd, d, gemm_bf16);
  add_rmsnorm(fwd, bwd, "residual + mlp_norm", N, d, gemm_bf16, true);
  swiglu_mlp(fwd, bwd, N, d, I, gemm_bf16);
  append(bwd, mixer_bwd);
  // saved: the gate (by GLA); gradients: down_proj's across a recomputed region's edge
  if (gemm_bf16) bf16_conversions(fwd, bwd, {N * kd}, region_gradients(s, N * d), {});
  return {d * (2 * kd + 2 * vd + rank) + rank * kd + kd + l.Dv + vd * d + 2 * d + 3 * d * I,
          {N * d, N * d},  // o_proj, down_proj
          {N * kd, N * kd, N * vd, N * vd, N * rank, N * kd, N * d, N * d}};
}

// A Gated DeltaNet layer (fla's GatedDeltaNet, layers/mixers/deltanet.cpp): the residual and
// attn_norm in one pass, q, k, v and b_proj as one product, a short convolution and SiLU on each of
// q, k and v, L2 norms of q and k, beta = sigmoid(b), a_proj and the decay a = -exp(A_log)
// softplus(a + dt_bias) in one pass, the chunked delta-rule kernels, g_proj, the per-head RMSNorm and
// swish gate in one pass, o_proj, the residual and mlp_norm in one pass, the SwiGLU MLP.
LayerPlan gated_deltanet_layer(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const StepShape& s,
                               const LayerShape& l, MatmulPrecision precision) {
  const bool gemm_bf16 = precision == MatmulPrecision::bf16;
  const int64_t N = s.B * s.T, d = s.d, I = s.intermediate, kd = l.H * l.Dk, vd = l.H * l.Dv, W = l.conv;
  add_rmsnorm(fwd, bwd, "residual + attn_norm", N, d, gemm_bf16, s.recompute == ops::Recompute::none);
  // the normed input's readers: this product, a_proj and g_proj (the last, whose dx is written)
  projections(fwd, bwd, "q, k, v, b_proj", N, d, 2 * kd + vd + l.H, gemm_bf16, true);
  const std::string silu = cu::activation_functor("ActivationForward", Activation::silu);
  const std::string dsilu = cu::activation_functor("ActivationBackward", Activation::silu);
  for (auto [name, C] : {std::pair{"q", kd}, {"k", kd}, {"v", vd}}) {
    const std::string op = std::string(name) + "_conv1d";
    const int64_t n = N * C;
    if (W > 0) {
      append(fwd, launches(op, {cu::pointwise_plan("short_conv_forward_kernel", n)}, {pointwise(n, 1, 1, 2 * W)}));
      const cu::RowChunks chunks = cu::row_chunks(N, (C + 31) / 32, C * (W + 1));
      append(bwd, launches(op + " backward", cu::short_conv_backward_plans(s.B, s.T, C, W),
                           {pointwise(n, 2, 1, 2 * W), pointwise(n + chunks.count * C * W, 2, 0, 2 * W)}));
    }
    pointwise_op(fwd, op + " silu", silu, n, 1, 1, 4);
    pointwise_op(bwd, op + " silu backward", dsilu, n, 2, 1, 6);
  }
  for (auto name : {"q", "k"}) {
    append(fwd, launches(std::string("l2norm of ") + name, cu::l2norm_forward_plans(N * l.H, l.Dk),
                         {{3.0 * N * kd, kF32 * (2.0 * N * kd + N * l.H)}}));
    append(bwd, launches(std::string("l2norm of ") + name + " backward", cu::l2norm_backward_plans(N * l.H, l.Dk),
                         {{5.0 * N * kd, kF32 * (3.0 * N * kd + N * l.H)}}));
  }
  const std::string sigmoid = cu::activation_functor("ActivationForward", Activation::sigmoid);
  const std::string dsigmoid = cu::activation_functor("ActivationBackward", Activation::sigmoid);
  pointwise_op(fwd, "beta sigmoid", sigmoid, N * l.H, 1, 1, 4);
  pointwise_op(bwd, "beta sigmoid backward", dsigmoid, N * l.H, 2, 1, 3);
  linear(fwd, bwd, "a_proj", N, d, l.H, gemm_bf16, false, true);
  append(fwd, launches("decay (A_log, dt_bias)", {cu::pointwise_plan("gdn_decay_forward_kernel", N * l.H)},
                       {pointwise(N * l.H, 1, 1, 10)}));
  append(bwd, launches("decay (A_log, dt_bias) backward", cu::gdn_decay_backward_plans(N, l.H),
                       {pointwise(N * l.H, 2, 1, 12)}));
  LINATTN_CHECK(l.Dk == l.Dv, "gpu-plan: Gated DeltaNet with value heads of ", l.Dv, " and key heads of ", l.Dk,
                ": the plan models equal heads (model.expand_v: 1)");
  std::vector<Launch> mixer_bwd;
  std::vector<Launch> mixer_fwd = deltanet({s.B, s.T, l.H, l.Dk, l.chunk}, precision, mixer_bwd, "gated_deltanet");
  for (Launch& m : mixer_fwd) m.mixer = true;
  for (Launch& m : mixer_bwd) m.mixer = true;
  append(fwd, mixer_fwd);
  linear(fwd, bwd, "g_proj", N, d, vd, gemm_bf16);
  gated_norm(fwd, bwd, N * l.H, l.Dv, gemm_bf16);
  linear(fwd, bwd, "o_proj", N, vd, d, gemm_bf16);
  add_rmsnorm(fwd, bwd, "residual + mlp_norm", N, d, gemm_bf16, true);
  swiglu_mlp(fwd, bwd, N, d, I, gemm_bf16);
  append(bwd, mixer_bwd);
  // saved: the convolutions' outputs (by SiLU), q and k normed, v, beta, a_proj's output (by the
  // decay), the decay, g_proj's output (by the gated norm); gradients: a_proj's, g_proj's, o_proj's,
  // down_proj's; widened: q, k, v, beta, the decay and one more of H per token (the delta-rule
  // kernels read float32), the convolutions' outputs (SiLU's backward)
  if (gemm_bf16) {
    // without convolutions SiLU keeps the split's outputs, whose copies the split wrote
    std::vector<int64_t> saved = {N * kd, N * kd, N * vd, N * l.H, N * l.H, N * l.H, N * vd};
    if (W > 0) saved.insert(saved.end(), {N * kd, N * kd, N * vd});
    std::vector<int64_t> gradients = {N * l.H, N * vd};
    for (int64_t n : region_gradients(s, N * d)) gradients.push_back(n);
    bf16_conversions(fwd, bwd, saved, gradients,
                     {N * kd, N * kd, N * vd, N * l.H, N * l.H, N * l.H, N * kd, N * kd, N * vd});
  }
  return {d * (2 * kd + vd + l.H) + (2 * kd + vd) * W + d * l.H + 2 * l.H + d * vd + l.Dv + vd * d + 2 * d + 3 * d * I,
          {N * d, N * d},  // o_proj, down_proj
          {N * kd, N * kd, N * vd, N * l.H, N * l.H, N * vd, N * d, N * d}};
}

// A softmax attention layer: the residual and attn_norm in one pass, q, k and v as one product, RoPE
// on q and k (its backward adds into their gradients), the attention kernels (bf16 with bf16
// products), o_proj, the residual and mlp_norm in one pass, the SwiGLU MLP.
LayerPlan attention_layer(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const StepShape& s, const LayerShape& l,
                          MatmulPrecision precision) {
  const bool gemm_bf16 = precision == MatmulPrecision::bf16;
  const int64_t N = s.B * s.T, d = s.d, I = s.intermediate, qd = l.H * l.Dk, kvd = l.Hkv * l.Dk;
  add_rmsnorm(fwd, bwd, "residual + attn_norm", N, d, gemm_bf16, s.recompute == ops::Recompute::none);
  projections(fwd, bwd, "q, k, v_proj", N, d, qd + 2 * kvd, gemm_bf16);
  for (auto [name, n] : {std::pair{"q", N * qd}, {"k", N * kvd}}) {
    const std::string op = std::string("rope on ") + name;
    append(fwd, launches(op, {cu::pointwise_plan("rope_kernel<false>", n / 2)}, {pointwise(n, 1, 1, 6)}));
    append(bwd, launches(op + " backward", {cu::pointwise_plan("rope_kernel<true>", n / 2)}, {pointwise(n, 2, 1, 6)}));
  }
  std::vector<Launch> core_bwd;
  std::vector<Launch> core_fwd = attention({s.B, s.T, l.H, l.Dk}, l.window, gemm_bf16, core_bwd, l.Hkv);
  for (Launch& m : core_fwd) m.mixer = m.kept = true;
  for (Launch& m : core_bwd) m.mixer = true;
  // The bf16 attention kernels (head sizes 32, 64, 128) take bf16 q, k, v and give bf16 o, dq, dk, dv:
  // the entries convert the float32 tensors in (q, k, v; dO) and the results out (kernels/cuda/entries.cpp).
  if (gemm_bf16 && (l.Dk == 32 || l.Dk == 64 || l.Dk == 128)) {
    for (int64_t n : {N * qd, N * kvd, N * kvd}) core_fwd.insert(core_fwd.begin(), conversion("attention's input into bf16", n, true));
    core_fwd.push_back(conversion("attention's output from bf16", N * qd, false));
    for (Launch* c : {&core_fwd[0], &core_fwd[1], &core_fwd[2], &core_fwd.back()}) c->kept = true;
    core_bwd.insert(core_bwd.begin(), conversion("attention's dO into bf16", N * qd, true));
    for (int64_t n : {N * qd, N * kvd, N * kvd}) core_bwd.push_back(conversion("attention's gradient from bf16", n, false));
  }
  append(fwd, core_fwd);
  linear(fwd, bwd, "o_proj", N, qd, d, gemm_bf16);
  add_rmsnorm(fwd, bwd, "residual + mlp_norm", N, d, gemm_bf16, true);
  swiglu_mlp(fwd, bwd, N, d, I, gemm_bf16);
  append(bwd, core_bwd);
  // saved: q and k after RoPE, the output (by attention's and o_proj's nodes); gradients: down_proj's
  // across a recomputed region's edge
  if (gemm_bf16) bf16_conversions(fwd, bwd, {N * qd, N * kvd, N * qd}, region_gradients(s, N * d), {});
  return {d * (qd + 2 * kvd) + qd * d + 2 * d + 3 * d * I,
          {N * d, N * d},  // o_proj, down_proj
          {N * qd, N * kvd, N * kvd, N * qd, N * d, N * d}};
}

LayerPlan layer(std::vector<Launch>& fwd, std::vector<Launch>& bwd, const StepShape& s, const LayerShape& l,
                MatmulPrecision precision) {
  switch (l.mixer) {
    case LayerMixer::attention: return attention_layer(fwd, bwd, s, l, precision);
    case LayerMixer::gated_deltanet: return gated_deltanet_layer(fwd, bwd, s, l, precision);
    case LayerMixer::gla: break;
  }
  return gla_layer(fwd, bwd, s, l, precision);
}

// What train.recompute adds to one layer of `N` tokens whose forward is `fwd` (docs/recompute.md): the
// block is a region of one input, so its last residual add is a pass of its own; its backward
// replays the forward first (full: all of it; selective: all but the products and softmax
// attention's core, whose outputs the first run keeps). Under bf16 saving the region keeps its
// input in bf16 (rounded in the first run, widened for the replay), and selective its kept outputs.
void add_recompute(std::vector<Launch>& fwd, std::vector<Launch>& bwd, ops::Recompute mode, const LayerPlan& plan,
                   int64_t N, int64_t d, bool bf16) {
  if (mode == ops::Recompute::none) return;
  append(fwd, launches("residual add (the region's last)", {cu::elementwise_plan("Add", N * d)},
                       {pointwise(N * d, 2, 1, 1)}));
  std::vector<Launch> replay;
  if (bf16) replay.push_back(conversion("replay: region input widened", N * d, false));
  for (const Launch& l : fwd) {
    if (mode == ops::Recompute::selective && l.kept) continue;
    replay.push_back(l);
    replay.back().op = "replay: " + l.op;
    replay.back().again = true;
  }
  // the first run records nothing: what a node converts to keep is made in the replay only
  fwd.erase(std::remove_if(fwd.begin(), fwd.end(), [](const Launch& l) { return l.recording; }), fwd.end());
  if (bf16) fwd.push_back(conversion("region input kept in bf16", N * d, true));
  if (bf16 && mode == ops::Recompute::selective) {
    for (int64_t n : plan.rounded) fwd.push_back(conversion("kept product rounded to bf16", n, true));
    for (int64_t n : plan.widened) replay.push_back(conversion("replay: kept product widened", n, false));
  }
  bwd.insert(bwd.begin(), replay.begin(), replay.end());
}

// One step: the embedding, each kind of layer as often as the model has it (the first block's
// attn_norm adds nothing and the final norm adds the last block's output: one plain norm a step),
// the final RMSNorm, the LM head, cross-entropy (whose backward runs on the forward's logits); the
// backward of each (listed in an order of its own: a sum of times does not depend on it); the
// gradient norm and AdamW over every parameter. GEMMs and the mixers' products in `precision`; each
// layer's replay in the step's recompute mode (add_recompute).
Step training_step(const StepShape& s, MatmulPrecision precision) {
  const bool gemm_bf16 = precision == MatmulPrecision::bf16;
  const int64_t N = s.B * s.T, d = s.d, V = s.vocab;
  std::vector<Launch> fwd, layers_fwd, layers_bwd, head_fwd, head_bwd, rest;
  Step step;
  const std::vector<LayerShape> kinds = layer_kinds(s.layers);
  for (const LayerShape& kind : kinds) {
    const int64_t count = std::count(s.layers.begin(), s.layers.end(), kind);
    std::vector<Launch> f, b;
    const LayerPlan plan = layer(f, b, s, kind, precision);
    add_recompute(f, b, s.recompute, plan, N, d, gemm_bf16);
    step.params += count * plan.params;
    for (Launch& l : f) l.launches = count;
    for (Launch& l : b) l.launches = count;
    if (kinds.size() > 1)  // which layers the rows are of
      for (auto* part : {&f, &b})
        for (Launch& l : *part) l.op = kind.name() + ": " + l.op;
    append(layers_fwd, f);
    append(layers_bwd, b);
  }
  // the ends of the model
  append(fwd, launches("embedding", cu::embedding_forward_plans(N, d), {pointwise(N * d, 1, 1, 0)}));
  rmsnorm(head_fwd, head_bwd, "final norm", N, d, gemm_bf16);
  linear(head_fwd, head_bwd, "lm_head", N, d, V, gemm_bf16);
  // ops::linear_cross_entropy keeps no logits: seeded ahead (the trainer gives it the loss's
  // gradient), it runs its backward on each chunk's logits in the forward pass, one read of them: a
  // block per row makes the row's lse and writes its gradient as the head's products' operand (bf16
  // with bf16 products), the row read again from L2; no second product of the logits
  const double logits = double(N) * double(V);
  append(head_fwd, launches("cross-entropy and its backward", cu::cross_entropy_forward_backward_plans(N, V),
                            {{7 * logits, logits * (kF32 + (gemm_bf16 ? 2 : kF32))}, {2.0 * N, kF32 * 3 * N}}));
  step.params += V * d * (s.tied ? 1 : 2) + d;
  append(rest, head_bwd);
  std::vector<Launch> tail;
  append(tail, launches("embedding backward", {cu::embedding_backward_plan(V)},
                        {{double(N) * d, kF32 * (double(N) * d + 2.0 * V * d + N)}}));
  append(tail, launches("step loss", cu::step_loss_plans(), {{1, 8}}));
  append(tail, launches("gradient norm, clip and skip", cu::step_control_plans(step.params),
                        {pointwise(step.params, 1, 0, 2), {1024, 8 * 1024}}));
  // with bf16 products the same pass writes the weights' bf16 copy (2 bytes a parameter more)
  Cost adamw = pointwise(step.params, 4, 3, 15);
  if (gemm_bf16) adamw.bytes += 2.0 * double(step.params);
  append(tail, launches("AdamW", cu::adamw_plans(step.params), {adamw}));
  for (auto* part : {&fwd, &layers_fwd, &head_fwd, &rest, &layers_bwd, &tail}) append(step.launches, *part);
  return step;
}

// ---- the report ----

struct Row {
  const Launch* launch;
  std::string regs, spills, occupancy, waves, tensor_cores;
  cu::MathUnit unit;
  cu::Roofline roofline;  // all its launches
};

Row assess(const Launch& l, const BuildTables& t, const cu::GpuSpec& gpu, MatmulPrecision precision) {
  Row r{&l, "-", "-", "-", "-", "-", cu::MathUnit::f32, {}};
  double share = 1;
  if (!l.gemm.empty()) {  // cuBLAS: its kernels are not ours; float32 SIMT, or tf32 / bf16 tensor cores
    r.tensor_cores = precision == MatmulPrecision::bf16   ? "cuBLAS"
                     : precision == MatmulPrecision::tf32 ? "cuBLAS (tf32)"
                                                          : "no (f32)";
    r.unit = precision == MatmulPrecision::bf16   ? cu::MathUnit::bf16
             : precision == MatmulPrecision::tf32 ? cu::MathUnit::tf32
                                                  : cu::MathUnit::f32;
  } else {
    const auto res = t.resources.find(l.plan.kernel);
    const bool known = res != t.resources.end();
    const int regs = known ? res->second.registers : 0;
    const int64_t smem = l.plan.shared_bytes + (known ? res->second.static_smem : 0);
    if (known) r.regs = std::to_string(regs), r.spills = std::to_string(res->second.spill_bytes);
    const cu::Occupancy o = cu::occupancy(gpu, l.plan.block.count(), regs, smem);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f%% (%s)", 100 * o.fraction, o.limiter.c_str());
    r.occupancy = known ? buf : std::string(buf) + " w/o regs";
    std::snprintf(buf, sizeof buf, "%.2f", cu::waves(gpu, l.plan.grid.count(), o.blocks_per_sm));
    r.waves = buf;
    share = std::min(1.0, double(l.plan.grid.count()) / gpu.sms);
    const auto tc = t.tensor_core_instructions.find(l.plan.kernel);
    if (tc != t.tensor_core_instructions.end()) {
      r.tensor_cores = tc->second > 0 ? "yes (" + std::to_string(tc->second) + ")" : "no";
      if (tc->second > 0) r.unit = l.bf16 ? cu::MathUnit::bf16 : cu::MathUnit::tf32;
    }
  }
  r.roofline = cu::roofline(gpu, l.flops, l.bytes, r.unit, share);
  r.roofline.us *= double(l.launches), r.roofline.compute_us *= double(l.launches);
  r.roofline.memory_us *= double(l.launches);
  return r;
}

std::string dims(const cu::Dim& d) {
  std::string s = std::to_string(d.x);
  if (d.y > 1 || d.z > 1) s += " x " + std::to_string(d.y);
  if (d.z > 1) s += " x " + std::to_string(d.z);
  return s;
}

double print_table(const std::vector<Launch>& ls, const BuildTables& t, const cu::GpuSpec& gpu,
                   MatmulPrecision precision) {
  std::printf("| op | kernel | launches | grid | block | smem B | regs | spills B | occupancy | waves | tensor cores "
              "| GFLOP | MB | roofline us | bound |\n");
  std::printf("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|---|\n");
  double total = 0;
  for (const Launch& l : ls) {
    const Row r = assess(l, t, gpu, precision);
    const bool ours = l.gemm.empty();
    std::string smem = "-";
    if (ours) {
      const auto res = t.resources.find(l.plan.kernel);
      const int64_t static_smem = res != t.resources.end() ? res->second.static_smem : 0;
      smem = std::to_string(l.plan.shared_bytes) + (static_smem ? " + " + std::to_string(static_smem) : "");
    }
    std::string bound = r.roofline.memory_bound ? "memory" : "compute";
    if (ours && l.plan.grid.count() < gpu.sms)
      bound += ", " + std::to_string(l.plan.grid.count()) + "/" + std::to_string(gpu.sms) + " SMs";
    std::printf("| %s | %s | %ld | %s | %s | %s | %s | %s | %s | %s | %s | %.3f | %.1f | %.1f | %s (%s) |\n",
                l.op.c_str(), ours ? l.plan.kernel.c_str() : ("cuBLAS " + l.gemm).c_str(), long(l.launches),
                ours ? dims(l.plan.grid).c_str() : "-", ours ? dims(l.plan.block).c_str() : "-", smem.c_str(),
                r.regs.c_str(), r.spills.c_str(), r.occupancy.c_str(), r.waves.c_str(), r.tensor_cores.c_str(),
                l.flops * double(l.launches) / 1e9, l.bytes * double(l.launches) / 1e6, r.roofline.us,
                bound.c_str(), cu::math_unit_name(r.unit));
    total += r.roofline.us;
  }
  return total;
}

struct MixerCase {
  std::string name;
  std::vector<Launch> fwd, bwd;
  const char* fla;  // fla's measured forward + backward on an H100 (shared/design/gpu.md)
};

std::vector<MixerCase> mixer_cases(const MixerShape& m, MatmulPrecision precision) {
  std::vector<MixerCase> cases(6);
  const std::string in = std::string(" (") + matmul_precision_name(precision) + ")";
  cases[0].name = "linear attention" + in, cases[0].fwd = linear_attention(m, precision, cases[0].bwd);
  cases[0].fla = "1.72 ms (f32)";
  cases[1].name = "GLA" + in, cases[1].fwd = gla(m, precision, cases[1].bwd), cases[1].fla = "3.25 ms (f32)";
  cases[2].name = "DeltaNet" + in, cases[2].fwd = deltanet(m, precision, cases[2].bwd, "deltanet");
  cases[2].fla = "2.46 ms (bf16; f32 refused)";
  cases[3].name = "Gated DeltaNet" + in, cases[3].fwd = deltanet(m, precision, cases[3].bwd, "gated_deltanet");
  cases[3].fla = "refused on Hopper (Triton 3.6)";
  cases[4].name = "sliding-window attention W=256 (bf16)", cases[4].fwd = attention(m, 256, true, cases[4].bwd);
  cases[4].fla = "1.25 ms (bf16)";
  cases[5].name = "global attention (bf16)", cases[5].fwd = attention(m, 0, true, cases[5].bwd);
  cases[5].fla = "0.45 ms (bf16, PyTorch SDPA)";
  return cases;
}

void print_mixers(const MixerShape& m, const BuildTables& t, const cu::GpuSpec& gpu, MatmulPrecision precision,
                  bool with_fla) {
  std::printf("\n## Mixers and attention, forward + backward, B%ld T%ld H%ld D%ld (chunk %ld)\n\n", long(m.B),
              long(m.T), long(m.H), long(m.D), long(m.C));
  std::vector<MixerCase> cases = mixer_cases(m, precision);
  std::vector<Launch> all;
  for (const MixerCase& c : cases) {
    append(all, c.fwd);
    append(all, c.bwd);
  }
  print_table(all, t, gpu, precision);
  std::printf("\n| mixer | roofline estimate (sum of its launches) | sequential inter-chunk passes: FLOPs, time |%s\n",
              with_fla ? " fla measured on an H100 |" : "");
  std::printf("|---|--:|--:|%s\n", with_fla ? "--:|" : "");
  for (const MixerCase& c : cases) {
    double us = 0, flops = 0, seq_us = 0, seq_flops = 0;
    for (const auto* part : {&c.fwd, &c.bwd})
      for (const Launch& l : *part) {
        const double l_us = assess(l, t, gpu, precision).roofline.us;
        us += l_us, flops += l.flops * double(l.launches);
        if (l.sequential) seq_us += l_us, seq_flops += l.flops * double(l.launches);
      }
    std::printf("| %s | %.3f ms | ", c.name.c_str(), us / 1000);
    if (seq_flops > 0)
      std::printf("%.2f%% of the FLOPs, %.3f ms |", 100 * seq_flops / flops, seq_us / 1000);
    else
      std::printf("- |");
    if (with_fla) std::printf(" %s |", c.fla);
    std::printf("\n");
  }
}

// "10 x GLA (...), 2 x attention (...)": the step's layer kinds, in order of first appearance.
std::string layer_list(const std::vector<LayerShape>& layers) {
  std::string out;
  for (const LayerShape& k : layer_kinds(layers))
    out += (out.empty() ? "" : ", ") + std::to_string(std::count(layers.begin(), layers.end(), k)) + " x " + k.name();
  return out;
}

void print_step(const StepShape& s, const BuildTables& t, const cu::GpuSpec& gpu, MatmulPrecision precision) {
  const Step step = training_step(s, precision);
  std::printf("\n## Training step: %s\n\nB%ld T%ld, %ld layers: %s; hidden %ld, MLP %ld, vocab %ld%s: %.1fM "
              "parameters; GEMMs in %s.%s\n\n",
              s.name.c_str(), long(s.B), long(s.T), long(s.layers.size()), layer_list(s.layers).c_str(), long(s.d),
              long(s.intermediate), long(s.vocab), s.tied ? " (tied embeddings)" : "", double(step.params) / 1e6,
              precision == MatmulPrecision::bf16   ? "bf16 (cuBLAS, tensor cores)"
              : precision == MatmulPrecision::tf32 ? "tf32 (cuBLAS, tensor cores)"
                                                   : "float32 (cuBLAS, CUDA cores)",
              s.note.empty() ? "" : (" " + s.note).c_str());
  const double us = print_table(step.launches, t, gpu, precision);
  double model_flops = 0, launches = 0, gemm_us = 0, mixer_us = 0, mixer_flops = 0, seq_flops = 0, seq_us = 0;
  for (const Launch& l : step.launches) {
    if ((!l.gemm.empty() || l.mixer) && !l.again) model_flops += l.flops * double(l.launches);
    if (l.mixer) mixer_flops += l.flops * double(l.launches);
    if (l.sequential) {
      seq_flops += l.flops * double(l.launches);
      seq_us += assess(l, t, gpu, precision).roofline.us;
    }
    launches += double(l.launches);
    const double t_us = assess(l, t, gpu, precision).roofline.us;
    if (!l.gemm.empty())
      gemm_us += t_us;
    else if (l.mixer)
      mixer_us += t_us;
  }
  const double tokens = double(s.B * s.T), seconds = us * 1e-6;
  std::printf("\nStep estimate (sum of the roofline times; a lower bound): %.2f ms for %.0f kernel launches, %.0f "
              "tokens/s; of it the GEMMs %.2f ms, the mixers' and attention's kernels %.2f ms, the rest %.2f ms.\n",
              us / 1000, launches, tokens / seconds, gemm_us / 1000, mixer_us / 1000, (us - gemm_us - mixer_us) / 1000);
  std::printf("The sequential inter-chunk passes (state_pass_kernel, gate_pass_kernel) do %.2f%% of the mixers' "
              "FLOPs and take %.3f ms of their %.2f ms.\n",
              mixer_flops > 0 ? 100 * seq_flops / mixer_flops : 0.0, seq_us / 1000, mixer_us / 1000);
  std::printf("Model FLOPs (the GEMMs, and the mixers' and attention's kernels as they count them), forward + "
              "backward: %.2f TFLOP; "
              "implied MFU %.1f%% of the bf16 peak (%.0f TFLOP/s)",
              model_flops / 1e12, 100 * model_flops / seconds / (gpu.bf16_tflops * 1e12), gpu.bf16_tflops);
  if (precision == MatmulPrecision::f32)
    std::printf(", %.0f%% of the f32 peak (%.0f TFLOP/s) that its float32 GEMMs run at",
                100 * model_flops / seconds / (gpu.f32_tflops * 1e12), gpu.f32_tflops);
  std::printf(".\n");
}

// A config to plan the step of.
struct PlannedConfig {
  std::string name, path, shown;  // shown: the path as the report names it
  std::vector<std::string> overrides;
};

// A config's model at its micro-batch and recompute mode, for one rank: its GLA, Gated DeltaNet and
// attention layers as the model builds them (layers/mixers/gla.cpp, deltanet.cpp, attention.cpp).
StepShape step_of_config(const PlannedConfig& c) {
  const std::string& path = c.shown;
  const std::vector<std::string>& overrides = c.overrides;
  const Config config = load_config(c.path, overrides);
  const ModelConfig& m = config.model;
  const TrainConfig& t = config.train;
  StepShape s{c.name, t.micro_batch_size ? t.micro_batch_size : t.batch_size, config.data.seq_len, m.hidden_size,
              m.resolved_intermediate_size(), m.vocab_size, m.tie_word_embeddings, {}, ops::Recompute::none, ""};
  LINATTN_CHECK(m.mlp == Mlp::swiglu, path, ": gpu-plan models the SwiGLU MLP only (model.mlp)");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& spec = m.layers[i];
    LayerShape l;
    l.H = spec.num_heads;
    if (spec.mixer == "attention") {
      l.mixer = LayerMixer::attention;
      l.Dk = l.Dv = m.hidden_size / spec.num_heads;
      l.Hkv = spec.num_kv_heads ? spec.num_kv_heads : spec.num_heads;
      l.window = spec.window_size;
    } else {
      LINATTN_CHECK(spec.mixer == "gla" || spec.mixer == "gated_deltanet", path, ": model.layers.", i, " is ",
                    spec.mixer, "; gpu-plan models GLA, Gated DeltaNet and softmax attention layers");
      l.Dk = mixers::key_dim(m, spec) / spec.num_heads;
      l.Dv = mixers::value_dim(m, spec) / spec.num_heads;
      if (spec.mixer == "gated_deltanet") {
        const mixers::ShortConvSettings& conv = m.settings.of<mixers::ShortConvSettings>();
        l.mixer = LayerMixer::gated_deltanet;
        l.conv = conv.use_short_conv ? conv.conv_size : 0;
        l.chunk = m.chunk_size;
      }
    }
    s.layers.push_back(l);
  }
  s.note = "From " + path + (overrides.empty() ? "" : " with");
  for (const std::string& o : overrides) s.note += " " + o;
  s.recompute = t.recompute;
  s.note += "; micro-batch " + std::to_string(s.B) + ", recompute " + ops::recompute_name(t.recompute) + ".";
  return s;
}

// The configs the plan reports beside the benchmark's shape: the 85.5M model of the H200 runs
// (docs/gpu-runs/) and fla's 1.3B GLA and Gated DeltaNet shapes.
std::vector<PlannedConfig> shipped_configs(const std::string& root) {
  return {{"85.5M (configs/bench.yaml at the 85.5M shape)",
           root + "/configs/bench.yaml",
           "configs/bench.yaml",
           {"model.hidden_size=768", "model.num_hidden_layers=12", "model.num_heads=12", "data.seq_len=2048",
            "train.batch_size=8"}},
          {"1.3B GLA hybrid (configs/gla-1.3b.yaml)", root + "/configs/gla-1.3b.yaml", "configs/gla-1.3b.yaml", {}},
          {"1.3B Gated DeltaNet hybrid (configs/gdn-1.3b.yaml)", root + "/configs/gdn-1.3b.yaml",
           "configs/gdn-1.3b.yaml", {}}};
}

int run_gpu_plan(const std::string& build_dir, MatmulPrecision precision, const std::vector<PlannedConfig>& configs) {
  std::vector<StepShape> steps;
  for (const PlannedConfig& c : configs) steps.push_back(step_of_config(c));
  const cu::GpuSpec gpu = cu::h100_sxm();
  const BuildTables t = read_tables(build_dir);
  std::printf("# GPU plan: an ESTIMATE for the %s, made without a GPU\n\n", gpu.name.c_str());
  std::printf("Launch geometry from the launchers' plans (kernels/cuda/launch_plan.h); occupancy from %d SMs, %dK "
              "registers, %ld KB shared memory, %d threads and %d blocks per SM; roofline at %.0f TFLOP/s bf16, %.0f "
              "tf32, %.0f f32 and %.2f TB/s, divided by the share of the SMs a grid can fill. The times are lower "
              "bounds: no latency, launch overhead, caches or the inter-chunk pass's sequential walk.\n",
              gpu.sms, gpu.regs_per_sm / 1024, long(gpu.smem_per_sm / 1024), gpu.threads_per_sm,
              gpu.max_blocks_per_sm, gpu.bf16_tflops, gpu.tf32_tflops, gpu.f32_tflops, gpu.hbm_tb_per_s);
  if (t.have_resources)
    std::printf("Registers, static shared memory and spills: %s (sm_90).\n", t.resources_path.c_str());
  else
    std::printf("No nvcc resource report at %s (a build without nvcc): registers, spills and static shared memory "
                "are unknown ('-'), and occupancy counts threads and dynamic shared memory only. Build the kernels "
                "with nvcc (cmake -DLINATTN_CUDA=ON) and pass its build directory with --build-dir.\n",
                t.resources_path.c_str());
  if (t.have_tensor_cores)
    std::printf("Tensor-core instructions: counted in each kernel's PTX, %s.\n", t.tensor_cores_path.c_str());
  else
    std::printf("No PTX tensor-core table at %s: tensor-core use is unknown ('-'), and every kernel is costed on "
                "the f32 CUDA cores.\n", t.tensor_cores_path.c_str());
  print_mixers({4, 2048, 4, 64}, t, gpu, precision, true);
  print_step(gla_step("B4 H4 T2048 D64 (the mixer benchmark's shape)", 4, 2048, 4, 64, 4, 257, 768, false), t, gpu,
             precision);
  print_step(gla_step("125M parameters", 8, 2048, 12, 64, 12, 50257, 2048, true), t, gpu, precision);
  for (const StepShape& s : steps) print_step(s, t, gpu, precision);
  std::printf("\nWith a GPU, `linattn-bench mixers|attention|gemm --device cuda` measure what this estimates.\n");
  return 0;
}

#ifndef LINATTN_BUILD_DIR
#define LINATTN_BUILD_DIR "build"
#endif
#ifndef LINATTN_SOURCE_DIR
#define LINATTN_SOURCE_DIR "."
#endif

bool registered = add_command(
    {"gpu-plan",
     "an estimate, made without a GPU, of a training step's CUDA kernels on an H100: launch geometry, registers, "
     "occupancy, tensor cores, FLOPs, bytes, roofline time, fla's times, MFU",
     [](CLI::App& c) -> std::function<int()> {
       auto build_dir = std::make_shared<std::string>(LINATTN_BUILD_DIR);
       auto precision = std::make_shared<std::string>("f32");
       c.add_option("--build-dir", *build_dir,
                    "the nvcc build directory whose cuda-resources.md and cuda-tensor-cores.md to read (default: "
                    "this binary's build)");
       c.add_option("--precision", *precision,
                    "the operands of the GEMMs and of the linear mixers' intra-chunk products, as training sets "
                    "them: f32 (CUDA cores; the default), tf32 (train.tf32) or bf16 (train.precision: bf16), both "
                    "on the tensor cores")
           ->type_name("f32|tf32|bf16")
           ->check(cli::one_of({"f32", "tf32", "bf16"}));
       auto configs = std::make_shared<std::vector<std::string>>();
       c.add_option("--config", *configs,
                    "model configs whose training step to plan (at their micro-batch), in place of the shipped ones "
                    "(configs/bench.yaml at the 85.5M shape, configs/gla-1.3b.yaml, configs/gdn-1.3b.yaml), in their "
                    "train.recompute mode; GLA, Gated DeltaNet and attention layers")
           ->type_name("FILE ...");
       return [build_dir, precision, configs] {
         std::vector<PlannedConfig> planned;
         for (const std::string& path : *configs) planned.push_back({path, path, path, {}});
         if (configs->empty()) planned = shipped_configs(LINATTN_SOURCE_DIR);
         return run_gpu_plan(*build_dir,
                             *precision == "bf16"   ? MatmulPrecision::bf16
                             : *precision == "tf32" ? MatmulPrecision::tf32
                                                    : MatmulPrecision::f32,
                             planned);
       };
     }});

}  // namespace

}  // namespace linattn::bench
