// linattn-bench gpu-plan: it runs without a GPU and without the nvcc tables (saying so), prints a row
// for every kernel that the launchers' plans launch in a step, calls itself an estimate, and reads
// registers and tensor-core use from the nvcc build's tables when they are there.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kernels/cuda/launch_plan.h"
#include "testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class BenchGpuPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("linattn-gpu-plan-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  testing::CommandResult plan(const std::string& options = "") {
    return testing::run_command(testing::built_binary("linattn-bench") + " gpu-plan --build-dir " + dir_ + options);
  }
  std::string dir_;
};

// The table row of `op` with `kernel` ("| op | kernel | ..."), or "" when there is none.
std::string row(const std::string& output, const std::string& op, const std::string& kernel) {
  const size_t at = output.find("| " + op + " | " + kernel + " |");
  if (at == std::string::npos) return "";
  return output.substr(at, output.find('\n', at) - at);
}

TEST_F(BenchGpuPlan, WithoutTheNvccTablesSaysSoAndPrintsEveryKernel) {
  testing::CommandResult r = plan();
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ESTIMATE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No nvcc resource report at " + dir_ + "/cuda-resources.md"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No PTX tensor-core table at " + dir_ + "/cuda-tensor-cores.md"), std::string::npos)
      << r.output;
  // every kernel of the mixers, attention and the 125M step, by the plans the launchers use
  const int64_t B = 8, T = 2048, H = 12, D = 64, C = 64, N = B * T, d = H * D, V = 50257;
  std::vector<cuda::LaunchPlans> all = {
      cuda::linear_attention_forward_plans(4, T, 4, D, D, false, {}),
      cuda::linear_attention_backward_plans(4, T, 4, D, D, false, {}),
      cuda::gla_forward_plans(B, T, H, D, D, {}),
      cuda::gla_backward_plans(B, T, H, D, D, {}),
      cuda::deltanet_forward_plans(4, T, 4, D, D, C),
      cuda::deltanet_backward_plans(4, T, 4, D, D, C),
      cuda::attention_forward_plans(true, 4, T, 4, D, D),
      cuda::attention_backward_plans(true, 4, T, 4, 4, D, D),
      cuda::rmsnorm_forward_plans(N, d),
      cuda::rmsnorm_backward_plans(N, d, true),
      cuda::cross_entropy_forward_backward_plans(N, V),
      cuda::embedding_forward_plans(N, d),
      {cuda::embedding_backward_plan(V)},
      cuda::bias_activation_forward_plans(Activation::logsigmoid, N, d),
      cuda::bias_activation_backward_plans(Activation::logsigmoid, N, d),
      cuda::step_loss_plans(),
      cuda::step_control_plans(1000000),
      cuda::adamw_plans(1000000),
      cuda::rmsnorm_gate_forward_plans(N * H, D),
      cuda::rmsnorm_gate_backward_plans(N * H, D, true),
      {cuda::elementwise_plan("SwigluJoinedForward", N), cuda::elementwise_plan("SwigluJoinedBackward", N)},
  };
  for (const cuda::LaunchPlans& plans : all)
    for (const cuda::LaunchPlan& p : plans)
      EXPECT_NE(r.output.find(" | " + p.kernel + " | "), std::string::npos) << "no row for " << p.kernel;
  for (const char* what : {"cuBLAS 16384 x 768 x 768", "cuBLAS 16384 x 50257 x 768", "1.72 ms (f32)", "3.25 ms (f32)",
                           "2.46 ms (bf16; f32 refused)", "0.45 ms (bf16, PyTorch SDPA)", "## Training step: 125M",
                           "130.9M parameters", "Step estimate", "implied MFU",
                           // the shipped configs' steps, their layers as the model builds them (the parameter
                           // counts are linattn-train --dry-run's)
                           "## Training step: 85.5M", "10 x GLA (H12, Dk 32, Dv 64), 2 x attention (H12, 12 kv heads, "
                           "D64, window 256)", "85.5M parameters", "## Training step: 1.3B GLA hybrid",
                           "20 x GLA (H16, Dk 64, Dv 128), 4 x attention (H16, 16 kv heads, D128, window 512)",
                           "1440.3M parameters", "## Training step: 1.3B Gated DeltaNet hybrid",
                           "20 x Gated DeltaNet (H16, D128, conv 4), 4 x attention (H16, 16 kv heads, D128, window 512)",
                           "1525.0M parameters", "micro-batch 8, recompute selective."})
    EXPECT_NE(r.output.find(what), std::string::npos) << "no '" << what << "' in\n" << r.output;
  // At B4 H4 T2048 D64 the rows of GLA's forward show their plans' geometry: the chunk states a
  // block per (chunk, tile, head), 128 x 1 x 4 = 512 blocks of 256 threads (no idle SMs), and
  // the sequential inter-chunk pass its own row, one thread per state entry (256 blocks).
  const cuda::LaunchPlan states = cuda::chunk_state_plan(false, 4, T, 4, D, D);
  const std::string gla = row(r.output, "gla forward: chunk states (parallel)", states.kernel);
  EXPECT_NE(gla.find("| 128 x 1 x 4 | 256 | " + std::to_string(states.shared_bytes) + " | - | - |"),
            std::string::npos) << gla;
  EXPECT_EQ(gla.find("/132 SMs"), std::string::npos) << gla;
  const cuda::LaunchPlan pass = cuda::state_pass_plan(false, 4, 4, D, D);
  const std::string pass_row = row(r.output, "gla forward: inter-chunk state pass (sequential)", pass.kernel);
  EXPECT_NE(pass_row.find("| 256 | 256 | 0 | - | - |"), std::string::npos) << pass_row;
  EXPECT_NE(row(r.output, "gla backward: inter-chunk gate pass (sequential)", "chunk::gate_pass_kernel"), "")
      << r.output;
  // DeltaNet's backward, as its forward: the per-chunk launches a block per (chunk, head), 128 x 4 =
  // 512 blocks, around the sequential pass of dS over 8-column tiles of the state (8 x 16).
  const cuda::LaunchPlans delta_bwd = cuda::deltanet_backward_plans(4, T, 4, D, D, C);
  ASSERT_EQ(delta_bwd.size(), 3u);
  for (const char* op : {"deltanet backward", "gated_deltanet backward"}) {
    const std::string op_s = op;
    const std::string inputs = row(r.output, op_s + ": dS inputs (parallel)", delta_bwd[0].kernel);
    const std::string pass_dS = row(r.output, op_s + ": inter-chunk dS pass (sequential)", delta_bwd[1].kernel);
    const std::string grads = row(r.output, op_s + ": gradients (parallel)", delta_bwd[2].kernel);
    EXPECT_NE(inputs.find("| 128 x 4 | 256 |"), std::string::npos) << inputs;
    EXPECT_NE(pass_dS.find("| 8 x 16 | 256 |"), std::string::npos) << pass_dS;
    EXPECT_NE(grads.find("| 128 x 4 | 256 |"), std::string::npos) << grads;
  }
  // the sequential passes' share of the FLOPs, per linear mixer and in the step
  for (const char* what : {"| linear attention (f32) | ", "| GLA (f32) | ", "| DeltaNet (f32) | ",
                           "| Gated DeltaNet (f32) | ", "The sequential inter-chunk passes"}) {
    const size_t at = r.output.find(what);
    ASSERT_NE(at, std::string::npos) << "no '" << what << "' in\n" << r.output;
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(line.find("% of the"), std::string::npos) << line;
  }
}

// --config plans the given configs' steps; a mixer the plan does not model is named, with its layer.
TEST_F(BenchGpuPlan, PlansTheConfigsGivenAndNamesALayerItCannot) {
  const std::string config = dir_ + "/hybrid.yaml";
  std::ofstream(config) << "model:\n  vocab_size: 300\n  hidden_size: 64\n  num_heads: 2\n  num_hidden_layers: 3\n"
                        << "  layers: [gla, attention, gla]\ndata:\n  seq_len: 256\ntrain:\n  batch_size: 4\n  max_steps: 1\n";
  testing::CommandResult r = plan(" --config " + config);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("## Training step: " + config), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("B4 T256, 3 layers: 2 x GLA (H2, Dk 16, Dv 32), 1 x attention (H2, 2 kv heads, D32, "
                          "global)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("85.5M"), std::string::npos) << "the shipped configs are replaced";
  std::ofstream(config) << "model:\n  hidden_size: 64\n  num_heads: 2\n  num_hidden_layers: 2\n  layers: [gla, deltanet]\ntrain:\n  max_steps: 1\n";
  r = plan(" --config " + config);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("model.layers.1 is deltanet; gpu-plan models GLA, Gated DeltaNet and softmax attention "
                          "layers"), std::string::npos) << r.output;
}

// A config's train.recompute is planned: each layer's backward replays its forward, all of it under
// full, all but the products and softmax attention's core under selective (whose kept outputs are
// rounded to bf16 in the first run and widened in the replay); none replays nothing.
TEST_F(BenchGpuPlan, PlansTheReplaysOfTheConfigsRecomputeMode) {
  const std::string config = dir_ + "/hybrid.yaml";
  auto plan_mode = [&](const std::string& mode) {
    std::ofstream(config) << "model:\n  vocab_size: 300\n  hidden_size: 64\n  num_heads: 2\n  num_hidden_layers: 3\n"
                          << "  layers: [gla, attention, gated_deltanet]\ndata:\n  seq_len: 256\ntrain:\n"
                          << "  batch_size: 4\n  max_steps: 1\n  precision: bf16\n  recompute: " << mode << "\n";
    testing::CommandResult r = plan(" --precision bf16 --config " + config);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("1 x Gated DeltaNet (H2, D32, conv 4)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("recompute " + mode + "."), std::string::npos) << r.output;
    return r.output;
  };
  auto has = [](const std::string& output, const std::string& op) { return output.find(op + " | ") != std::string::npos; };
  const std::string none = plan_mode("none"), selective = plan_mode("selective"), full = plan_mode("full");
  EXPECT_EQ(none.find("replay: "), std::string::npos) << none;
  for (const char* op : {"replay: residual + attn_norm forward", "replay: gla forward: outputs (parallel)",
                         "replay: gated_deltanet forward: outputs (parallel)", "replay: g_norm and swish gate",
                         "replay: region input widened", "replay: kept product widened", "kept product rounded to bf16",
                         "region input kept in bf16", "residual add (the region's last)"})
    EXPECT_TRUE(has(selective, op)) << "selective has no row '" << op << "'";
  for (const char* op : {"replay: o_proj forward", "replay: mlp gate_proj and up_proj forward", "replay: mlp swiglu",
                         "replay: attention (global) forward", "replay: q, k, v_proj split"})
    EXPECT_FALSE(has(selective, op)) << "selective replays '" << op << "', whose output its first run keeps";
  for (const char* op : {"replay: o_proj forward", "replay: mlp swiglu", "replay: attention (global) forward",
                         "replay: q, k, v, b_proj split", "replay: region input widened"})
    EXPECT_TRUE(has(full, op)) << "full has no row '" << op << "'";
  EXPECT_FALSE(has(full, "kept product rounded to bf16")) << full;
}

TEST_F(BenchGpuPlan, ReadsRegistersAndTensorCoresFromTheNvccTables) {
  {
    std::ofstream resources(dir_ + "/cuda-resources.md");
    resources << "| file | kernel | arch | registers | static smem (B) | spill stores (B) | spill loads (B) "
                 "| stack (B) | cmem (B) | spill check |\n"
              << "| --- | --- | --- | --: | --: | --: | --: | --: | --: | --- |\n"
              << "| norm.cu | rmsnorm_forward_kernel | sm_80 | 32 | 0 | 0 | 0 | 0 | - | |\n"
              << "| norm.cu | rmsnorm_forward_kernel | sm_90 | 255 | 1024 | 8 | 16 | 24 | - | accepted (line 1) |\n";
    std::ofstream tensor_cores(dir_ + "/cuda-tensor-cores.md");
    tensor_cores << "| file | kernel | arch | tensor-core instructions (PTX) |\n| --- | --- | --- | ---: |\n"
                 << "| norm.cu | rmsnorm_forward_kernel | sm_90 | 7 |\n"
                 << "| norm.cu | rmsnorm_backward_kernel | sm_90 | 0 |\n";
  }
  testing::CommandResult r = plan();
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Registers, static shared memory and spills: " + dir_ + "/cuda-resources.md"),
            std::string::npos) << r.output;
  // The small step's RMSNorm over 8192 rows: 1024 blocks of 8 warps (norm_rows_plan). With sm_90's
  // row, not sm_80's: 255 registers x 256 threads leave one block (8 warps of 64: 12.5%) per SM, so
  // 1024 / 132 = 7.76 waves; the static 1024 B beside no dynamic memory; spills 8 + 16 B. Its 7 mma
  // instructions in a float32 kernel put its products on the tf32 peak.
  const std::string norm = row(r.output, "residual + attn_norm forward", "rmsnorm_forward_kernel");
  EXPECT_NE(norm.find("| 1024 | 256 | 0 + 1024 | 255 | 24 | 12% (registers) | 7.76 | yes (7) |"), std::string::npos)
      << norm;
  EXPECT_NE(norm.find("(tf32) |"), std::string::npos) << norm;
  // Its backward in one launch (rmsnorm_backward_plans): 8 column tiles x 32 row chunks of dw blocks,
  // then 8192 / 16 dx blocks, 768 blocks of 512 threads, 4 per SM: 768 / 528 = 1.45 waves.
  const std::string dx = row(r.output, "residual + attn_norm backward", "rmsnorm_backward_kernel");
  EXPECT_NE(dx.find("| - | - | 100% (threads) w/o regs | 1.45 | no |"), std::string::npos) << dx;
  EXPECT_NE(dx.find("(f32) |"), std::string::npos) << dx;
  // a kernel neither table lists: unknown, not guessed
  const std::string lse = row(r.output, "cross-entropy and its backward", "lse_gradient_kernel");
  EXPECT_NE(lse.find("| - | - | 100% (threads) w/o regs | 15.52 | - |"), std::string::npos) << lse;
}

// --precision bf16: the linear mixers' bf16 instantiations, their tensor-core instructions from the
// table, costed at the bf16 peak; the GEMMs through cuBLAS in bf16. A kernel the table lists without
// tensor-core instructions stays on the f32 CUDA cores.
TEST_F(BenchGpuPlan, PrecisionBf16PicksTheTensorCoreKernels) {
  const int64_t T = 2048, D = 64;
  const cuda::LaunchPlan apply = cuda::chunk_apply_plan(false, 4, T, 4, D, MatmulPrecision::bf16);
  const cuda::LaunchPlan qk = cuda::chunk_dqk_plan(4, T, 4, D, MatmulPrecision::bf16);
  ASSERT_EQ(apply.kernel, "chunk::chunk_apply_kernel<false,(MatmulPrecision)2>");
  const cuda::LaunchPlan factors = cuda::deltanet_forward_plans(4, T, 4, D, D, 64, MatmulPrecision::bf16)[0];
  ASSERT_EQ(factors.kernel, "chunk_factors_tc_kernel<(MatmulPrecision)2>");
  const cuda::LaunchPlan grads = cuda::deltanet_backward_plans(4, T, 4, D, D, 64, MatmulPrecision::bf16)[2];
  ASSERT_EQ(grads.kernel, "chunk_backward_grads_tc_kernel<(MatmulPrecision)2>");
  {
    std::ofstream tensor_cores(dir_ + "/cuda-tensor-cores.md");
    tensor_cores << "| file | kernel | arch | tensor-core instructions (PTX) |\n| --- | --- | --- | ---: |\n"
                 << "| chunk_gla.cu | " << apply.kernel << " | sm_90 | 24 |\n"
                 << "| chunk_gla.cu | " << qk.kernel << " | sm_90 | 0 |\n"
                 << "| deltanet.cu | " << factors.kernel << " | sm_90 | 32 |\n"
                 << "| deltanet.cu | " << grads.kernel << " | sm_90 | 42 |\n";
  }
  testing::CommandResult r = plan(" --precision bf16");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string out = row(r.output, "linear_attn forward: outputs (parallel)", apply.kernel);
  EXPECT_NE(out.find("| yes (24) |"), std::string::npos) << out;
  EXPECT_NE(out.find("(bf16) |"), std::string::npos) << out;
  const std::string dqk = row(r.output, "gla backward: dq, dk (parallel)", qk.kernel);
  EXPECT_NE(dqk.find("| no |"), std::string::npos) << dqk;
  EXPECT_NE(dqk.find("(f32) |"), std::string::npos) << dqk;
  const std::string delta = row(r.output, "deltanet forward: factors (parallel)", factors.kernel);
  EXPECT_NE(delta.find("| yes (32) |"), std::string::npos) << delta;
  EXPECT_NE(delta.find("(bf16) |"), std::string::npos) << delta;
  const std::string delta_grads = row(r.output, "gated_deltanet backward: gradients (parallel)", grads.kernel);
  EXPECT_NE(delta_grads.find("| yes (42) |"), std::string::npos) << delta_grads;
  EXPECT_NE(delta_grads.find("(bf16) |"), std::string::npos) << delta_grads;
  EXPECT_NE(r.output.find("| linear attention (bf16) | "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| Gated DeltaNet (bf16) | "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GEMMs in bf16 (cuBLAS, tensor cores)"), std::string::npos) << r.output;
  EXPECT_NE(plan(" --precision fp8").status, 0);
}

}  // namespace
}  // namespace linattn
