#include "kernels/cuda/launch_plan.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cuda/attention_layout.h"
#include "kernels/sequences.h"
#include "kernels/cuda/chunk_layout.h"
#include "kernels/cuda/deltanet_block.h"

namespace linattn::cuda {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

LaunchPlan pointwise_plan(const std::string& kernel, int64_t n) {
  return {kernel, {ceil_div(n, kPointwiseThreads)}, {kPointwiseThreads}, 0};
}

LaunchPlan elementwise_plan(const std::string& functor, int64_t n) {
  return pointwise_plan("pointwise_kernel<" + functor + ">", n);
}

std::string activation_functor(const std::string& functor, Activation f) {
  return functor + "<(Activation)" + std::to_string(int(f)) + ">";
}

// ---- column sums ----

RowChunks row_chunks(int64_t rows, int64_t tiles, int64_t columns) {
  LINATTN_CHECK(columns <= kColumnPartials, "cuda: ", columns, " columns is more than the column-sum buffer holds (",
                kColumnPartials, ")");
  int64_t count = std::min({512 / std::max<int64_t>(tiles, 1), (rows + 255) / 256,
                            kColumnPartials / std::max<int64_t>(columns, 1)});
  count = std::max<int64_t>(count, 1);
  const int64_t per_chunk = std::max<int64_t>((rows + count - 1) / count, 1);
  return {per_chunk, std::max<int64_t>((rows + per_chunk - 1) / per_chunk, 1)};  // no rows: one chunk of zeros
}

LaunchPlan column_sums_plan(const std::string& kernel, int64_t tiled_columns, const RowChunks& chunks) {
  return {kernel, {ceil_div(tiled_columns, 32), chunks.count}, {32, kColumnLanes}, 0};
}

// ---- norms ----

LaunchPlan norm_rows_plan(const std::string& kernel, int64_t N) {
  return {kernel, {ceil_div(N, kNormRows)}, {kNormRows * 32}, 0};
}

LaunchPlans rmsnorm_forward_plans(int64_t N, int64_t D, int64_t G) {
  if (N == 0) return {};
  return {norm_rows_plan("rmsnorm_forward_kernel", N * G)};  // a warp per group of a row
}

LaunchPlans rmsnorm_backward_plans(int64_t N, int64_t D, bool weight_grad, int64_t G) {
  if (N == 0 || D == 0) return {};
  // dw's (32-column tiles) x (row chunks) blocks, then dx's blocks of kColumnLanes rows, a warp each.
  const int64_t dw_blocks = weight_grad ? ceil_div(D, 32) * row_chunks(N, ceil_div(D, 32), D).count : 0;
  return {{"rmsnorm_backward_kernel", {dw_blocks + ceil_div(N * G, kColumnLanes)}, {32, kColumnLanes}, 0}};
}

LaunchPlans rmsnorm_gate_forward_plans(int64_t R, int64_t D) {
  if (R == 0) return {};
  return {norm_rows_plan("rmsnorm_gate_forward_kernel", R)};
}

LaunchPlans rmsnorm_gate_backward_plans(int64_t R, int64_t D, bool weight_grad) {
  if (R == 0 || D == 0) return {};
  const int64_t dw_blocks = weight_grad ? ceil_div(D, 32) * row_chunks(R, ceil_div(D, 32), D).count : 0;
  return {{"rmsnorm_gate_backward_kernel", {dw_blocks + ceil_div(R, kColumnLanes)}, {32, kColumnLanes}, 0}};
}

LaunchPlans l2norm_forward_plans(int64_t N, int64_t D) {
  if (N == 0) return {};
  return {norm_rows_plan("l2norm_forward_kernel", N)};
}

LaunchPlans l2norm_backward_plans(int64_t N, int64_t D) {
  if (N == 0) return {};
  return {norm_rows_plan("l2norm_backward_kernel", N)};
}

// ---- cross-entropy ----

LaunchPlans cross_entropy_forward_plans(int64_t N, int64_t V) {
  LaunchPlans plans;
  if (N > 0 && V > 0) plans.push_back({"lse_kernel", {N}, {kCrossEntropyRowThreads}, 0});
  plans.push_back({"loss_sum_kernel", {1}, {kCrossEntropySumThreads}, 0});
  return plans;
}

LaunchPlans cross_entropy_forward_backward_plans(int64_t N, int64_t V) {
  LaunchPlans plans;
  if (N > 0 && V > 0) plans.push_back({"lse_gradient_kernel", {N}, {kCrossEntropyRowThreads}, 0});
  plans.push_back({"loss_sum_kernel", {1}, {kCrossEntropySumThreads}, 0});
  return plans;
}

LaunchPlans cross_entropy_backward_plans(int64_t N, int64_t V) {
  if (N * V == 0) return {};
  return {pointwise_plan("cross_entropy_backward_kernel", N * V)};
}

// ---- optimizer ----

LaunchPlans sum_squares_plans(int64_t n) {
  const int64_t blocks = std::min<int64_t>(ceil_div(n, kSumSquaresThreads), kSumSquaresPartials);
  LaunchPlans plans;
  if (blocks > 0) plans.push_back({"sum_squares_partial_kernel", {blocks}, {kSumSquaresThreads}, 0});
  plans.push_back({"sum_squares_final_kernel", {1}, {kSumSquaresPartials}, 0});
  return plans;
}

LaunchPlans step_loss_plans() { return {{"step_loss_kernel", {1}, {1}, 0}}; }

LaunchPlans step_control_plans(int64_t n) {
  LaunchPlans plans = sum_squares_plans(n);
  plans.back().kernel = "step_control_kernel";
  return plans;
}

LaunchPlans adamw_plans(int64_t n) {
  if (n == 0) return {};
  return {pointwise_plan("adamw_kernel", n)};
}

// ---- embedding ----

LaunchPlans embedding_forward_plans(int64_t N, int64_t D) {
  if (N * D == 0) return {};
  return {pointwise_plan("embedding_forward_kernel", N * D)};
}

// At most 1024 blocks: each reads all N ids (from L2), so more blocks cost more than they help.
int64_t embedding_backward_rows_per_block(int64_t V) { return ceil_div(V, 1024); }

LaunchPlan embedding_backward_plan(int64_t V) {
  return {"embedding_backward_kernel", {ceil_div(V, embedding_backward_rows_per_block(V))}, {kPointwiseThreads}, 0};
}

// ---- bias, short convolution, Gated DeltaNet's decay ----

LaunchPlans bias_backward_plans(int64_t N, int64_t out) {
  if (out == 0) return {};
  const RowChunks chunks = row_chunks(N, ceil_div(out, 32), out);
  return {column_sums_plan("bias_backward_kernel", out, chunks)};
}

LaunchPlans bias_activation_forward_plans(Activation f, int64_t N, int64_t out) {
  if (N * out == 0) return {};
  return {pointwise_plan(activation_functor("bias_activation_forward_kernel", f), N * out)};
}

LaunchPlans bias_activation_backward_plans(Activation f, int64_t N, int64_t out) {
  if (out == 0) return {};
  const RowChunks chunks = row_chunks(N, ceil_div(out, 32), out);
  return {column_sums_plan(activation_functor("bias_activation_backward_kernel", f), out, chunks)};
}

LaunchPlans short_conv_backward_plans(int64_t B, int64_t T, int64_t C, int64_t W) {
  const int64_t n = B * T * C;
  if (n == 0) return {};
  const RowChunks chunks = row_chunks(B * T, ceil_div(C, 32), C * (W + 1));
  return {pointwise_plan("short_conv_dx_kernel", n), column_sums_plan("short_conv_dw_kernel", C, chunks)};
}

LaunchPlans gdn_decay_backward_plans(int64_t rows, int64_t H) {
  if (H == 0) return {};
  const RowChunks chunks = row_chunks(rows, ceil_div(H, 32), 2 * H);
  return {column_sums_plan("gdn_decay_backward_kernel", H, chunks)};
}

// ---- attention ----

int64_t attention_forward_smem_bytes(int64_t dk, int64_t dv) {
  const int64_t BQ = kAttentionBQ, BK = kAttentionBK;
  return int64_t(sizeof(float)) * (BQ * (dk + 1) + BK * (dk + 1) + BK * (dv + 1) + BQ * (BK + 1) + 3 * BQ);
}

int64_t attention_backward_smem_bytes(int64_t dk, int64_t dv) {
  const int64_t BQB = kAttentionBQB, BK = kAttentionBK;
  return int64_t(sizeof(float)) * ((BK + BQB) * (dk + 1 + dv + 1) + 2 * BQB * (BK + 1) + 2 * BQB);
}

bool attention_uses_tensor_cores(bool bf16, int64_t dk, int64_t dv) {
  return bf16 && dk == dv && (dk == 32 || dk == 64 || dk == 128);
}

int64_t attention_tc_smem_bytes(int64_t d) { return int64_t(tc_attention::TcLayout(int(d), int(d)).total); }

namespace {

// The CUDA-core kernels are built for head sizes up to 64 and up to 128.
std::string attention_kernel(const char* name, bool bf16, int64_t dk, int64_t dv) {
  return std::string(name) + (bf16 ? "<__nv_bfloat16," : "<float,") + (std::max(dk, dv) <= 64 ? "64>" : "128>");
}
std::string attention_tc_kernel(const char* name, int64_t d) {
  return std::string(name) + "<" + std::to_string(d) + "," + std::to_string(d) + ">";
}

}  // namespace

namespace {
// The tile indices of a [B, T] batch of `sequences` documents (kernels/sequences.h).
int64_t tiles(int64_t B, int64_t T, int64_t sequences, int64_t tile) {
  return tile_count(Sequences{nullptr, sequences}, B, T, tile);
}
}  // namespace

LaunchPlans attention_forward_plans(bool bf16, int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv,
                                    int64_t sequences) {
  if (B == 0 || T == 0) return {};
  if (attention_uses_tensor_cores(bf16, dk, dv))
    return {{attention_tc_kernel("tc_forward_kernel", dk), {tiles(B, T, sequences, kAttentionTB), H},
             {tc_attention::kTcThreads}, attention_tc_smem_bytes(dk)}};
  return {{attention_kernel("forward_kernel", bf16, dk, dv), {tiles(B, T, sequences, kAttentionBQ), H},
           {kAttentionThreads}, attention_forward_smem_bytes(dk, dv)}};
}

LaunchPlans attention_backward_plans(bool bf16, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk, int64_t dv,
                                     int64_t sequences) {
  if (B == 0 || T == 0) return {};
  // D = rowsum(dO * O): one warp per (b, t, h)
  LaunchPlans plans{{std::string("rowdot_kernel<") + (bf16 ? "__nv_bfloat16>" : "float>"),
                     {ceil_div(B * T * H * 32, kAttentionThreads)}, {kAttentionThreads}, 0}};
  if (attention_uses_tensor_cores(bf16, dk, dv)) {
    const int64_t smem = attention_tc_smem_bytes(dk);
    plans.push_back({attention_tc_kernel("tc_backward_dkdv_kernel", dk), {tiles(B, T, sequences, kAttentionTB), Hkv},
                     {tc_attention::kTcThreads}, smem});
    plans.push_back({attention_tc_kernel("tc_backward_dq_kernel", dk), {tiles(B, T, sequences, kAttentionTB), H},
                     {tc_attention::kTcThreads}, smem});
    return plans;
  }
  const int64_t smem = attention_backward_smem_bytes(dk, dv);
  plans.push_back({attention_kernel("backward_dkdv_kernel", bf16, dk, dv), {tiles(B, T, sequences, kAttentionBK), Hkv},
                   {kAttentionThreads}, smem});
  plans.push_back({attention_kernel("backward_dq_kernel", bf16, dk, dv), {tiles(B, T, sequences, kAttentionBQB), H},
                   {kAttentionThreads}, smem});
  return plans;
}

// ---- the linear mixers' chunk-parallel passes ----

namespace {

int64_t tiles_of(int64_t columns) { return ceil_div(columns, chunk::kTileCols); }
std::string templated(const char* kernel, bool flag) {
  return std::string("chunk::") + kernel + (flag ? "<true>" : "<false>");
}
// "chunk::chunk_state_kernel<false,(MatmulPrecision)2>": nvcc's report names an enum argument by its value.
std::string templated(const char* kernel, const char* flag, MatmulPrecision precision) {
  return std::string("chunk::") + kernel + "<" + flag + "(MatmulPrecision)" + std::to_string(int(precision)) + ">";
}
// The dynamic shared memory of an intra-chunk kernel: float32 words on the CUDA cores, else the
// tensor-core layout's bytes for 2-byte (bf16) or 4-byte (tf32) operands.
int64_t chunk_shared_bytes(MatmulPrecision precision, int f32_words, int (*tc_bytes)(int)) {
  if (precision == MatmulPrecision::f32) return int64_t(f32_words) * int64_t(sizeof(float));
  return tc_bytes(precision == MatmulPrecision::bf16 ? 2 : 4);
}

}  // namespace

LaunchPlan chunk_tile_plan(const std::string& kernel, int64_t B, int64_t T, int64_t H, int64_t tiles,
                           int64_t shared_bytes, int64_t sequences) {
  return {kernel, {tile_count({nullptr, sequences}, B, T, chunk::kChunk), tiles, H}, {chunk::kThreads}, shared_bytes};
}

LaunchPlan chunk_state_plan(bool backward, int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t W,
                            MatmulPrecision precision, int64_t sequences) {
  return chunk_tile_plan(templated("chunk_state_kernel", backward ? "true," : "false,", precision), B, T, H,
                         tiles_of(Dk) * tiles_of(W),
                         chunk_shared_bytes(precision, chunk::kStateWords, [](int b) { return chunk::tc_state_bytes(b); }),
                         sequences);
}

LaunchPlan state_pass_plan(bool reverse, int64_t B, int64_t H, int64_t Dk, int64_t W, int64_t sequences) {
  return pointwise_plan(templated("state_pass_kernel", reverse), (sequences ? sequences : B) * H * Dk * W);
}

LaunchPlan chunk_apply_plan(bool transposed, int64_t B, int64_t T, int64_t H, int64_t W, MatmulPrecision precision,
                            int64_t sequences) {
  return chunk_tile_plan(templated("chunk_apply_kernel", transposed ? "true," : "false,", precision), B, T, H,
                         tiles_of(W),
                         chunk_shared_bytes(precision, chunk::kApplyWords, [](int b) { return chunk::tc_apply_bytes(b); }),
                         sequences);
}

LaunchPlan chunk_dqk_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, MatmulPrecision precision, int64_t sequences) {
  return chunk_tile_plan(templated("chunk_dqk_kernel", "", precision), B, T, H, tiles_of(Dk),
                         chunk_shared_bytes(precision, chunk::kQkWords, [](int b) { return chunk::tc_qk_bytes(b); }),
                         sequences);
}

LaunchPlan gate_cumsum_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t sequences) {
  return chunk_tile_plan("chunk::gate_cumsum_kernel", B, T, H, tiles_of(Dk), 0, sequences);
}
LaunchPlan gate_pass_plan(int64_t B, int64_t H, int64_t Dk, int64_t sequences) {
  return pointwise_plan("chunk::gate_pass_kernel", (sequences ? sequences : B) * H * Dk);
}
LaunchPlan gate_offset_plan(int64_t B, int64_t T, int64_t H, int64_t Dk) {
  return pointwise_plan("chunk::gate_offset_kernel", B * T * H * Dk);
}
LaunchPlan append_column_plan(int64_t rows, int64_t W) {
  return pointwise_plan("chunk::append_column_kernel", rows * (W + 1));
}
LaunchPlan normalized_output_plan(int64_t rows, int64_t Dv) {
  return pointwise_plan("chunk::normalized_output_kernel", rows * Dv);
}
LaunchPlan normalized_grad_plan(int64_t rows, int64_t Dv) {
  return pointwise_plan("chunk::normalized_grad_kernel", rows * (Dv + 1));
}
LaunchPlan state_out_plan(int64_t B, int64_t H, int64_t Dk, int64_t W, int64_t sequences) {
  return pointwise_plan("chunk::state_out_kernel", (sequences ? sequences : B) * H * Dk * W);
}

namespace {

// chunk_gla.h's passes as their launchers launch them (the same early returns), over W value columns.
struct Passes {
  int64_t B, T, H, Dk, W;
  LaunchPlans plans;
  MatmulPrecision precision = MatmulPrecision::f32;
  int64_t sequences = 0;

  bool empty() const { return B * H == 0 || T == 0 || Dk == 0 || W == 0; }
  void gate_cumsum() {
    if (!empty()) plans.push_back(gate_cumsum_plan(B, T, H, Dk, sequences));
  }
  void states(bool backward) {  // forward_states, backward_states
    if (B * H * Dk * W == 0) return;
    if (T > 0) plans.push_back(chunk_state_plan(backward, B, T, H, Dk, W, precision, sequences));
    plans.push_back(state_pass_plan(backward, B, H, Dk, W, sequences));
  }
  void apply(bool transposed) {  // output, grad_v
    if (!empty()) plans.push_back(chunk_apply_plan(transposed, B, T, H, W, precision, sequences));
  }
  void grad_qk() {
    if (!empty()) plans.push_back(chunk_dqk_plan(B, T, H, Dk, precision, sequences));
  }
  void gate_grad_finish() {
    if (empty()) return;
    plans.push_back(gate_pass_plan(B, H, Dk, sequences));
    plans.push_back(gate_offset_plan(B, T, H, Dk));
  }
  void state_out(bool wanted) {
    if (wanted && B * H * Dk * W > 0) plans.push_back(state_out_plan(B, H, Dk, W, sequences));
  }
  void append_column(int64_t rows, int64_t columns) {
    if (rows > 0) plans.push_back(append_column_plan(rows, columns));
  }
};

}  // namespace

LaunchPlans linear_attention_forward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, bool normalize,
                                           MixerStates states, MatmulPrecision precision, int64_t sequences) {
  const int64_t rows = B * T * H;
  Passes p{B, T, H, Dk, normalize ? Dv + 1 : Dv, {}, precision, sequences};
  if (normalize) {
    p.append_column(rows, Dv);                         // [v | 1]
    if (states.initial) p.append_column(B * H * Dk, Dv);  // [h0 | z0]
  }
  p.states(false);
  p.apply(false);
  if (normalize && rows * Dv > 0) p.plans.push_back(normalized_output_plan(rows, Dv));
  p.state_out(states.final);
  return p.plans;
}

LaunchPlans linear_attention_backward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, bool normalize,
                                            MixerStates states, MatmulPrecision precision, int64_t sequences) {
  const int64_t rows = B * T * H;
  Passes p{B, T, H, Dk, normalize ? Dv + 1 : Dv, {}, precision, sequences};
  if (normalize) {
    Passes ones{B, T, H, Dk, 1, {}, precision, sequences};
    ones.append_column(1, 0);  // the column of ones
    ones.states(false);        // the denominator again
    ones.apply(false);
    p.plans = ones.plans;
    p.append_column(rows, Dv);  // [v | 1]
    if (rows > 0) p.plans.push_back(normalized_grad_plan(rows, Dv));
    if (states.initial) p.append_column(B * H * Dk, Dv);  // [h0 | z0]
    if (states.final) p.append_column(B * H * Dk, Dv);    // [dht | dzt]
  }
  p.states(false);
  p.states(true);
  p.apply(true);
  p.grad_qk();
  p.state_out(states.initial);
  return p.plans;
}

LaunchPlans gla_forward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, MixerStates states,
                              MatmulPrecision precision, int64_t sequences) {
  Passes p{B, T, H, Dk, Dv, {}, precision, sequences};
  p.gate_cumsum();
  p.states(false);
  p.apply(false);
  p.state_out(states.final);
  return p.plans;
}

LaunchPlans gla_backward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, MixerStates states,
                               MatmulPrecision precision, int64_t sequences) {
  Passes p{B, T, H, Dk, Dv, {}, precision, sequences};
  p.gate_cumsum();
  p.states(false);
  p.states(true);
  p.apply(true);
  p.grad_qk();
  p.gate_grad_finish();
  p.state_out(states.initial);
  return p.plans;
}

// ---- Mamba2: GLA's passes between its own pointwise kernels ----

LaunchPlan mamba2_time_step_backward_plan(int64_t rows, int64_t H) {
  return column_sums_plan("mamba2_time_step_backward_kernel", H, row_chunks(rows, ceil_div(H, 32), 2 * H));
}

LaunchPlans mamba2_forward_plans(int64_t B, int64_t T, int64_t H, int64_t N, int64_t P, MixerStates states,
                                 MatmulPrecision precision, int64_t sequences) {
  const int64_t heads = B * T * H;
  LaunchPlans plans;
  if (heads > 0) plans.push_back(pointwise_plan("mamba2_inputs_kernel", heads * (N + P)));
  for (const LaunchPlan& p : gla_forward_plans(B, T, H, N, P, states, precision, sequences)) plans.push_back(p);
  if (heads * P > 0) plans.push_back(pointwise_plan("mamba2_skip_kernel", heads * P));
  return plans;
}

LaunchPlans mamba2_backward_plans(int64_t B, int64_t T, int64_t H, int64_t G, int64_t N, int64_t P, MixerStates states,
                                  MatmulPrecision precision, int64_t sequences) {
  const int64_t heads = B * T * H;
  LaunchPlans plans;
  if (heads > 0) plans.push_back(pointwise_plan("mamba2_inputs_kernel", heads * (N + P)));
  for (const LaunchPlan& p : gla_backward_plans(B, T, H, N, P, states, precision, sequences)) plans.push_back(p);
  if (H > 0) plans.push_back(mamba2_time_step_backward_plan(B * T, H));
  if (B * T * G * N > 0) plans.push_back(pointwise_plan("mamba2_group_sums_kernel", B * T * G * N));
  return plans;
}

// ---- DeltaNet and Gated DeltaNet ----

LaunchPlans deltanet_forward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk,
                                   MatmulPrecision precision, int64_t sequences) {
  const delta::Dims d{B, T, H, Dk, Dv, chunk, {nullptr, sequences}};
  const int64_t gates = delta::gates_shared(d) * int64_t(sizeof(float));
  const LaunchPlan states{"chunk_states_kernel", {delta::state_tiles(d), d.sequences() * H}, {kDeltaNetHeadThreads},
                          gates};
  if (d.chunks() == 0) return {states};
  const int64_t factors = precision == MatmulPrecision::f32
                              ? delta::factors_shared(d) * int64_t(sizeof(float))
                              : delta::factors_tc_shared_bytes(d, precision == MatmulPrecision::bf16 ? 2 : 4);
  const int64_t outputs = precision == MatmulPrecision::f32
                              ? gates
                              : delta::outputs_tc_shared_bytes(d, precision == MatmulPrecision::bf16 ? 2 : 4);
  // float32: "chunk_factors_kernel"; bf16 "chunk_factors_tc_kernel<(MatmulPrecision)2>", as nvcc's
  // report names the instantiation
  const std::string tc = precision == MatmulPrecision::f32
                             ? "_kernel"
                             : "_tc_kernel<(MatmulPrecision)" + std::to_string(int(precision)) + ">";
  return {{"chunk_factors" + tc, {d.tiles(), H}, {kDeltaNetHeadThreads}, factors},
          states,
          {"chunk_outputs" + tc, {d.tiles(), H}, {kDeltaNetHeadThreads}, outputs}};
}

LaunchPlans deltanet_backward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk,
                                    MatmulPrecision precision, int64_t sequences) {
  const delta::Dims d{B, T, H, Dk, Dv, chunk, {nullptr, sequences}};
  const int64_t f = int64_t(sizeof(float));
  const LaunchPlan states{"chunk_backward_states_kernel", {delta::state_tiles(d), d.sequences() * H},
                          {kDeltaNetHeadThreads}, delta::backward_states_shared(d) * f};
  if (d.chunks() == 0) return {states};
  const MatmulPrecision used = delta::backward_precision(d, precision);
  if (used == MatmulPrecision::f32)
    return {{"chunk_backward_inputs_kernel", {d.tiles(), H}, {kDeltaNetHeadThreads},
             delta::backward_inputs_shared(d) * f},
            states,
            {"chunk_backward_grads_kernel", {d.tiles(), H}, {kDeltaNetHeadThreads},
             delta::backward_grads_shared(d) * f}};
  const int bytes = used == MatmulPrecision::bf16 ? 2 : 4;
  const std::string tc = "_tc_kernel<(MatmulPrecision)" + std::to_string(int(used)) + ">";
  return {{"chunk_backward_inputs" + tc, {d.tiles(), H}, {kDeltaNetHeadThreads},
           delta::backward_inputs_tc_shared_bytes(d, bytes)},
          states,
          {"chunk_backward_grads" + tc, {d.tiles(), H}, {kDeltaNetHeadThreads},
           delta::backward_grads_tc_shared_bytes(d, bytes)}};
}

LaunchPlan deltanet_recurrent_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t sequences) {
  const delta::Dims d{B, T, H, Dk, Dv, 1, {nullptr, sequences}};
  return {"recurrent_forward_kernel", {d.sequences() * H}, {kDeltaNetHeadThreads},
          delta::recurrent_shared(d) * int64_t(sizeof(float))};
}

}  // namespace linattn::cuda
