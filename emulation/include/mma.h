// linattn's stand-in for the CUDA toolkit's mma.h in the emulation build: the warp matrix functions
// (nvcuda::wmma), D = A B + C on 16 x 16 tiles, written from the CUDA programming guide. Supported:
//   fragment<matrix_a | matrix_b, 16, 16, 16, __nv_bfloat16 | __half, row_major | col_major>
//   fragment<matrix_a | matrix_b, 16, 16, 8, precision::tf32, row_major | col_major>
//   fragment<accumulator, 16, 16, 16 | 8, float>
// with fill_fragment, load_matrix_sync, store_matrix_sync, mma_sync and __float_to_tf32.
//
// A fragment holds one lane's share of the tile: num_elements = (tile elements) / 32. CUDA leaves
// the element-to-lane mapping unspecified; here lane l holds the tile elements e = l + 32 i,
// i < num_elements, counted in the row-major order of the tile's logical shape (matrix_a m x k,
// matrix_b k x n, accumulator m x n), whatever the layout in memory. So code that assumes a lane
// holds a whole tile, or a particular mapping, goes wrong here as it does on a GPU.
//
// Loads, stores and mma_sync are warp-collective, as in CUDA: every lane of the warp must call them
// with the same arguments and fragment types (checked: a mismatch is reported), and a call that some
// lane never reaches is reported by the warp barrier. A load reads after every lane has arrived and
// before any lane leaves; a store writes after every lane has arrived, so reading another lane's
// stored elements needs a __syncwarp, as on a GPU. mma_sync gathers the warp's A and B shares
// and computes this lane's share of D from exact float32 products of the inputs (tf32 inputs rounded
// with cuda_emu::round_to_tf32 first), accumulated in float32 in the order k = 0, 1, ..., K - 1
// after C. The GPU's tensor cores add in an order of their own: compare with a tolerance.
//
// A misaligned or mis-strided tile pointer, or lanes that disagree, is a fault on the GPU (or an
// undefined result); here it prints what is wrong and where to stderr and traps.
#pragma once

#include <cuda_bf16.h>
#include <cuda_emulation/tf32.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

// A float rounded to TF32 (cvt.rna.tf32.f32 on the GPU: nearest, ties away from zero), still a float.
inline float __float_to_tf32(float x) { return cuda_emu::round_to_tf32(x); }

namespace detail {

template <class Use, int m, int n, int k>
struct Tile;
template <int m, int n, int k>
struct Tile<matrix_a, m, n, k> {
  static constexpr int rows = m, cols = k;
};
template <int m, int n, int k>
struct Tile<matrix_b, m, n, k> {
  static constexpr int rows = k, cols = n;
};
template <int m, int n, int k>
struct Tile<accumulator, m, n, k> {
  static constexpr int rows = m, cols = n;
};

template <class T>
constexpr bool is_16_bit_float = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;
template <class L>
constexpr bool is_layout = std::is_same_v<L, row_major> || std::is_same_v<L, col_major>;

template <class Use, int m, int n, int k, class T, class Layout>
constexpr bool supported() {
  if constexpr (std::is_same_v<Use, accumulator>)
    return std::is_same_v<T, float> && std::is_void_v<Layout> && m == 16 && n == 16 && (k == 16 || k == 8);
  else
    return (std::is_same_v<Use, matrix_a> || std::is_same_v<Use, matrix_b>) && is_layout<Layout> &&
           ((is_16_bit_float<T> && m == 16 && n == 16 && k == 16) ||
            (std::is_same_v<T, precision::tf32> && m == 16 && n == 16 && k == 8));
}

// What a fragment stores for an element type: tf32 elements are floats, as in CUDA.
template <class T>
struct Storage {
  using type = T;
};
template <>
struct Storage<precision::tf32> {
  using type = float;
};

}  // namespace detail

template <class Use, int m, int n, int k, class T, class Layout = void>
class fragment {
  static_assert(detail::supported<Use, m, n, k, T, Layout>(),
                "the emulated WMMA supports matrix_a/matrix_b 16x16x16 of __nv_bfloat16 or __half and 16x16x8 of "
                "precision::tf32 (row_major or col_major), and float accumulators 16x16x16 and 16x16x8 (no layout)");

 public:
  using element_type = T;
  using storage_element_type = typename detail::Storage<T>::type;
  enum { num_elements = detail::Tile<Use, m, n, k>::rows * detail::Tile<Use, m, n, k>::cols / 32 };
  enum { num_storage_elements = num_elements };
  storage_element_type x[num_elements];
};

namespace detail {

using Site = cuda_emu::Site;

// The calling thread's lane: its linear index in the block, modulo the warp size.
inline int lane_id() { return int(((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) % 32); }

// Where the element `slot` of `lane`'s share lies in a tile of `cols` columns.
struct Position {
  int row, col;
};
inline Position position(int lane, int slot, int cols) {
  const int e = lane + 32 * slot;
  return {e / cols, e % cols};
}

[[noreturn]] inline void misuse(const char* function, const std::string& what, Site site) {
  std::fprintf(stderr, "%s:%u: nvcuda::wmma::%s in block (%u, %u, %u), thread (%u, %u, %u): %s\n", site.file_name(),
               unsigned(site.line()), function, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y,
               threadIdx.z, what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

inline std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

// CUDA's requirements on a tile in memory: mptr 256-bit aligned, ldm a multiple of 16 bytes.
template <class S>
void check_tile(const char* function, const S* mptr, unsigned ldm, Site site) {
  if (reinterpret_cast<uintptr_t>(mptr) % 32 != 0)
    misuse(function, "mptr " + hex(mptr) + " is not 256-bit (32-byte) aligned, as CUDA requires of a tile; " +
                         "start each tile on a 32-byte boundary",
           site);
  constexpr unsigned multiple = 16 / sizeof(S);
  if (ldm % multiple != 0)
    misuse(function, "ldm " + std::to_string(ldm) + " is not a multiple of " + std::to_string(multiple) + " (16 bytes of " +
                         std::to_string(sizeof(S)) + "-byte elements), as CUDA requires; pad the stride",
           site);
}

inline void check_layout(const char* function, layout_t layout, Site site) {
  if (layout != mem_row_major && layout != mem_col_major)
    misuse(function, "layout " + std::to_string(int(layout)) + " is neither mem_row_major nor mem_col_major", site);
}

// A collective function on given fragment types; one object each, so that its address tells lanes
// in different calls apart.
struct Operation {
  const char* function;
};
template <class... Fragments>
inline constexpr Operation load_operation{"load_matrix_sync"};
template <class... Fragments>
inline constexpr Operation store_operation{"store_matrix_sync"};
template <class... Fragments>
inline constexpr Operation mma_operation{"mma_sync"};

// What every lane of a collective call must agree on: the call (function, fragment types and source
// position) and its arguments (none for mma_sync).
struct Call {
  const Operation* operation;
  Site site;
  const void* mptr = nullptr;
  unsigned ldm = 0;
  int layout = 0;
};

inline const char* layout_name(int layout) {
  return layout == mem_row_major ? "mem_row_major" : layout == mem_col_major ? "mem_col_major" : "invalid";
}

inline std::string where(const Call& c) {
  return std::string(c.operation->function) + " at " + c.site.file_name() + ":" + std::to_string(c.site.line()) +
         ":" + std::to_string(c.site.column());
}

inline bool same_place(Site a, Site b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::string_view(a.file_name()) == b.file_name());
}

// A lane's call reported against lane 0's, if they differ.
inline void report_if_different(const Call& mine, const Call& lane0) {
  const auto lane = [] { return "lane " + std::to_string(lane_id()); };
  if (mine.operation != lane0.operation || !same_place(mine.site, lane0.site))
    misuse(mine.operation->function,
           lane() + " is in " + where(mine) + ", lane 0 in " + where(lane0) +
               (mine.operation != lane0.operation && std::string_view(mine.operation->function) == lane0.operation->function
                    ? " (with other fragment types)"
                    : "") +
               ": every lane of the warp must make the same call",
           mine.site);
  if (mine.mptr != lane0.mptr || mine.ldm != lane0.ldm || mine.layout != lane0.layout)
    misuse(mine.operation->function,
           lane() + " passes mptr " + hex(mine.mptr) + ", ldm " + std::to_string(mine.ldm) + ", " +
               layout_name(mine.layout) + " but lane 0 mptr " + hex(lane0.mptr) + ", ldm " + std::to_string(lane0.ldm) +
               ", " + layout_name(lane0.layout) + ": every lane of the warp must pass the same",
           mine.site);
}

// 8 bytes that differ between two calls that differ in one field (each step is a bijection).
inline uint64_t fingerprint(const Call& c) {
  const uint64_t words[] = {uint64_t(reinterpret_cast<uintptr_t>(c.operation)),
                            uint64_t(reinterpret_cast<uintptr_t>(c.site.file_name())),
                            uint64_t(c.site.line()) << 32 | c.site.column(),
                            uint64_t(reinterpret_cast<uintptr_t>(c.mptr)), uint64_t(c.ldm) << 32 | uint32_t(c.layout)};
  uint64_t h = 0xcbf29ce484222325u;
  for (uint64_t w : words) h = (h ^ w) * 0x100000001b3u;
  return h;
}

// CUDA leaves the result undefined unless every lane of the warp makes the same call with the same
// arguments. The collective's own exchange carries each lane's fingerprint; `fingerprints` points
// to the first of the 32 gathered, `stride` bytes apart. Only if they differ do the lanes, all of
// them (they all see the same fingerprints), exchange their whole calls to say which lane differs.
inline void check_same_call(const Call& mine, const char* fingerprints, size_t stride) {
  const auto at = [&](int lane) {
    uint64_t f;
    std::memcpy(&f, fingerprints + lane * stride, sizeof f);
    return f;
  };
  bool same = true;
  for (int lane = 1; lane < 32; ++lane) same = same && at(lane) == at(0);
  if (same) return;
  Call all[32];
  cuda_emu::warp_exchange(&mine, sizeof mine, all, mine.site);
  report_if_different(mine, all[0]);
}

// The warp barrier of a load or a store: every lane arrives, and all make the same call.
inline void arrive(const Call& mine) {
  const uint64_t f = fingerprint(mine);
  uint64_t all[32];
  cuda_emu::warp_exchange(&f, sizeof f, all, mine.site);
  check_same_call(mine, reinterpret_cast<const char*>(all), sizeof f);
}

// Memory offset of tile element (row, col) in the given layout.
inline size_t offset(Position p, unsigned ldm, layout_t layout) {
  return layout == mem_row_major ? size_t(p.row) * ldm + p.col : size_t(p.col) * ldm + p.row;
}

template <class Use, int m, int n, int k, class T, class L>
void load(fragment<Use, m, n, k, T, L>& a, const typename fragment<Use, m, n, k, T, L>::storage_element_type* mptr,
          unsigned ldm, layout_t layout, Site site) {
  constexpr const char* function = "load_matrix_sync";
  check_layout(function, layout, site);
  check_tile(function, mptr, ldm, site);
  arrive(Call{&load_operation<fragment<Use, m, n, k, T, L>>, site, mptr, ldm, int(layout)});
  const int lane = lane_id();
  for (int i = 0; i < a.num_elements; ++i) a.x[i] = mptr[offset(position(lane, i, Tile<Use, m, n, k>::cols), ldm, layout)];
  // The GPU loads the whole warp's shares at once: no lane may write the tile before all have read.
  cuda_emu::warp_op(cuda_emu::WarpOpKind::sync, 0xffffffffu, 0, 0, 32, site);
}

// The value an mma multiplies: 16-bit floats exactly, tf32 elements rounded as the tensor cores take them.
inline float mma_input(__nv_bfloat16 x) { return float(x); }
inline float mma_input(__half x) { return float(x); }
inline float mma_input(float tf32) { return cuda_emu::round_to_tf32(tf32); }

}  // namespace detail

// Not collective: each lane fills its own share (so every lane passes the same v, as in CUDA).
template <class Use, int m, int n, int k, class T, class L>
void fill_fragment(fragment<Use, m, n, k, T, L>& a, const std::conditional_t<std::is_same_v<T, precision::tf32>, float, T>& v) {
  for (int i = 0; i < a.num_elements; ++i) a.x[i] = v;
}

// matrix_a and matrix_b: the layout is the fragment's.
template <class Use, int m, int n, int k, class T, class L>
  requires(!std::is_same_v<Use, accumulator>)
void load_matrix_sync(fragment<Use, m, n, k, T, L>& a,
                      const typename fragment<Use, m, n, k, T, L>::storage_element_type* mptr, unsigned ldm,
                      cuda_emu::Site site = cuda_emu::Site::current()) {
  detail::load(a, mptr, ldm, std::is_same_v<L, row_major> ? mem_row_major : mem_col_major, site);
}

// Accumulators: the layout in memory is an argument.
template <int m, int n, int k>
void load_matrix_sync(fragment<accumulator, m, n, k, float>& a, const float* mptr, unsigned ldm, layout_t layout,
                      cuda_emu::Site site = cuda_emu::Site::current()) {
  detail::load(a, mptr, ldm, layout, site);
}

template <int m, int n, int k>
void store_matrix_sync(float* mptr, const fragment<accumulator, m, n, k, float>& a, unsigned ldm, layout_t layout,
                       cuda_emu::Site site = cuda_emu::Site::current()) {
  constexpr const char* function = "store_matrix_sync";
  detail::check_layout(function, layout, site);
  detail::check_tile(function, mptr, ldm, site);
  using Frag = fragment<accumulator, m, n, k, float>;
  detail::arrive(detail::Call{&detail::store_operation<Frag>, site, mptr, ldm, int(layout)});
  const int lane = detail::lane_id();
  for (int i = 0; i < a.num_elements; ++i) mptr[detail::offset(detail::position(lane, i, n), ldm, layout)] = a.x[i];
}

// d = a b + c; d may be c.
template <int m, int n, int k, class T, class LA, class LB>
void mma_sync(fragment<accumulator, m, n, k, float>& d, const fragment<matrix_a, m, n, k, T, LA>& a,
              const fragment<matrix_b, m, n, k, T, LB>& b, const fragment<accumulator, m, n, k, float>& c,
              cuda_emu::Site site = cuda_emu::Site::current()) {
  using FragA = fragment<matrix_a, m, n, k, T, LA>;
  using FragB = fragment<matrix_b, m, n, k, T, LB>;
  struct Share {
    uint64_t fingerprint;
    typename FragA::storage_element_type a[FragA::num_elements];
    typename FragB::storage_element_type b[FragB::num_elements];
  };
  const detail::Call call{&detail::mma_operation<FragA, FragB>, site};
  Share mine{detail::fingerprint(call), {}, {}};
  for (int i = 0; i < FragA::num_elements; ++i) mine.a[i] = a.x[i];
  for (int i = 0; i < FragB::num_elements; ++i) mine.b[i] = b.x[i];
  Share all[32];
  cuda_emu::warp_exchange(&mine, sizeof mine, all, site);
  detail::check_same_call(call, reinterpret_cast<const char*>(&all[0].fingerprint), sizeof(Share));
  const int lane = detail::lane_id();
  float out[fragment<accumulator, m, n, k, float>::num_elements];
  for (int i = 0; i < d.num_elements; ++i) {
    const detail::Position p = detail::position(lane, i, n);
    float sum = c.x[i];
    for (int kk = 0; kk < k; ++kk) {
      const int ea = p.row * k + kk, eb = kk * n + p.col;  // A(row, kk) and B(kk, col) in their tiles
      sum += detail::mma_input(all[ea % 32].a[ea / 32]) * detail::mma_input(all[eb % 32].b[eb / 32]);
    }
    out[i] = sum;
  }
  for (int i = 0; i < d.num_elements; ++i) d.x[i] = out[i];
}

}  // namespace nvcuda::wmma
