// DeltaNet's and Gated DeltaNet's kernel arguments and the layout of their `saved` buffer: what the
// CPU kernels (kernels/cpu/deltanet.h) and the CUDA kernels (kernels/cuda/deltanet.h) both take,
// in the neutral vocabulary. Plain C++ with no tensor type, so that device code can include it.
#pragma once

#include <cstdint>

#include "kernels/op_types.h"

namespace linattn {

constexpr int64_t kDeltaNetDefaultChunkSize = 64;

// Everything one DeltaNet kernel call reads and writes. A forward reads the inputs and writes o, ht
// and (chunk form) `saved`; a backward reads the inputs, `saved` (chunk form) and the upstream
// gradients, and accumulates into the gradients. Pointers a kernel does not use may stay null.
// A plain aggregate of pointers and sizes, so the CUDA kernels take it by value too
// (kernels/cuda/deltanet.h).
template <class T>
struct DeltaNetArgs {
  int64_t B = 0, len = 0, H = 0, Dk = 0, Dv = 0;  // len: the sequence length T
  T scale = 1;
  int64_t chunk_size = kDeltaNetDefaultChunkSize;  // the chunk forms: 16, 32 or 64 (any C >= 1 works)
  // the CUDA chunk forward's intra-chunk products (K K^T, Q K^T): bf16 or tf32 on the tensor cores
  // (backend::matmul_precision()); the CPU kernels ignore it
  MatmulPrecision precision = MatmulPrecision::f32;
  // the CUDA kernels: the documents of the batch (kernels/op_types.h; {} = its rows), on the device;
  // the CPU kernels take rows (their entries call them per document, kernels/cpu/sequence_calls.h)
  Sequences seqs;
  // forward outputs
  T* o = nullptr;      // [B, T, H, Dv]
  T* ht = nullptr;     // [B, H, Dk, Dv] or nullptr
  T* saved = nullptr;  // [deltanet_chunk_saved_size(...)]: chunk forward writes (nullptr: no backward follows), chunk backward reads
  // inputs
  const T* q = nullptr;     // [B, T, H, Dk]
  const T* k = nullptr;     // [B, T, H, Dk]
  const T* v = nullptr;     // [B, T, H, Dv]
  const T* beta = nullptr;  // [B, T, H] in (0, 1)
  const T* a = nullptr;     // [B, T, H] log-decay <= 0 (Gated DeltaNet), or nullptr (DeltaNet)
  const T* h0 = nullptr;    // [B, H, Dk, Dv] or nullptr
  // upstream gradients
  const T* dO = nullptr;   // [B, T, H, Dv]
  const T* dht = nullptr;  // [B, H, Dk, Dv] or nullptr
  // gradients (+=)
  T* dq = nullptr;     // [B, T, H, Dk]
  T* dk = nullptr;     // [B, T, H, Dk]
  T* dv = nullptr;     // [B, T, H, Dv]
  T* dbeta = nullptr;  // [B, T, H]
  T* da = nullptr;     // [B, T, H], or nullptr when a is
  T* dh0 = nullptr;    // [B, H, Dk, Dv] or nullptr
};

// Elements of the `saved` buffer the chunkwise forward fills and the chunkwise backward reads, so
// that the backward recomputes nothing (the gates are recomputed from a). Layout: for each
// (batch, head) [B*H], for each chunk [ceil(T/C)], one block of
//   S0   [Dk, Dv]  the state at the chunk's start,
//   Ainv [C, C]    A^-1 (unit lower-triangular, zeros above the diagonal),
//   PG   [C, C]    P = tril(Q K^T) . D on and below the diagonal; K K^T . D (symmetric) above it,
//   U'   [C, Dv]   the state updates U' = A^-1 diag(beta) R,
//   R    [C, Dv]   R = V - diag(gamma) K S0,
// i.e. B*H*ceil(T/C)*(Dk*Dv + 2*C*C + 2*C*Dv) elements (a partial last chunk of n tokens uses the
// first n rows/columns of its block). For Dk = Dv = C = 64 that is 5 floats per token, head and
// head dimension: five times the size of v (about 42 MB at B=4, H=4, T=2048).
int64_t deltanet_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv,
                                  int64_t chunk_size = kDeltaNetDefaultChunkSize);

}  // namespace linattn
