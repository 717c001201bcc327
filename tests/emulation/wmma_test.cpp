// The emulated 16-bit float types (cuda_bf16.h, cuda_fp16.h) against hand-computed bit patterns, and
// the emulated tensor-core fragments (mma.h) run by one warp of an emulated kernel against a host
// sum that takes the inputs as the tensor cores take them: the results must be bitwise equal.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/launch.cuh"

namespace {

namespace wmma = nvcuda::wmma;

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint16_t bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16(x)); }
uint16_t half_bits(float x) { return __half_as_ushort(__float2half(x)); }

// ---- conversions ---------------------------------------------------------------------------------

TEST(EmulatedWmma, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3F80);
  // 1 + 2^-8 lies halfway between 0x3F80 and 0x3F81: the even one; 1 + 3 2^-8 between 0x3F81 and 0x3F82.
  EXPECT_EQ(bf16_bits(from_bits(0x3F808000)), 0x3F80);
  EXPECT_EQ(bf16_bits(from_bits(0x3F818000)), 0x3F82);
  EXPECT_EQ(bf16_bits(from_bits(0xBF818000)), 0xBF82);
  EXPECT_EQ(bf16_bits(from_bits(0x3F808001)), 0x3F81);  // just past halfway
  EXPECT_EQ(bf16_bits(from_bits(0x3F807FFF)), 0x3F80);  // just short of it
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(from_bits(0x3F818000))), 0x3F82);
}

TEST(EmulatedWmma, Bfloat16KeepsInfinitiesNansAndSubnormals) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16_bits(inf), 0x7F80);
  EXPECT_EQ(bf16_bits(-inf), 0xFF80);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::quiet_NaN()), 0x7FFF);  // CUDA's canonical NaN
  EXPECT_EQ(bf16_bits(from_bits(0x7F800001)), 0x7FFF);  // a NaN whose payload is all in the dropped bits
  EXPECT_EQ(bf16_bits(from_bits(0xFFC00000)), 0x7FFF);
  // The largest finite bf16 is 0x7F7F; halfway past it (0x7F7F8000, odd below) and float's largest overflow.
  EXPECT_EQ(bf16_bits(from_bits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(bf16_bits(from_bits(0x7F7F8000)), 0x7F80);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::max()), 0xFF80);
  // Float subnormals keep their top bits: 2^-133 is bf16's smallest subnormal (0x0001).
  EXPECT_EQ(bf16_bits(from_bits(0x00010000)), 0x0001);
  EXPECT_EQ(bf16_bits(from_bits(0x00008000)), 0x0000);  // halfway between 0 and 0x0001: even
  EXPECT_EQ(bf16_bits(from_bits(0x00018000)), 0x0002);  // halfway between 0x0001 and 0x0002
  EXPECT_EQ(bf16_bits(from_bits(0x00008001)), 0x0001);
  EXPECT_EQ(bf16_bits(from_bits(0x007FFFFF)), 0x0080);  // the largest float subnormal rounds up to 2^-126
  // Widening is exact.
  EXPECT_EQ(std::bit_cast<uint32_t>(__bfloat162float(__ushort_as_bfloat16(0x0001))), 0x00010000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(__bfloat162float(__ushort_as_bfloat16(0xC0A0))), 0xC0A00000u);
  EXPECT_EQ(__bfloat162float(__ushort_as_bfloat16(0xFF80)), -inf);
  EXPECT_TRUE(std::isnan(__bfloat162float(__ushort_as_bfloat16(0x7FFF))));
}

TEST(EmulatedWmma, HalfRoundsToNearestEven) {
  EXPECT_EQ(half_bits(1.0f), 0x3C00);
  EXPECT_EQ(half_bits(-2.5f), 0xC100);
  // 1 + 2^-11 lies halfway between 0x3C00 and 0x3C01: the even one; 1 + 3 2^-11 between 0x3C01 and 0x3C02.
  EXPECT_EQ(half_bits(from_bits(0x3F801000)), 0x3C00);
  EXPECT_EQ(half_bits(from_bits(0x3F803000)), 0x3C02);
  EXPECT_EQ(half_bits(from_bits(0x3F801001)), 0x3C01);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(from_bits(0xBF803000))), 0xBC02);
}

TEST(EmulatedWmma, HalfOverflowsToInfinityAndKeepsNansAndSubnormals) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(half_bits(65504.0f), 0x7BFF);  // the largest finite half
  EXPECT_EQ(half_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(half_bits(65520.0f), 0x7C00);  // halfway to the next power of two, odd below: infinity
  EXPECT_EQ(half_bits(-1e6f), 0xFC00);
  EXPECT_EQ(half_bits(inf), 0x7C00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::quiet_NaN()), 0x7FFF);
  EXPECT_EQ(half_bits(from_bits(0x7F800001)), 0x7FFF);
  // Subnormals: 2^-24 is 0x0001, 2^-14 the smallest normal 0x0400.
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);   // halfway between 0 and 0x0001
  EXPECT_EQ(half_bits(std::ldexp(3.0f, -25)), 0x0002);   // 1.5 2^-24: halfway between 0x0001 and 0x0002
  EXPECT_EQ(half_bits(from_bits(0x33000001)), 0x0001);   // just past 2^-25
  EXPECT_EQ(half_bits(std::ldexp(1023.0f, -24)), 0x03FF);
  EXPECT_EQ(half_bits(std::ldexp(2047.0f, -25)), 0x0400);  // halfway between 0x03FF and 0x0400
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(half_bits(from_bits(0x80000001)), 0x8000);   // a float subnormal is far below half's
  // Widening is exact.
  EXPECT_EQ(__half2float(__ushort_as_half(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(__half2float(__ushort_as_half(0x83FF)), -std::ldexp(1023.0f, -24));
  EXPECT_EQ(__half2float(__ushort_as_half(0x7BFF)), 65504.0f);
  EXPECT_EQ(__half2float(__ushort_as_half(0xFC00)), -inf);
  EXPECT_TRUE(std::isnan(__half2float(__ushort_as_half(0x7E00))));
}

// From double the rounding is done once: 1 + 2^-8 + 2^-40 would become the tie 1 + 2^-8 in float
// and then round to even (down); it is above the tie, so it rounds up.
TEST(EmulatedWmma, DoublesRoundOnce) {
  EXPECT_EQ(__bfloat16_as_ushort(__double2bfloat16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40))), 0x3F81);
  EXPECT_EQ(__bfloat16_as_ushort(__double2bfloat16(1.0 + std::ldexp(1.0, -8))), 0x3F80);
  EXPECT_EQ(__half_as_ushort(__double2half(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))), 0x3C01);
  EXPECT_EQ(__half_as_ushort(__double2half(65520.0)), 0x7C00);
  EXPECT_EQ(__half_as_ushort(__double2half(1e300)), 0x7C00);
  EXPECT_EQ(__bfloat16_as_ushort(__double2bfloat16(-1e300)), 0xFF80);
  EXPECT_EQ(__bfloat16_as_ushort(__double2bfloat16(std::nan(""))), 0x7FFF);
}

TEST(EmulatedWmma, SixteenBitArithmeticRoundsOnceAndComparesAsIeee) {
  const __nv_bfloat16 one(1.0f), tie(std::ldexp(1.0f, -8)), three_ties(std::ldexp(3.0f, -8));
  EXPECT_EQ(__bfloat16_as_ushort(one + tie), 0x3F80);         // 1 + 2^-8: halfway, to even
  EXPECT_EQ(__bfloat16_as_ushort(one + three_ties), 0x3F82);  // 1 + 3 2^-8: halfway, to even
  EXPECT_EQ(__bfloat16_as_ushort(__hsub(one, tie)), 0x3F7F);  // 1 - 2^-8 is exact
  EXPECT_EQ(float(__nv_bfloat16(3.0f) * __nv_bfloat16(-0.5f)), -1.5f);
  EXPECT_EQ(__bfloat16_as_ushort(__nv_bfloat16(1.0f) / __nv_bfloat16(3.0f)), bf16_bits(1.0f / 3.0f));
  EXPECT_EQ(__bfloat16_as_ushort(-one), 0xBF80);
  __nv_bfloat16 acc(2.0f);
  acc += one;
  acc *= __nv_bfloat16(2.0f);
  EXPECT_EQ(float(acc), 6.0f);
  const __half h_one(1.0f), h_tie(std::ldexp(1.0f, -11));
  EXPECT_EQ(__half_as_ushort(h_one + h_tie), 0x3C00);
  EXPECT_EQ(__half_as_ushort(__half(60000.0f) + __half(60000.0f)), 0x7C00);  // overflow
  const __nv_bfloat16 nan = __ushort_as_bfloat16(0x7FFF);
  EXPECT_FALSE(nan == nan);
  EXPECT_TRUE(nan != nan);
  EXPECT_FALSE(nan < one || nan > one || nan <= one || nan >= one);
  EXPECT_TRUE(one < three_ties + one && one <= one && one >= tie && !(one > one));
  EXPECT_TRUE(__half(-0.0f) == __half(0.0f));
  const __nv_bfloat162 pair = __floats2bfloat162_rn(1.0f, from_bits(0xC0118000));
  EXPECT_EQ(__bfloat16_as_ushort(pair.y), 0xC012);
  EXPECT_EQ(__bfloat1622float2(pair).x, 1.0f);
  const __half2 halves = __float2half2_rn(0.5f);
  EXPECT_EQ(__half22float2(halves).y, 0.5f);
}

// ---- fragments in a kernel -----------------------------------------------------------------------

template <class T>
using Storage = typename wmma::fragment<wmma::matrix_a, 16, 16, std::is_same_v<T, wmma::precision::tf32> ? 8 : 16, T,
                                        wmma::row_major>::storage_element_type;

template <class L>
constexpr wmma::layout_t layout_of = std::is_same_v<L, wmma::row_major> ? wmma::mem_row_major : wmma::mem_col_major;

size_t index(wmma::layout_t layout, int ld, int row, int col) {
  return layout == wmma::mem_row_major ? size_t(row) * ld + col : size_t(col) * ld + row;
}

// d [16, 16] = a [16, K] b [K, 16] + c [16, 16] for one warp. a and b have the fragments' layouts
// and stride ld; c and d are floats in acc_layout, stride ldc. With convert, the inputs go through
// __float_to_tf32 as CUDA's guide asks of tf32 fragments (mma_sync rounds them the same anyway).
template <class T, int K, class LA, class LB>
__global__ void mma_kernel(float* d, const Storage<T>* a, const Storage<T>* b, const float* c, int ld, int ldc,
                           wmma::layout_t acc_layout, bool convert) {
  wmma::fragment<wmma::matrix_a, 16, 16, K, T, LA> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, K, T, LB> fb;
  wmma::fragment<wmma::accumulator, 16, 16, K, float> acc;
  wmma::load_matrix_sync(fa, a, ld);
  wmma::load_matrix_sync(fb, b, ld);
  wmma::load_matrix_sync(acc, c, ldc, acc_layout);
  if constexpr (std::is_same_v<T, wmma::precision::tf32>) {
    if (convert) {
      for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
      for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    }
  }
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, ldc, acc_layout);
}

// A device copy of a host vector, freed at scope exit.
template <class E>
struct DeviceCopy {
  E* ptr = nullptr;
  size_t n;
  explicit DeviceCopy(const std::vector<E>& host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(E)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(E), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<E> download() const {
    std::vector<E> host(n);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr, n * sizeof(E), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  ~DeviceCopy() { cudaFree(ptr); }
};

// A random input value: exact in T for bf16 and half; any float for tf32, which mma_sync rounds.
template <class T>
Storage<T> random_input(std::mt19937& rng) {
  const float x = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  return Storage<T>(x);
}

// What the tensor cores multiply: 16-bit floats as they are, tf32 inputs rounded.
float mma_value(__nv_bfloat16 x) { return float(x); }
float mma_value(__half x) { return float(x); }
float mma_value(float x) { return cuda_emu::round_to_tf32(x); }

template <class T, int K, class LA, class LB>
void check_product(wmma::layout_t acc_layout, bool convert = false) {
  constexpr int ld = 16 / sizeof(Storage<T>) == 8 ? 24 : 20;  // a multiple of 8 or 4 elements, not of 16
  constexpr int ldc = 20;
  SCOPED_TRACE(std::string("K ") + std::to_string(K) + ", a " + (layout_of<LA> == wmma::mem_row_major ? "row" : "col") +
               ", b " + (layout_of<LB> == wmma::mem_row_major ? "row" : "col") + "-major, c and d " +
               (acc_layout == wmma::mem_row_major ? "row" : "col") + "-major");
  std::mt19937 rng(1234 + K);
  // Padding between rows (or columns) holds NaN: a load that strays into it poisons the product.
  const Storage<T> nan(std::numeric_limits<float>::quiet_NaN());
  std::vector<Storage<T>> a(16 * ld, nan), b(16 * ld, nan);
  std::vector<float> c(16 * ldc, std::numeric_limits<float>::quiet_NaN());
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < K; ++k) a[index(layout_of<LA>, ld, r, k)] = random_input<T>(rng);
  for (int k = 0; k < K; ++k)
    for (int col = 0; col < 16; ++col) b[index(layout_of<LB>, ld, k, col)] = random_input<T>(rng);
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) c[index(acc_layout, ldc, r, col)] = std::uniform_real_distribution<float>(-4, 4)(rng);
  const float sentinel = 12345.0f;  // in d's padding: the store must leave it
  DeviceCopy<Storage<T>> a_dev(a), b_dev(b);
  DeviceCopy<float> c_dev(c), d_dev(std::vector<float>(16 * ldc, sentinel));

  LINATTN_LAUNCH(1, 32, 0, nullptr, mma_kernel<T, K, LA, LB>)(d_dev.ptr, a_dev.ptr, b_dev.ptr, c_dev.ptr, ld, ldc,
                                                             acc_layout, convert);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const cudaError_t err = cudaDeviceSynchronize();
  ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  const std::vector<float> d = d_dev.download();

  int mismatches = 0;
  std::vector<bool> in_tile(d.size(), false);
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      in_tile[index(acc_layout, ldc, r, col)] = true;
      float want = c[index(acc_layout, ldc, r, col)];
      for (int k = 0; k < K; ++k)
        want += mma_value(a[index(layout_of<LA>, ld, r, k)]) * mma_value(b[index(layout_of<LB>, ld, k, col)]);
      const float got = d[index(acc_layout, ldc, r, col)];
      if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want) && mismatches++ < 5)
        ADD_FAILURE() << "d(" << r << ", " << col << ") = " << got << ", the host sum gives " << want;
    }
  EXPECT_EQ(mismatches, 0) << "of 256 entries";
  for (size_t e = 0; e < d.size(); ++e)
    if (!in_tile[e]) {
      EXPECT_EQ(d[e], sentinel) << "store_matrix_sync wrote outside the tile, at offset " << e;
    }
}

TEST(EmulatedWmma, Bfloat16ProductEqualsTheHostSumInEveryLayout) {
  check_product<__nv_bfloat16, 16, wmma::row_major, wmma::row_major>(wmma::mem_row_major);
  check_product<__nv_bfloat16, 16, wmma::row_major, wmma::col_major>(wmma::mem_col_major);
  check_product<__nv_bfloat16, 16, wmma::col_major, wmma::row_major>(wmma::mem_col_major);
  check_product<__nv_bfloat16, 16, wmma::col_major, wmma::col_major>(wmma::mem_row_major);
}

TEST(EmulatedWmma, HalfProductEqualsTheHostSum) {
  check_product<__half, 16, wmma::row_major, wmma::col_major>(wmma::mem_row_major);
}

// Full float inputs: the product must take them rounded to tf32, whether the kernel converts them
// with __float_to_tf32 first (as CUDA's guide asks) or not.
TEST(EmulatedWmma, Tf32ProductEqualsTheHostSumOfRoundedInputs) {
  check_product<wmma::precision::tf32, 8, wmma::row_major, wmma::col_major>(wmma::mem_row_major, /*convert=*/true);
  check_product<wmma::precision::tf32, 8, wmma::col_major, wmma::row_major>(wmma::mem_col_major, /*convert=*/false);
}

static_assert(wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>::num_elements == 8);
static_assert(wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>::num_elements == 4);
static_assert(wmma::fragment<wmma::accumulator, 16, 16, 16, float>::num_elements == 8);

// Each lane fills its share with its lane number and the warp stores the tile: every lane's number
// must appear num_elements = 8 times, so no lane holds the whole tile. Then every element doubled
// through x[] (the element-wise use CUDA allows whatever the mapping) must double the whole tile.
__global__ void lane_share_kernel(float* shares, float* doubled, const float* c) {
  const int lane = threadIdx.x % 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, float(lane));
  wmma::store_matrix_sync(shares, acc, 16, wmma::mem_row_major);
  wmma::load_matrix_sync(acc, c, 16, wmma::mem_col_major);
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= 2.0f;
  wmma::store_matrix_sync(doubled, acc, 16, wmma::mem_col_major);
}

TEST(EmulatedWmma, EachLaneHoldsAnEighthOfTheTile) {
  std::vector<float> c(256);
  for (int e = 0; e < 256; ++e) c[e] = float(e) - 100.5f;
  DeviceCopy<float> shares_dev(std::vector<float>(256, -1.0f)), doubled_dev(std::vector<float>(256, 0.0f)), c_dev(c);
  LINATTN_LAUNCH(1, 32, 0, nullptr, lane_share_kernel)(shares_dev.ptr, doubled_dev.ptr, c_dev.ptr);
  const cudaError_t err = cudaDeviceSynchronize();
  ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  std::map<float, int> count;
  for (float lane : shares_dev.download()) ++count[lane];
  EXPECT_EQ(count.size(), 32u);
  for (auto [lane, n] : count) EXPECT_EQ(n, 8) << "lane " << lane << " holds " << n << " of the 256 elements";
  const std::vector<float> doubled = doubled_dev.download();
  for (int e = 0; e < 256; ++e) EXPECT_EQ(doubled[e], 2.0f * c[e]) << "element " << e;
}

// ---- misuse --------------------------------------------------------------------------------------

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// mma_sync is warp-collective: here only lanes 0..15 reach it.
__global__ void half_warp_mma_kernel(float* d, const __nv_bfloat16* ab) {
  FragA fa;
  FragB fb;
  FragC acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, ab, 16);
  wmma::load_matrix_sync(fb, ab, 16);
  if (threadIdx.x < 16) wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

TEST(EmulatedWmma, MmaReachedByHalfTheWarpFails) {
  DeviceCopy<__nv_bfloat16> ab(std::vector<__nv_bfloat16>(256, __nv_bfloat16(1.0f)));
  DeviceCopy<float> d(std::vector<float>(256, 0.0f));
  LINATTN_LAUNCH(1, 32, 0, nullptr, half_warp_mma_kernel)(d.ptr, ab.ptr);
  const cudaError_t err = cudaDeviceSynchronize();
  EXPECT_NE(err, cudaSuccess) << "16 of 32 lanes called mma_sync and the launch succeeded";
  std::printf("as expected: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
  cudaGetLastError();  // clear it for the next test
}

// Loads a tile at ab + offset with stride ld_low on lanes 0..15 and ld_high on lanes 16..31.
__global__ void misused_load_kernel(const __nv_bfloat16* ab, int offset, int ld_low, int ld_high) {
  FragA fa;
  wmma::load_matrix_sync(fa, ab + offset, threadIdx.x < 16 ? ld_low : ld_high);
}

void misused_load(int offset, int ld_low, int ld_high) {
  DeviceCopy<__nv_bfloat16> ab(std::vector<__nv_bfloat16>(16 * 32 + 8, __nv_bfloat16(1.0f)));
  LINATTN_LAUNCH(1, 32, 0, nullptr, misused_load_kernel)(ab.ptr, offset, ld_low, ld_high);
  cudaDeviceSynchronize();
}

// Lanes 0..15 load a tile while lanes 16..31 store one: the same kind and size of exchange for the
// warp barrier, but not the same call.
__global__ void split_warp_kernel(float* tile) {
  FragC acc;
  wmma::fill_fragment(acc, 1.0f);
  if (threadIdx.x < 16)
    wmma::load_matrix_sync(acc, tile, 16, wmma::mem_row_major);
  else
    wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
}

void split_warp() {
  DeviceCopy<float> tile(std::vector<float>(256, 0.0f));
  LINATTN_LAUNCH(1, 32, 0, nullptr, split_warp_kernel)(tile.ptr);
  cudaDeviceSynchronize();
}

// Half the warp multiplies by B as column-major, half by B as row-major: exchanges of one size.
__global__ void split_mma_kernel(float* d, const __nv_bfloat16* ab) {
  FragA fa;
  FragB fb_col;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb_row;
  FragC acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, ab, 16);
  wmma::load_matrix_sync(fb_col, ab, 16);
  wmma::load_matrix_sync(fb_row, ab, 16);
  if (threadIdx.x < 16)
    wmma::mma_sync(acc, fa, fb_col, acc);
  else
    wmma::mma_sync(acc, fa, fb_row, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

void split_mma() {
  DeviceCopy<__nv_bfloat16> ab(std::vector<__nv_bfloat16>(256, __nv_bfloat16(1.0f)));
  DeviceCopy<float> d(std::vector<float>(256, 0.0f));
  LINATTN_LAUNCH(1, 32, 0, nullptr, split_mma_kernel)(d.ptr, ab.ptr);
  cudaDeviceSynchronize();
}

TEST(EmulatedWmma, MisusedCallsTrapWithWhatIsWrong) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(misused_load(8, 16, 16), "load_matrix_sync.*mptr 0x[0-9a-f]+ is not 256-bit \\(32-byte\\) aligned");
  EXPECT_DEATH(misused_load(0, 12, 12), "load_matrix_sync.*ldm 12 is not a multiple of 8");
  EXPECT_DEATH(misused_load(0, 16, 24), "load_matrix_sync.*lane [0-9]+ passes .* ldm 24.*every lane of the warp must pass the same");
  EXPECT_DEATH(split_warp(), "lane [0-9]+ is in store_matrix_sync at .*wmma_test.cpp:[0-9]+:[0-9]+, lane 0 in "
                             "load_matrix_sync at .*wmma_test.cpp:[0-9]+:[0-9]+: every lane of the warp must make the same call");
  EXPECT_DEATH(split_mma(), "lane [0-9]+ is in mma_sync at .*wmma_test.cpp:[0-9]+:[0-9]+, lane 0 in mma_sync at "
                            ".*wmma_test.cpp:[0-9]+:[0-9]+ \\(with other fragment types\\): every lane");
}

}  // namespace
