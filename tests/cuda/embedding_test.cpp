// CUDA embedding lookup against the CPU kernel (kernels/cpu/embedding.h).
#include "kernels/cuda/embedding.h"

#include <vector>

#include "kernel_testing.h"
#include "kernels/backend.h"
#include "kernels/cpu/embedding.h"

namespace linattn {
namespace {

using namespace testing;

Tensor random_ids(int64_t N, int64_t V, Rng& rng) {
  Tensor ids = Tensor::empty({N}, DType::i32);
  for (int64_t i = 0; i < N; ++i) ids.data<int32_t>()[i] = int32_t(rng.below(uint64_t(V)));
  return ids;
}

// The forward copies and the backward adds each table row's tokens in token order, as the CPU
// kernel does, so both match the float32 CPU kernel exactly (tolerance 0): a wrong order, a lost
// or doubled add, or a race would all show.
TEST(CudaEmbedding, ForwardAndBackwardEqualTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t N, V, D;
  };
  // A one-token batch; ids repeating many times in a tiny vocabulary (several tiles of 256 ids);
  // D not a multiple of the block; a large vocabulary with more rows than blocks (rows per block > 1).
  const Case cases[] = {{1, 1, 1}, {1000, 7, 33}, {513, 300, 257}, {2049, 50257, 64}};
  Rng rng(31);
  for (auto [N, V, D] : cases) {
    SCOPED_TRACE("N = " + std::to_string(N) + ", V = " + std::to_string(V) + ", D = " + std::to_string(D));
    Tensor ids = random_ids(N, V, rng), table = random_f32({V, D}, rng), dy = random_f32({N, D}, rng);
    Tensor dtable0 = random_f32({V, D}, rng);
    Tensor idsd = on_device(ids), tabled = on_device(table), dyd = on_device(dy), dtable = on_device(dtable0);
    Tensor y = Tensor::empty({N, D}, DType::f32, Device::cuda);
    cuda::embedding_forward(y.data<float>(), idsd.data<int32_t>(), tabled.data<float>(), N, V, D);
    cuda::embedding_backward(dtable.data<float>(), idsd.data<int32_t>(), dyd.data<float>(), N, V, D);

    Tensor want_y = Tensor::empty({N, D}, DType::f32), want_dtable = dtable0.clone();
    cpu::embedding_forward(want_y.data<float>(), ids.data<int32_t>(), table.data<float>(), N, V, D);
    cpu::embedding_backward(want_dtable.data<float>(), ids.data<int32_t>(), dy.data<float>(), N, V, D);
    EXPECT_CLOSE(on_host(y), want_y, 0.0);
    EXPECT_CLOSE(on_host(dtable), want_dtable, 0.0);
  }
}

// The backend entry takes ids on the host or the device, and refuses an id outside the vocabulary
// with the CPU's message (naming the position) before anything reads the table.
TEST(CudaEmbedding, TheBackendEntryTakesHostOrDeviceIdsAndChecksThem) {
  SKIP_WITHOUT_GPU();
  const int64_t N = 9, V = 5, D = 3;
  Rng rng(32);
  Tensor ids = random_ids(N, V, rng), table = random_f32({V, D}, rng);
  Tensor want = Tensor::empty({N, D}, DType::f32);
  backend::embedding_forward(Device::cpu, want, ids, table);
  Tensor tabled = on_device(table), y = on_device(Tensor::zeros({N, D}, DType::f32));
  for (bool ids_on_device : {false, true}) {
    SCOPED_TRACE(ids_on_device ? "ids on the device" : "ids on the host");
    backend::embedding_forward(Device::cuda, y, ids_on_device ? on_device(ids) : ids, tabled);
    EXPECT_CLOSE(on_host(y), want, 0.0);
  }
  Tensor bad = ids.clone();
  bad.data<int32_t>()[7] = -1;
  try {
    backend::embedding_forward(Device::cuda, y, bad, tabled);
    ADD_FAILURE() << "an id outside the vocabulary was accepted";
  } catch (const linattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id -1 at position 7"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace linattn
