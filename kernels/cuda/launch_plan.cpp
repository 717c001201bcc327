#include "kernels/cuda/launch_plan.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cuda/attention_layout.h"
#include "kernels/cuda/deltanet_block.h"
#include "kernels/cuda/linear_scan.h"

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

LaunchPlan add_column_partials_plan(int64_t n) { return pointwise_plan("add_column_partials_kernel", n); }

// ---- norms ----

LaunchPlan norm_rows_plan(const std::string& kernel, int64_t N) {
  return {kernel, {ceil_div(N, kNormRows)}, {kNormRows * 32}, 0};
}

LaunchPlans rmsnorm_forward_plans(int64_t N, int64_t D) {
  if (N == 0) return {};
  return {norm_rows_plan("rmsnorm_forward_kernel", N)};
}

LaunchPlans rmsnorm_backward_plans(int64_t N, int64_t D, bool weight_grad) {
  if (N == 0 || D == 0) return {};
  LaunchPlans plans{norm_rows_plan("rmsnorm_dx_kernel", N)};
  if (!weight_grad) return plans;
  const RowChunks chunks = row_chunks(N, ceil_div(D, 32), D);
  plans.push_back(column_sums_plan("rmsnorm_dw_kernel", D, chunks));
  plans.push_back(add_column_partials_plan(D));
  return plans;
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
  return {column_sums_plan("bias_backward_kernel", out, chunks), add_column_partials_plan(out)};
}

LaunchPlans short_conv_backward_plans(int64_t B, int64_t T, int64_t C, int64_t W) {
  const int64_t n = B * T * C;
  if (n == 0) return {};
  const RowChunks chunks = row_chunks(B * T, ceil_div(C, 32), C * (W + 1));
  return {pointwise_plan("short_conv_dx_kernel", n), column_sums_plan("short_conv_dw_kernel", C, chunks),
          add_column_partials_plan(C * W + C)};
}

LaunchPlans gdn_decay_backward_plans(int64_t rows, int64_t H, bool param_grads) {
  if (H == 0) return {};
  const RowChunks chunks = row_chunks(rows, ceil_div(H, 32), 2 * H);
  LaunchPlans plans{column_sums_plan("gdn_decay_backward_kernel", H, chunks)};
  if (param_grads) plans.push_back(add_column_partials_plan(2 * H));
  return plans;
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

LaunchPlans attention_forward_plans(bool bf16, int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv) {
  if (B == 0 || T == 0) return {};
  if (attention_uses_tensor_cores(bf16, dk, dv))
    return {{attention_tc_kernel("tc_forward_kernel", dk), {ceil_div(T, kAttentionTB), H, B},
             {tc_attention::kTcThreads}, attention_tc_smem_bytes(dk)}};
  return {{attention_kernel("forward_kernel", bf16, dk, dv), {ceil_div(T, kAttentionBQ), H, B}, {kAttentionThreads},
           attention_forward_smem_bytes(dk, dv)}};
}

LaunchPlans attention_backward_plans(bool bf16, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk,
                                     int64_t dv) {
  if (B == 0 || T == 0) return {};
  // D = rowsum(dO * O): one warp per (b, t, h)
  LaunchPlans plans{{std::string("rowdot_kernel<") + (bf16 ? "__nv_bfloat16>" : "float>"),
                     {ceil_div(B * T * H * 32, kAttentionThreads)}, {kAttentionThreads}, 0}};
  if (attention_uses_tensor_cores(bf16, dk, dv)) {
    const int64_t smem = attention_tc_smem_bytes(dk);
    plans.push_back({attention_tc_kernel("tc_backward_dkdv_kernel", dk), {ceil_div(T, kAttentionTB), Hkv, B},
                     {tc_attention::kTcThreads}, smem});
    plans.push_back({attention_tc_kernel("tc_backward_dq_kernel", dk), {ceil_div(T, kAttentionTB), H, B},
                     {tc_attention::kTcThreads}, smem});
    return plans;
  }
  const int64_t smem = attention_backward_smem_bytes(dk, dv);
  plans.push_back({attention_kernel("backward_dkdv_kernel", bf16, dk, dv), {ceil_div(T, kAttentionBK), Hkv, B},
                   {kAttentionThreads}, smem});
  plans.push_back({attention_kernel("backward_dq_kernel", bf16, dk, dv), {ceil_div(T, kAttentionBQB), H, B},
                   {kAttentionThreads}, smem});
  return plans;
}

// ---- the linear mixers' scans ----

LaunchPlan scan_plan(const std::string& kernel, int64_t B, int64_t H, int64_t tiled, int64_t smem_floats) {
  return {kernel, {B * H, ceil_div(tiled, scan::kTile)}, {scan::kBlockThreads},
          smem_floats * int64_t(sizeof(float))};
}

namespace {

LaunchPlan scan_c(int64_t B, int64_t H, int64_t chunk, int64_t K, int64_t N, bool gated) {
  return scan_plan("scan::scan_c_kernel<float>", B, H, N, scan::scan_c_smem(chunk, K, gated));
}
LaunchPlan scan_o(int64_t B, int64_t H, int64_t chunk, int64_t K, int64_t N, bool gated) {
  return scan_plan("scan::scan_o_kernel<float>", B, H, K, scan::scan_o_smem(chunk, N, gated));
}
// scan::DeviceRun::each: one thread per index.
LaunchPlan each(const std::string& step, int64_t n) { return pointwise_plan("scan::each_kernel<" + step + ">", n); }

}  // namespace

// The scans of linear_scan.h's linear_attention_forward, gla_forward, ..., in their order.
LaunchPlans linear_attention_forward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk,
                                           bool normalize) {
  LaunchPlans plans{scan_c(B, H, chunk, Dk, Dv, false)};
  if (!normalize) return plans;
  plans.push_back(each("scan::AppendColumn<float>", 1));
  plans.push_back(scan_c(B, H, chunk, Dk, 1, false));
  plans.push_back(each("scan::DivideRows<float>", B * T * H * Dv));
  return plans;
}

LaunchPlans linear_attention_backward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk,
                                            bool normalize, bool initial_state_grad) {
  LaunchPlans plans;
  int64_t W = Dv;
  if (normalize) {
    W = Dv + 1;
    const int64_t rows = B * T * H, states = B * H * Dk;
    plans.push_back(each("scan::AppendColumn<float>", 1));
    plans.push_back(scan_c(B, H, chunk, Dk, 1, false));
    plans.push_back(each("scan::AppendColumn<float>", rows * W));
    plans.push_back(each("scan::NormalizedGrad<float>", rows * W));
    plans.push_back(each("scan::AppendColumn<float>", states * W));
    plans.push_back(each("scan::AppendColumn<float>", states * W));
  }
  plans.push_back(scan_o(B, H, chunk, Dk, W, false));  // dq
  plans.push_back(scan_o(B, H, chunk, Dk, W, false));  // dk
  plans.push_back(scan_c(B, H, chunk, Dk, Dv, false));  // dv, dh0
  if (normalize && initial_state_grad) plans.push_back(scan_c(B, H, chunk, Dk, 1, false));  // dz0
  return plans;
}

LaunchPlans gla_forward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk) {
  return {scan_c(B, H, chunk, Dk, Dv, true)};
}

LaunchPlans gla_backward_plans(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk) {
  return {scan_o(B, H, chunk, Dk, Dv, true), scan_o(B, H, chunk, Dk, Dv, true), scan_c(B, H, chunk, Dk, Dv, true),
          each("scan::GateGrad<float>", B * H * Dk)};
}

// ---- DeltaNet and Gated DeltaNet ----

LaunchPlan deltanet_forward_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk) {
  const delta::Dims d{B, T, H, Dk, Dv, chunk};
  return {"chunk_forward_kernel", {B * H}, {kDeltaNetHeadThreads}, delta::forward_shared(d) * int64_t(sizeof(float))};
}

LaunchPlan deltanet_backward_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk) {
  const delta::Dims d{B, T, H, Dk, Dv, chunk};
  return {"chunk_backward_kernel", {B * H}, {kDeltaNetHeadThreads}, delta::backward_shared(d) * int64_t(sizeof(float))};
}

LaunchPlan deltanet_recurrent_plan(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv) {
  const delta::Dims d{B, T, H, Dk, Dv, 1};
  return {"recurrent_forward_kernel", {B * H}, {kDeltaNetHeadThreads},
          delta::recurrent_shared(d) * int64_t(sizeof(float))};
}

}  // namespace linattn::cuda
