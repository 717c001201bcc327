// The launch geometry of every CUDA kernel: for given sizes, which kernels a launcher starts, in
// order, with what grid, block and dynamic shared memory. The launchers in kernels/cuda/*.cu launch
// exactly these plans (LINATTN_LAUNCH_PLAN, launch.cuh), and `linattn-bench gpu-plan` reads them to
// estimate a training step on an H100 without one; tests/cuda/launch_plan_test.cpp records the
// launches of each launcher under the emulation and checks them against its plan.
//
// Plain host code: no CUDA header, built in every build (the CPU-only one too). A plan's kernel is
// named as nvcc's resource report names it (cmake/cuda_resources.sh: namespaces dropped, template
// arguments without spaces), so that the report can find its registers and shared memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_types.h"

namespace linattn::cuda {

struct Dim {
  int64_t x = 1, y = 1, z = 1;
  int64_t count() const { return x * y * z; }
};

struct LaunchPlan {
  std::string kernel;
  Dim grid, block;
  int64_t shared_bytes = 0;  // dynamic shared memory per block
};
using LaunchPlans = std::vector<LaunchPlan>;

// ---- pointwise kernels (common.cuh): one thread per element ----
inline constexpr int kPointwiseThreads = 256;
LaunchPlan pointwise_plan(const std::string& kernel, int64_t n);

// ---- elementwise.cu: pointwise_kernel<F> for the functor F ("Add", "SwigluForward", ...) ----
LaunchPlan elementwise_plan(const std::string& functor, int64_t n);
// An activation's functor as nvcc's report names it: "ActivationForward<(Activation)0>" for silu.
std::string activation_functor(const std::string& functor, Activation f);

// ---- deterministic column sums (column_sums.cuh) ----
// Per-chunk partial sums of a [rows, columns] reduction live in a device buffer of this many floats.
inline constexpr int64_t kColumnPartials = int64_t(1) << 18;
inline constexpr int kColumnLanes = 16;  // row lanes of a column-sum block (32 columns x 16 lanes)
struct RowChunks {
  int64_t rows;   // rows per chunk
  int64_t count;  // chunks
};
// About 512 blocks over the GPU, chunks of ~256 rows or more, the partial sums within the buffer.
// tiles: the blocks of one chunk.
RowChunks row_chunks(int64_t rows, int64_t tiles, int64_t columns);
// A (32-column tiles of `tiled_columns`) x (row chunks) grid of 32 x kColumnLanes threads.
LaunchPlan column_sums_plan(const std::string& kernel, int64_t tiled_columns, const RowChunks& chunks);

// ---- norm.cu: one warp per row (rmsnorm: per group of G in a row), kNormRows rows per block ----
inline constexpr int kNormRows = 8;
LaunchPlan norm_rows_plan(const std::string& kernel, int64_t N);
LaunchPlans rmsnorm_forward_plans(int64_t N, int64_t D, int64_t G = 1);
LaunchPlans rmsnorm_backward_plans(int64_t N, int64_t D, bool weight_grad, int64_t G = 1);
LaunchPlans rmsnorm_gate_forward_plans(int64_t R, int64_t D);
LaunchPlans rmsnorm_gate_backward_plans(int64_t R, int64_t D, bool weight_grad);
LaunchPlans l2norm_forward_plans(int64_t N, int64_t D);
LaunchPlans l2norm_backward_plans(int64_t N, int64_t D);

// ---- cross_entropy.cu: a block per row for its log-sum-exp, one block for the loss sum ----
inline constexpr int kCrossEntropyRowThreads = 512;
inline constexpr int kCrossEntropySumThreads = 1024;
LaunchPlans cross_entropy_forward_plans(int64_t N, int64_t V);
LaunchPlans cross_entropy_backward_plans(int64_t N, int64_t V);
// the forward's, its row kernel writing dlogits too
LaunchPlans cross_entropy_forward_backward_plans(int64_t N, int64_t V);

// ---- optimizer.cu ----
inline constexpr int kSumSquaresThreads = 512;
inline constexpr int kSumSquaresPartials = 1024;  // at most this many partial sums (and blocks)
LaunchPlans sum_squares_plans(int64_t n);
LaunchPlans step_loss_plans();  // one thread
LaunchPlans step_control_plans(int64_t n);  // sum_squares' first pass, then one block
LaunchPlans adamw_plans(int64_t n);  // one launch over the whole flat buffer

// ---- embedding.cu ----
LaunchPlans embedding_forward_plans(int64_t N, int64_t D);
LaunchPlan embedding_backward_plan(int64_t V);  // block b owns rows_per_block(V) table rows
int64_t embedding_backward_rows_per_block(int64_t V);

// ---- bias.cu, conv.cu, gdn_decay.cu, rope.cu: pointwise passes and column sums ----
LaunchPlans bias_backward_plans(int64_t N, int64_t out);
LaunchPlans bias_activation_forward_plans(Activation f, int64_t N, int64_t out);   // one pointwise pass
LaunchPlans bias_activation_backward_plans(Activation f, int64_t N, int64_t out);  // bias_backward's blocks
LaunchPlans short_conv_backward_plans(int64_t B, int64_t T, int64_t C, int64_t W);
LaunchPlans gdn_decay_backward_plans(int64_t rows, int64_t H);

// ---- attention.cu ----
inline constexpr int kAttentionThreads = 256;  // the CUDA-core kernels: 16 x 16 threads
inline constexpr int kAttentionBQ = 64;        // forward: queries per block
inline constexpr int kAttentionBK = 64;        // keys per block, forward and backward
inline constexpr int kAttentionBQB = 32;       // backward: queries per step
inline constexpr int kAttentionTcWarps = 4;    // the tensor-core kernels: 4 warps,
inline constexpr int kAttentionTB = 16 * kAttentionTcWarps;  // 64-row tiles of queries and keys
// Dynamic shared memory of the CUDA-core kernels (attention.cu says what it holds).
int64_t attention_forward_smem_bytes(int64_t dk, int64_t dv);
int64_t attention_backward_smem_bytes(int64_t dk, int64_t dv);
// bf16 on tensor cores: only for dk = dv in {32, 64, 128}.
bool attention_uses_tensor_cores(bool bf16, int64_t dk, int64_t dv);
int64_t attention_tc_smem_bytes(int64_t d);  // attention_layout.h's TcLayout(d, d).total
// sequences: the documents of the batch (Sequences::count; 0 = the B rows). The grid's x runs over
// the tile indices of kernels/sequences.h (at most one idle per document), y over the heads.
LaunchPlans attention_forward_plans(bool bf16, int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv,
                                    int64_t sequences = 0);
LaunchPlans attention_backward_plans(bool bf16, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk, int64_t dv,
                                     int64_t sequences = 0);

// ---- the linear mixers' chunk-parallel passes (chunk_gla.h): chunks of chunk::kChunk tokens ----
// sequences: the documents of the batch (Sequences::count; 0 = the B rows), as for attention.
// The intra-chunk kernels: a block of chunk::kThreads per (chunk, 64-column tile, head), x running
// over the tile indices of kernels/sequences.h (a chunk of one sequence; at most one idle per
// document). `tiles`: the blocks of one chunk; shared_bytes: the kernel's chunk_layout.h size.
LaunchPlan chunk_tile_plan(const std::string& kernel, int64_t B, int64_t T, int64_t H, int64_t tiles,
                           int64_t shared_bytes, int64_t sequences = 0);
// The three take the precision of their products (the kernels' template argument): f32 on the CUDA
// cores, bf16 or tf32 on the tensor cores, with their own shared memory (chunk_layout.h).
// The chunk's contribution to the state, U_c (forward) or W_c (backward): (Dk tiles) x (W tiles) per chunk.
LaunchPlan chunk_state_plan(bool backward, int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t W,
                            MatmulPrecision precision = MatmulPrecision::f32, int64_t sequences = 0);
// The sequential inter-chunk pass, its own kernel: one thread per state entry of [sequences, H, Dk, W].
LaunchPlan state_pass_plan(bool reverse, int64_t B, int64_t H, int64_t Dk, int64_t W, int64_t sequences = 0);
// The outputs (forward) or dv (transposed): W tiles per chunk.
LaunchPlan chunk_apply_plan(bool transposed, int64_t B, int64_t T, int64_t H, int64_t W,
                            MatmulPrecision precision = MatmulPrecision::f32, int64_t sequences = 0);
// dq, dk and GLA's in-chunk gate gradient: Dk tiles per chunk.
LaunchPlan chunk_dqk_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, MatmulPrecision precision = MatmulPrecision::f32,
                          int64_t sequences = 0);
// The gates' in-chunk cumulative sums: Dk tiles per chunk, a thread per (sub-chunk, key column).
LaunchPlan gate_cumsum_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t sequences = 0);
// The pointwise passes, one thread per element: GLA's sequential gate pass over the chunk totals
// (one thread per (sequence, h, key column)) and its offsets, [x | column], the normalized output and
// its gradient, the rows' states out (a thread per sequence's).
LaunchPlan gate_pass_plan(int64_t B, int64_t H, int64_t Dk, int64_t sequences = 0);
LaunchPlan gate_offset_plan(int64_t B, int64_t T, int64_t H, int64_t Dk);
LaunchPlan append_column_plan(int64_t rows, int64_t W);
LaunchPlan normalized_output_plan(int64_t rows, int64_t Dv);
LaunchPlan normalized_grad_plan(int64_t rows, int64_t Dv);
LaunchPlan state_out_plan(int64_t B, int64_t H, int64_t Dk, int64_t W, int64_t sequences = 0);

// Which optional states a linear-mixer call has (chunk::Mixer's pointers): `initial` h0 (and z0),
// with the gradient dh0 (dz0) in the backward; `final` ht (zt), with the incoming dht (dzt).
struct MixerStates {
  bool initial = false, final = false;
};
// The launches of linear_attn.cu's and gla.cu's launchers, in their order (dv and GLA's dg present),
// for chunk::Mixer::precision `precision` and the batch's `sequences` (0 = its rows).
LaunchPlans linear_attention_forward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, bool normalize,
                                           MixerStates states, MatmulPrecision precision = MatmulPrecision::f32,
                                           int64_t sequences = 0);
LaunchPlans linear_attention_backward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, bool normalize,
                                            MixerStates states, MatmulPrecision precision = MatmulPrecision::f32,
                                            int64_t sequences = 0);
LaunchPlans gla_forward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, MixerStates states,
                              MatmulPrecision precision = MatmulPrecision::f32, int64_t sequences = 0);
LaunchPlans gla_backward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, MixerStates states,
                               MatmulPrecision precision = MatmulPrecision::f32, int64_t sequences = 0);

// ---- mamba2.cu: Mamba2 as GLA's passes (above, Dk = N, Dv = P) between its own pointwise kernels:
// the heads' inputs before them (both directions), the D skip after the forward, and after the
// backward the time step's gradients (column sums of dA_log and dD) and the groups' sums of dB, dC ----
LaunchPlan mamba2_time_step_backward_plan(int64_t rows, int64_t H);
LaunchPlans mamba2_forward_plans(int64_t B, int64_t T, int64_t H, int64_t N, int64_t P, MixerStates states,
                                 MatmulPrecision precision = MatmulPrecision::f32, int64_t sequences = 0);
LaunchPlans mamba2_backward_plans(int64_t B, int64_t T, int64_t H, int64_t G, int64_t N, int64_t P, MixerStates states,
                                  MatmulPrecision precision = MatmulPrecision::f32, int64_t sequences = 0);

// ---- deltanet.cu: the forward's per-chunk launches over (tiles, H) around the state pass over
// (state column tiles, sequences * H) (T = 0: the state pass alone); the backward likewise, its
// sequential pass carrying the state's gradient from the last chunk to the first. sequences: the
// documents (0 = the B rows); tiles: kernels/sequences.h's tile indices (the rows: B * chunks) ----
inline constexpr int kDeltaNetHeadThreads = 256;
// `precision`: the products of chunk_factors_kernel and chunk_outputs_kernel (DeltaNetArgs::precision),
// f32 on the CUDA cores.
LaunchPlans deltanet_forward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk,
                                   MatmulPrecision precision = MatmulPrecision::f32, int64_t sequences = 0);
// `precision`: the products of chunk_backward_inputs and chunk_backward_grads (their *_tc_kernel twins
// for bf16, tf32 where Dk, Dv <= 64: delta::backward_precision; the sequential pass is float32).
LaunchPlans deltanet_backward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk,
                                    MatmulPrecision precision = MatmulPrecision::f32, int64_t sequences = 0);
LaunchPlan deltanet_recurrent_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t sequences = 0);

}  // namespace linattn::cuda
