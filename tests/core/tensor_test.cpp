#include <cmath>

#include "core/flat_buffer.h"
#include "core/tensor.h"
#include "testing.h"

namespace linattn {
namespace {

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::zeros({4, 3}, DType::f32);
  Tensor v = t.view({2, 6});
  v.data<float>()[7] = 5;
  EXPECT_EQ(t.data<float>()[7], 5);
  Tensor rows = t.narrow(2, 4);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  EXPECT_EQ(rows.data<float>()[1], 5);  // element 7 = row 2, column 1
  EXPECT_TRUE(aligned64(t.raw()));
  EXPECT_THROW(t.view({5, 3}), Error);
  EXPECT_THROW(t.narrow(3, 5), Error);
  EXPECT_THROW(t.data<double>(), Error);
}

TEST(Tensor, ConvertAndFill) {
  Tensor t = Tensor::empty({3}, DType::f64);
  t.fill_(1.5);
  Tensor f = t.to(DType::f32);
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_EQ(f.data<float>()[2], 1.5f);
  EXPECT_EQ(t.str(), "f64[3]");
}

// bfloat16 keeps float32's exponent and 8 bits of mantissa (7 stored); the conversion rounds to
// nearest, ties to even. 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even 1.
TEST(Tensor, Bfloat16RoundsToNearestEvenAndConvertsBothWays) {
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(to_float(from_float(1.0f)), 1.0f);
  EXPECT_EQ(to_float(from_float(1.0f + 0x1p-8f)), 1.0f);                       // tie: down to even
  EXPECT_EQ(to_float(from_float(1.0f + 0x1p-7f + 0x1p-8f)), 1.0f + 0x1p-6f);  // tie: up to even
  EXPECT_EQ(to_float(from_float(1.0f + 0x1p-8f + 0x1p-12f)), 1.0f + 0x1p-7f); // above the tie: up
  EXPECT_EQ(to_float(from_float(-3.0e38f)), -3.00405527e38f);
  EXPECT_TRUE(std::isnan(to_float(from_float(std::nanf("")))));
  EXPECT_TRUE(std::isinf(to_float(from_float(INFINITY))));

  Tensor t = Tensor::empty({3}, DType::f32);
  t.data<float>()[0] = 0.1f, t.data<float>()[1] = -2.5f, t.data<float>()[2] = 1e-3f;
  Tensor b = t.to(DType::bf16);
  EXPECT_EQ(b.str(), "bf16[3]");
  EXPECT_EQ(b.nbytes(), 6u);
  Tensor back = b.to(DType::f64);
  for (int i = 0; i < 3; ++i) {
    double x = t.data<float>()[i];
    EXPECT_LE(std::abs(back.data<double>()[i] - x), std::abs(x) * 0x1p-9) << i;  // half an ulp of 8 bits
  }
  EXPECT_EQ(back.data<double>()[1], -2.5);  // exact in bf16
  b.fill_(0.75);
  EXPECT_EQ(b.narrow(2, 3).item(), 0.75);
}

TEST(Arena, AFreedSliceIsReusedAndThePeakCountsLiveBytesNotTheSum) {
  Arena arena(Device::cpu, 1 << 20);
  arena.poison_freed(true);
  ArenaScope scope(arena);
  const void* first = nullptr;
  {
    Tensor a = Tensor::scratch({1000}, DType::f32);
    EXPECT_TRUE(aligned64(a.raw()));
    EXPECT_EQ(arena.used(), align_up(4000));
    a.fill_(1.0);
    first = a.raw();
    Tensor view = a.view({10, 100});
    a = Tensor();
    EXPECT_EQ(arena.used(), align_up(4000));  // the view still holds the slice
  }
  EXPECT_EQ(arena.used(), 0u);
  Tensor b = Tensor::scratch({1000}, DType::f32);
  EXPECT_EQ(b.raw(), first);                       // the same slice again, within the step
  EXPECT_TRUE(std::isnan(b.data<float>()[999]));   // poisoned when it was freed
  EXPECT_EQ(arena.high_water(), align_up(4000));
  EXPECT_EQ(arena.allocated(), 2 * align_up(4000));
  EXPECT_EQ(arena.blocks(), 1u);
}

// Slices of 1024-byte units a | b | c | d | e (1, 3, 1, 2, 1 units): a request goes to the smallest
// gap that holds it, and a freed slice merges with the gaps beside it.
TEST(Arena, GapsAreFilledBestFitAndMergeWithTheirNeighbours) {
  Arena arena(Device::cpu, 1 << 20);
  ArenaScope scope(arena);
  auto units = [](int64_t n) { return Tensor::scratch({n * 256}, DType::f32); };
  Tensor a = units(1), b = units(3), c = units(1), d = units(2), e = units(1);
  const void* b_at = b.raw();
  const void* d_at = d.raw();
  EXPECT_EQ(static_cast<const char*>(d_at) - static_cast<const char*>(b_at), 4 * 1024);
  b = Tensor(), d = Tensor();  // gaps of 3 and 2 units
  Tensor two = units(2);
  EXPECT_EQ(two.raw(), d_at);  // the 2-unit gap, not the first gap that holds it
  Tensor one = units(1);
  EXPECT_EQ(one.raw(), b_at);  // a gap before the free end of the block
  one = Tensor(), c = Tensor();  // b's 3 units and c's 1 merge into 4
  Tensor four = units(4);
  EXPECT_EQ(four.raw(), b_at);
  EXPECT_EQ(arena.high_water(), size_t(8 * 1024));  // nothing ever went past e
  EXPECT_EQ(arena.used(), size_t(8 * 1024));
  EXPECT_EQ(arena.blocks(), 1u);
}

// Kept slices (what tape nodes keep until backward, Tensor::scratch_kept) come from blocks of their
// own: a short-lived slice freed between them leaves no gap under them, and the high-water mark
// counts both parts; reset() merges each part's blocks into one.
TEST(Arena, KeptSlicesComeFromBlocksOfTheirOwn) {
  Arena arena(Device::cpu, 1 << 20);
  auto step = [&] {
    ArenaScope scope(arena);
    Tensor kept1 = Tensor::scratch_kept({1024}, DType::f32);
    Tensor transient = Tensor::scratch({4096}, DType::f32);
    Tensor kept2 = Tensor::scratch_kept({1024}, DType::f32);
    EXPECT_EQ(static_cast<const char*>(kept2.raw()) - static_cast<const char*>(kept1.raw()), 4096)
        << "the kept slices lie side by side";
    transient = Tensor();
    Tensor again = Tensor::scratch({4096}, DType::f32);  // takes the short-lived part's freed slice
    EXPECT_EQ(arena.high_water(), size_t(2 * 4096 + 4 * 4096));
  };
  step();
  EXPECT_EQ(arena.blocks(), 2u);  // the first block and the kept part's
  EXPECT_EQ(arena.used(), 0u);
  arena.reset();
  step();
  EXPECT_EQ(arena.blocks(), 2u);  // one per part, nothing more taken from the system
}

TEST(Arena, ResetMergesTheBlocksOfAStepIntoOneThatHoldsTheNextStep) {
  Arena arena(Device::cpu, 1 << 20);
  auto step = [&] {
    ArenaScope scope(arena);
    Tensor a = Tensor::scratch({1000}, DType::f32);
    Tensor big = Tensor::scratch({int64_t(1) << 19}, DType::f32);  // 2 MiB: more than the first block
    return std::pair{a.raw(), big.raw()};
  };
  step();
  EXPECT_EQ(arena.blocks(), 2u);
  const size_t high = arena.high_water();
  EXPECT_EQ(high, align_up(4000) + (size_t(2) << 20));
  EXPECT_EQ(arena.used(), 0u);
  arena.reset();
  EXPECT_EQ(arena.blocks(), 1u);
  EXPECT_EQ(arena.capacity(), high);  // one block that holds the whole step
  EXPECT_EQ(arena.allocated(), 0u);
  const auto [a, big] = step();
  EXPECT_EQ(arena.blocks(), 1u);  // the step took nothing from the system
  EXPECT_EQ(static_cast<const char*>(big) - static_cast<const char*>(a), std::ptrdiff_t(align_up(4000)));
  EXPECT_EQ(arena.high_water(), high);
  // Outside a scope, scratch tensors come from the heap.
  Tensor heap = Tensor::scratch({1000}, DType::f32);
  EXPECT_EQ(heap.storage()->bytes, 4000u);
  EXPECT_EQ(arena.used(), 0u);
}

TEST(Arena, ASliceOutlivesItsArena) {
  Tensor t;
  {
    Arena arena;
    ArenaScope scope(arena);
    t = Tensor::scratch({16}, DType::f64);
  }
  t.fill_(2.5);  // the block went with the arena's last slice, not with the arena
  EXPECT_EQ(t.narrow(15, 16).item(), 2.5);
}

TEST(FlatBuffer, ViewsAreAlignedAndCoverTheBuffer) {
  FlatLayout layout;
  layout.add("a", {3, 5});
  layout.add("b", {7});
  layout.add("c", {2, 2, 2});
  EXPECT_THROW(layout.add("b", {1}), Error);
  EXPECT_EQ(layout.count(), 15 + 7 + 8);
  FlatBuffer params(layout, DType::f32);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(aligned64(params[i].raw()));
  params[1].fill_(2.0);
  const float* all = params.all().data<float>();
  EXPECT_EQ(all[layout.entries()[1].offset + 6], 2.0f);
  EXPECT_EQ(layout.find("c"), 2);
  EXPECT_EQ(layout.find("zz"), -1);
}

TEST(Rng, SameSeedSameStreamAndStateRestores) {
  Rng a(42), b(42);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
  auto saved = a.state();
  double x = a.normal();
  b.set_state(saved);
  EXPECT_EQ(b.normal(), x);
  // The normal draws have the right moments (10^5 draws: standard errors ~0.003 and ~0.0045).
  Rng r(7);
  double s = 0, s2 = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double v = r.normal();
    s += v;
    s2 += v * v;
  }
  EXPECT_NEAR(s / n, 0.0, 0.02);
  EXPECT_NEAR(s2 / n, 1.0, 0.03);
}

TEST(Shape, ErrorsNameTheShape) {
  Shape s{2, 3};
  try {
    (void)s[2];
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((Shape{1, 2, 3, 4, 5}), Error);
}

}  // namespace
}  // namespace linattn
