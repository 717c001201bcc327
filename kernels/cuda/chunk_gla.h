// The chunk-parallel passes that the CUDA linear attention and GLA (kernels/cuda/linear_attn.cu,
// gla.cu) are made of (derivations.md, "Linear attention" and "GLA"; linear attention is GLA without
// gates). Per (sequence, head), chunks of kChunk = 64 tokens (kernels/cuda/chunk_layout.h), the
// sequences being the batch's rows or its documents (Problem::seqs, kernels/sequences.h):
//  - the intra-chunk work runs in parallel over (tile, 64-column tile, head), a tile being a chunk of
//    one sequence (kernels/sequences.h's tile indices, at most one idle per document): the chunk's
//    contribution to the state (chunk_states), the outputs (output), dv (grad_v), dq, dk and GLA's
//    in-chunk gate gradient (grad_qk);
//  - the only sequential part is the state pass, its own light kernel: one thread per (sequence, head)
//    state entry walks the sequence's chunks, S_{c+1} = diag(e^{G_C}) S_c + U_c (forward) or dS_c = diag(e^{G_C}) dS_{c+1} + W_c
//    (backward), and leaves every chunk boundary's state in a buffer of Problem::state_words().
// The intra-chunk products in Problem::precision: float32 on the CUDA cores, or bf16 / tf32 operands
// on the tensor cores with float32 accumulation (chunk_gla.cu says which parts); the state pass and
// every pointwise step in float32. Every launch on linattn::cuda::compute_stream().
// Without LINATTN_CUDA nothing here is defined (kernels/cuda/gla.h and linear_attn.h throw instead).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/chunk_layout.h"
#include "kernels/cuda/floats.h"
#include "kernels/op_types.h"
#include "kernels/sequences.h"

namespace linattn::cuda::chunk {

// One call of a mixer on raw pointers (shapes in kernels/backend.h's MixerArgs); null = absent. q, k,
// v and g are float32, or in a backward the bf16 copies a tape node keeps (kernels/cuda/floats.h):
// the passes read them as float32, exactly.
template <class T>
struct Mixer {
  int64_t B = 0, len = 0, H = 0, Dk = 0, Dv = 0;
  T scale = 1;
  FeatureMap phi = FeatureMap::identity;
  bool normalize = false;
  MatmulPrecision precision = MatmulPrecision::f32;  // of the intra-chunk products (Problem::precision)
  Sequences seqs;  // the documents of the batch, on the device ({} = its rows): Problem::seqs
  T *o = nullptr, *ht = nullptr, *zt = nullptr;
  Floats q, k, v, g;
  const T *h0 = nullptr, *z0 = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr, *dg = nullptr, *dh0 = nullptr, *dz0 = nullptr;
  bool write = false;  // dq, dk, dv and dg are written (=), not added into (MixerArgs::write)
  bool final_state = true;  // ht and zt are written (MixerArgs::final_state)
  const T *dO = nullptr, *dht = nullptr, *dzt = nullptr;
};

// A [B, T, H, ld] tensor of token rows (float32 or bf16), read from its first column; ld 0: the same
// row for every token.
struct Rows {
  Floats p;
  int64_t ld = 0;
};

// Where a pass writes token rows: [B, T, H, ld], its first `cols` columns; += when `accumulate`.
struct OutRows {
  float* p = nullptr;
  int64_t ld = 0, cols = 0;
  bool accumulate = false;
};

// What every pass of one mixer call shares. The value side has W columns (Dv, or Dv + 1 for the
// normalized form's [v | 1]). States are [state_slots(), H, Dk, W]: sequence s's chunk c, at tile
// index i (kernels/sequences.h), has its start's state (forward) or gradient (backward) in slot i + s
// and its end's in slot i + s + 1, so a sequence of n chunks owns n + 1 consecutive slots (the rows:
// row b's are b * (chunks() + 1) ..). Initial and final states follow kernels/sequences.h's
// initial_state_row and final_state_row.
struct Problem {
  int64_t B = 0, T = 0, H = 0, Dk = 0, W = 0;
  Sequences seqs;            // the documents of the batch, on the device; {} = the B rows
  Floats q;  // [B, T, H, Dk], before the feature map
  Floats k;  // [B, T, H, Dk], before the feature map
  Rows v;    // [B, T, H, W]
  const float* G = nullptr;  // [B, T, H, Dk]: in-chunk inclusive cumulative log-gates (gate_cumsum); null: no gate
  FeatureMap phi = FeatureMap::identity;
  float scale = 1;
  MatmulPrecision precision = MatmulPrecision::f32;  // the intra-chunk products' operands

  LINATTN_HD int64_t chunks() const { return (T + kChunk - 1) / kChunk; }  // of a row
  LINATTN_HD int64_t sequences() const { return sequence_count(seqs, B); }
  LINATTN_HD int64_t tiles() const { return tile_count(seqs, B, T, kChunk); }
  LINATTN_HD int64_t state_slots() const { return tiles() + sequences(); }
  int64_t state_words() const { return state_slots() * H * Dk * W; }
};

// G: [B, T, H, Dk] the inclusive cumulative sum of g [B, T, H, Dk] from each chunk's first token.
void gate_cumsum(float* G, Floats g, const Problem& p);
// states (Problem): the state at the start of every chunk and at every sequence's end, from h0
// [B, H, Dk, W] (null: zeros).
void forward_states(float* states, const Problem& p, const float* h0);
// dstates (Problem): dS at the end of every chunk and at every sequence's start, from dht [B, H, Dk,
// W] (null: zeros) and dO [B, T, H, W].
void backward_states(float* dstates, const Problem& p, Rows dO, const float* dht);
// out = a (φ(Q) ⊙ e^G) S_c + b A V per chunk, A_ij = Σ_d φ(q_id) φ(k_jd) e^(G_id − G_jd) for j <= i.
void output(OutRows out, const Problem& p, const float* states, float a, float b);
// dv += (φ(K) ⊙ e^(G_C − G)) dS_{c+1} + scale Aᵀ dO per chunk (the first out.cols value columns).
void grad_v(OutRows dv, const Problem& p, Rows dO, const float* dstates);
// dq, dk += their gradients (through φ') from dO and the states; with gates also dg += the in-chunk
// reverse sums of q ⊙ dq − k ⊙ dk and dg_chunks [tiles(), H, Dk] = each chunk's total of them.
// write: = instead of +=, as if onto zeros.
void grad_qk(float* dq, float* dk, float* dg, float* dg_chunks, const Problem& p, Rows dO, const float* states,
             const float* dstates, bool write);
// dg += what later chunks and the final state add: Σ over later chunks' totals + rowsum(dht ⊙ S_T).
void gate_grad_finish(float* dg, float* dg_chunks, const Problem& p, const float* dht, const float* states);

// Device memory for one mixer call's intermediates, from the runtime's caching allocator
// (core/cuda/runtime.h), given back to it when the Scratch goes.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  float* floats(int64_t n);

 private:
  std::vector<void*> buffers_;
};

// ---- pointwise steps ----
// dst [rows, W + 1] = [src | extra] (src null: zeros; extra null: `fill`).
void append_column(float* dst, Floats src, const float* extra, int64_t rows, int64_t W, float fill);
// o [rows, Dv] = num / (den + eps) from o2 [rows, Dv + 1] = [num | den].
void normalized_output(float* o, const float* o2, int64_t rows, int64_t Dv);
// dO2 [rows, Dv + 1]: forward o = num / (den + eps)  =>  dnum = dO / (den + eps), dden = −(dO · o) / (den + eps).
void normalized_grad(float* dO2, const float* dO, const float* o, const float* den, int64_t rows, int64_t Dv);
// dst [B, H, Dk, Dv] (and dst_last [B, H, Dk], the column Dv, when not null) = or += the states
// (Problem) of the rows: `final`: each row's last sequence's end (ht, zt), else its first sequence's
// start (dh0, dz0).
void state_out(float* dst, float* dst_last, const float* states, bool final, const Problem& p, int64_t Dv,
               bool accumulate);

}  // namespace linattn::cuda::chunk
