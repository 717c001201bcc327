// Decoding (layers/decoder.h, autograd/decoding.h) runs on the CPU only: on a model or tensors on
// the GPU it is a clear error that names the way out, not a read of device memory from the host.
#include "autograd/decoding.h"
#include "kernel_testing.h"
#include "layers/decoder.h"
#include "train/config.h"

namespace linattn {
namespace {

using namespace testing;

void expect_decoding_error(const std::function<void()>& f, const std::string& op) {
  try {
    f();
    ADD_FAILURE() << op << " on the GPU did not throw";
  } catch (const linattn::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(op + ": decoding runs on the CPU only, not yet on cuda"), std::string::npos) << what;
    EXPECT_NE(what.find("linattn-generate"), std::string::npos) << what;
  }
}

TEST(CudaDecoding, ADecoderOnAModelOnTheGpuIsAClearError) {
  SKIP_WITHOUT_GPU();
  Config c = parse_config(
      "model: {vocab_size: 11, hidden_size: 8, num_hidden_layers: 1, num_heads: 2, mixer: attention}\n"
      "train: {max_steps: 1}\n",
      "tiny.yaml");
  Model model(c.model, DType::f32);
  model.params().to(Device::cuda);
  expect_decoding_error([&] { Decoder decoder(model, 1); }, "Decoder");
}

TEST(CudaDecoding, TheDecodingOpsOnDeviceTensorsAreAClearError) {
  SKIP_WITHOUT_GPU();
  Variable x(Tensor::zeros({1, 3, 2, 4}, DType::f32, Device::cuda));
  Variable conv_x(Tensor::zeros({1, 3, 4}, DType::f32, Device::cuda));
  Variable w(Tensor::zeros({4, 4}, DType::f32, Device::cuda));
  Tensor window;
  ops::KVCache cache;
  expect_decoding_error([&] { ops::slice_time(x, 0, 1); }, "slice_time");
  expect_decoding_error([&] { ops::short_conv_continue(conv_x, w, window); }, "short_conv_continue");
  expect_decoding_error([&] { ops::attention_continue(x, x, x, cache, 0, 0); }, "attention_continue");
}

}  // namespace
}  // namespace linattn
