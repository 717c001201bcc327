#ifdef LINATTN_CUDA
#include "kernels/cuda/entries.h"

#include <cmath>
#include <optional>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "kernels/deltanet.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/bias.h"
#include "kernels/cuda/columns.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/deltanet.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/floats.h"
#include "kernels/cuda/gdn_decay.h"
#include "kernels/cuda/gla.h"
#include "kernels/cuda/linear_attn.h"
#include "kernels/cuda/mamba2.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/mixer_args.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/rope.h"
#include "kernels/deltanet_args.h"
#include "kernels/sequences.h"

namespace linattn::cuda::entry {

namespace {

// Our CUDA kernels are float32 (bf16 comes with mixed precision); float64 is the CPU's check type.
void require_f32(const char* op, In t) {
  LINATTN_CHECK(t.dtype() == DType::f32, op, ": the CUDA kernels take float32 tensors, got ", t.str(),
                " (train.dtype f64 runs on the CPU only)");
}

// A bf16 tensor's data as the bit patterns the kernels take.
uint16_t* bf16_bits(In t) { return reinterpret_cast<uint16_t*>(t.data<bfloat16>()); }

// What a kernel reads (or writes) as float32 of a float32 or bf16 tensor (kernels/cuda/floats.h).
void require_f32_or_bf16(const char* op, In t) {
  LINATTN_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16, op, ": the CUDA kernels take float32 tensors ",
                "(or bf16 where a node keeps them so), got ", t.str(), " (train.dtype f64 runs on the CPU only)");
}
Floats floats(const char* op, In t) {
  require_f32_or_bf16(op, t);
  return t.dtype() == DType::bf16 ? Floats(bf16_bits(t), true) : Floats(t.data<float>());
}
FloatsOut floats_out(const char* op, In t) {
  require_f32_or_bf16(op, t);
  return t.dtype() == DType::bf16 ? FloatsOut(bf16_bits(t), true) : FloatsOut(t.data<float>());
}

// rmsnorm's groups per row: rstd holds one value per group of each of x's rows (backend.def).
int64_t norm_groups(In x, In rstd) { return x.shape().rows() ? rstd.numel() / x.shape().rows() : 1; }

}  // namespace

void add(In y, In a, In b) {
  require_f32("add", y);
  add_forward(y.data<float>(), a.data<float>(), b.data<float>(), y.numel());
}

void add_inplace(In y, In x) {
  require_f32("add_inplace", y);
  cuda::add_inplace(y.data<float>(), x.data<float>(), y.numel());
}


// ---- the kernels of kernels/cuda/{elementwise,norm,embedding,conv,cross_entropy,rope,optimizer}.cu ----

namespace {

float* f32(In t) { return t.defined() ? t.data<float>() : nullptr; }

cudaStream_t compute() { return static_cast<cudaStream_t>(compute_stream()); }

// One value from device memory, after the kernels queued before it on the compute stream.
template <class T>
T read_device(const T* p) {
  T value;
  LINATTN_CUDA_CHECK(cudaMemcpyAsync(&value, p, sizeof(T), cudaMemcpyDeviceToHost, compute()));
  cuda::synchronize();  // the copy is queued behind those kernels: `value` holds it once the stream has run it
  return value;
}

// Token ids (or targets) as the kernels need them: on the device. Host ids are copied on the
// compute stream (the copy reads them before it returns).
Tensor ids_on_device(In ids) {
  if (ids.device() == Device::cuda) return ids;
  Tensor d = Tensor::empty(ids.shape(), DType::i32, Device::cuda);
  LINATTN_CUDA_CHECK(cudaMemcpyAsync(d.raw(), ids.raw(), ids.nbytes(), cudaMemcpyHostToDevice, compute()));
  return d;
}

// A host copy of device ids, after the kernels queued before it.
Tensor ids_on_host(In ids) {
  if (ids.device() == Device::cpu) return ids;
  Tensor h = Tensor::empty(ids.shape(), DType::i32);
  LINATTN_CUDA_CHECK(cudaMemcpyAsync(h.raw(), ids.raw(), ids.nbytes(), cudaMemcpyDeviceToHost, compute()));
  cuda::synchronize();  // the caller reads h at once
  return h;
}

}  // namespace

void mul_forward(In y, In a, In b) {
  require_f32("mul", y);
  cuda::mul_forward(f32(y), f32(a), f32(b), y.numel());
}

void mul_backward(In da, In db, In a, In b, In dy) {
  require_f32("mul", a);
  cuda::mul_backward(f32(da), f32(db), f32(a), f32(b), f32(dy), a.numel());
}

void scale_forward(In y, In x, double c) {
  require_f32("scale", y);
  cuda::scale_forward(f32(y), f32(x), float(c), y.numel());
}

void axpy(In y, double c, In x) {
  require_f32("axpy", y);
  cuda::axpy(f32(y), float(c), f32(x), x.numel());
}

void activation_forward(Activation f, In y, In x, double c) {
  require_f32(activation_name(f), y);
  cuda::activation_forward(f, f32(y), f32(x), y.numel(), float(c));
}

void activation_backward(Activation f, In dx, In x, In dy, double c, bool write) {
  require_f32(activation_name(f), dx);
  cuda::activation_backward(f, f32(dx), floats(activation_name(f), x), f32(dy), x.numel(), float(c), write);
}

void swiglu_forward(In y, In gate, In up) {
  cuda::swiglu_forward(floats_out("swiglu", y), floats("swiglu", gate), floats("swiglu", up), y.numel());
}

void swiglu_joined_forward(In y, In copy, In x) {
  const int64_t rows = y.shape().rows(), cols = y.shape().last();
  LINATTN_CHECK(x.shape().rows() == rows && x.shape().last() == 2 * cols && (!copy.defined() || copy.shape() == x.shape()),
                "swiglu_joined: x ", x.str(), " should be [", rows, ", ", 2 * cols, "] for y ", y.str());
  cuda::swiglu_joined_forward(floats_out("swiglu_joined", y), copy.defined() ? bf16_bits(copy) : nullptr,
                              floats("swiglu_joined", x), rows, cols);
}

void swiglu_joined_backward(In dx, In x, In dy) {
  require_f32("swiglu_joined", dy);
  const int64_t rows = dy.shape().rows(), cols = dy.shape().last();
  LINATTN_CHECK(x.shape().rows() == rows && x.shape().last() == 2 * cols && dx.shape() == x.shape(),
                "swiglu_joined: x ", x.str(), " and dx ", dx.str(), " should be [", rows, ", ", 2 * cols,
                "] for dy ", dy.str());
  cuda::swiglu_joined_backward(floats_out("swiglu_joined", dx), floats("swiglu_joined", x), f32(dy), rows, cols);
}

void swiglu_backward(In dgate, In dup, In gate, In up, In dy, bool write) {
  require_f32("swiglu", dy);
  cuda::swiglu_backward(f32(dgate), f32(dup), floats("swiglu", gate), floats("swiglu", up), f32(dy), gate.numel(),
                        write);
}

// kernels/cuda/{gdn_decay,bias}.cu
void gdn_decay_forward(In a, In x, In A_log, In dt_bias) {
  require_f32("gdn_decay", x);
  cuda::gdn_decay_forward(f32(a), f32(x), f32(A_log), f32(dt_bias), x.shape().rows(), x.shape().last());
}

void gdn_decay_backward(In dx, In dA_log, In ddt_bias, In x, In A_log, In dt_bias, In da) {
  require_f32("gdn_decay", x);
  cuda::gdn_decay_backward(f32(dx), f32(dA_log), f32(ddt_bias), f32(x), f32(A_log), f32(dt_bias), f32(da),
                           x.shape().rows(), x.shape().last());
}

void split_columns(Ins parts, Ins copies, In x) {
  const std::vector<int64_t> widths = backend::check_columns(parts, copies, x);
  cuda::ColumnBlocks b;
  b.count = int(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    b.width[i] = widths[i];
    b.part[i] = f32(parts[i]);
    b.copy[i] = !copies.empty() && copies[i].defined() ? bf16_bits(copies[i]) : nullptr;
  }
  cuda::split_columns(b, floats("split_columns", x), x.shape().rows());
}

void join_columns(In y, Ins parts) {
  const std::vector<int64_t> widths = backend::check_columns(parts, {}, y);
  require_f32("join_columns", parts[0]);
  cuda::ColumnBlocks b;
  b.count = int(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) b.width[i] = widths[i], b.part[i] = f32(parts[i]);
  cuda::join_columns(floats_out("join_columns", y), b, y.shape().rows());
}

void bias_forward(In y, In bias) {
  require_f32("bias", y);
  cuda::bias_forward(f32(y), f32(bias), y.numel() / bias.numel(), bias.numel());
}

void bias_backward(In dbias, In dy) {
  require_f32("bias", dy);
  cuda::bias_backward(f32(dbias), f32(dy), dy.numel() / dbias.numel(), dbias.numel());
}

void bias_activation_forward(Activation f, In y, In z16, In z, In bias, double c) {
  require_f32("bias_activation", z);
  cuda::bias_activation_forward(f, f32(y), z16.defined() ? bf16_bits(z16) : nullptr, f32(z), f32(bias),
                                z.numel() / bias.numel(), bias.numel(), float(c));
}

void bias_activation_backward(Activation f, In dz, In dbias, In z, In dy, double c) {
  require_f32("bias_activation", dy);
  cuda::bias_activation_backward(f, floats_out("bias_activation", dz), f32(dbias), floats("bias_activation", z),
                                 f32(dy), dy.numel() / dbias.numel(), dbias.numel(), float(c));
}

void rmsnorm_forward(In y, In y16, In x16, In rstd, In x, In w, double eps) {
  require_f32("rmsnorm", x);
  cuda::rmsnorm_forward(f32(y), y16.defined() ? bf16_bits(y16) : nullptr, x16.defined() ? bf16_bits(x16) : nullptr,
                        f32(rstd), f32(x), f32(w), x.shape().rows(), x.shape().last(), float(eps),
                        norm_groups(x, rstd));
}

void add_rmsnorm_forward(In s, In y, In y16, In s16, In rstd, In a, In b, In w, double eps) {
  require_f32("add_rmsnorm", a);
  cuda::add_rmsnorm_forward(f32(s), f32(y), y16.defined() ? bf16_bits(y16) : nullptr,
                            s16.defined() ? bf16_bits(s16) : nullptr, f32(rstd), f32(a), f32(b), f32(w),
                            a.shape().rows(), a.shape().last(), float(eps));
}

void rmsnorm_backward(In dx, In dx16, In dw, In x, In w, In rstd, In dy, In prior) {
  require_f32("rmsnorm", dy);
  LINATTN_CHECK(!dx16.defined() || (dx16.dtype() == DType::bf16 && dx16.numel() == dx.numel()),
                "rmsnorm_backward: the copy ", dx16.str(), " of dx ", dx.str(), " must be bf16");
  cuda::rmsnorm_backward(f32(dx), f32(dw), floats("rmsnorm", x), f32(w), f32(rstd), f32(dy), f32(prior),
                         x.shape().rows(), x.shape().last(), norm_groups(x, rstd),
                         dx16.defined() ? static_cast<uint16_t*>(dx16.raw()) : nullptr);
}

void rmsnorm_gate_forward(In h, In x16, In rstd, In x, In gate, In w, double eps, bool rstd_given) {
  require_f32("rmsnorm_gate", rstd);
  LINATTN_CHECK(x.dtype() == gate.dtype() && x.numel() == gate.numel(), "rmsnorm_gate: x ", x.str(), " and gate ",
                gate.str(), " differ");
  cuda::rmsnorm_gate_forward(h.defined() ? floats_out("rmsnorm_gate", h) : cuda::FloatsOut(),
                             x16.defined() ? bf16_bits(x16) : nullptr, f32(rstd),
                             floats("rmsnorm_gate", x), floats("rmsnorm_gate", gate), f32(w), x.shape().rows(),
                             x.shape().last(), float(eps), rstd_given);
}

void rmsnorm_gate_backward(In dx, In dgate, In dw, In x, In gate, In w, In rstd, In dh, bool write) {
  require_f32("rmsnorm_gate", dh);
  cuda::rmsnorm_gate_backward(f32(dx), f32(dgate), f32(dw), floats("rmsnorm_gate", x), floats("rmsnorm_gate", gate),
                              f32(w), f32(rstd), f32(dh), x.shape().rows(), x.shape().last(), write);
}

void l2norm_forward(In y, In r, In x, double eps) {
  require_f32("l2norm", x);
  cuda::l2norm_forward(f32(y), f32(r), f32(x), x.shape().rows(), x.shape().last(), float(eps));
}

void l2norm_backward(In dx, In y, In r, In dy) {
  require_f32("l2norm", dy);
  cuda::l2norm_backward(f32(dx), floats("l2norm", y), f32(r), f32(dy), y.shape().rows(), y.shape().last());
}

void embedding_forward(In y, In ids, In table) {
  require_f32("embedding", table);
  const int64_t N = ids.numel(), V = table.size(0), D = table.size(1);
  if (!(ids.device() == Device::cuda && backend::CheckedDeviceTokens::active())) {
    Tensor host = ids_on_host(ids);
    check_token_ids(host.data<int32_t>(), N, V, "embedding");
  }
  Tensor dev = ids_on_device(ids);
  cuda::embedding_forward(f32(y), dev.data<int32_t>(), f32(table), N, V, D);
}

void embedding_backward(In dtable, In ids, In dy) {
  require_f32("embedding", dtable);
  Tensor dev = ids_on_device(ids);
  cuda::embedding_backward(f32(dtable), dev.data<int32_t>(), f32(dy), ids.numel(), dtable.size(0), dtable.size(1));
}

void short_conv_forward(In y, In x, In w, In bias, Sequences seqs) {
  require_f32("short_conv", x);
  cuda::short_conv_forward(f32(y), f32(x), f32(w), f32(bias), x.size(0), x.size(1), x.size(2), w.size(1), seqs);
}

void short_conv_backward(In dx, In dw, In dbias, In x, In w, In dy, Sequences seqs) {
  require_f32("short_conv", x);
  cuda::short_conv_backward(f32(dx), f32(dw), f32(dbias), f32(x), f32(w), f32(dy), x.size(0), x.size(1), x.size(2),
                            w.size(1), seqs);
}

int64_t cross_entropy_forward(In loss, In lse, In logits, In targets, int32_t ignore_index) {
  require_f32("cross_entropy", logits);
  const int64_t N = logits.shape().rows(), V = logits.shape().last();
  Tensor sums = Tensor::empty({3}, DType::f64, Device::cuda);
  if (targets.device() == Device::cpu) {
    // Host targets (a training batch): checked and counted here, and the mean written on the device,
    // so that the host never waits for the device. A non-finite loss stays there, in `loss`, for the
    // caller to find (the trainer's step control skips such a step).
    const int32_t* t = targets.data<int32_t>();
    int64_t count = 0;
    for (int64_t i = 0; i < N; ++i) {
      LINATTN_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < V), "cross_entropy: target id ", t[i], " at row ", i,
                    " is outside the vocabulary [0, ", V, ") and is not the ignore index ", ignore_index);
      count += t[i] != ignore_index;
    }
    Tensor dev = ids_on_device(targets);
    cuda::cross_entropy_forward(f32(lse), sums.data<double>(), f32(loss), f32(logits), dev.data<int32_t>(), N, V,
                                ignore_index);
    return count;
  }
  if (backend::CheckedDeviceTokens::active()) {  // checked before their upload: every row counts
    cuda::cross_entropy_forward(f32(lse), sums.data<double>(), f32(loss), f32(logits), targets.data<int32_t>(), N, V,
                                ignore_index);
    return N;
  }
  // Device targets: the sums come back to the host, which raises the CPU's errors.
  cuda::cross_entropy_forward(f32(lse), sums.data<double>(), nullptr, f32(logits), targets.data<int32_t>(), N, V,
                              ignore_index);
  double s[3];
  LINATTN_CUDA_CHECK(cudaMemcpyAsync(s, sums.raw(), sizeof(s), cudaMemcpyDeviceToHost, compute()));
  cuda::synchronize();  // s is read below
  if (s[2] > 0) {  // name the first bad row, as the CPU kernel does
    Tensor host = ids_on_host(targets);
    const int32_t* t = host.data<int32_t>();
    for (int64_t i = 0; i < N; ++i)
      LINATTN_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < V), "cross_entropy: target id ", t[i], " at row ", i,
                    " is outside the vocabulary [0, ", V, ") and is not the ignore index ", ignore_index);
  }
  if (!std::isfinite(s[0]))
    throw NonFiniteError("cross_entropy: non-finite loss (the logits hold NaN or Inf; the model diverged: lower the "
                         "learning rate or check the data)");
  const int64_t count = int64_t(s[1]);
  const float mean = float(count ? s[0] / double(count) : 0.0);
  upload_pageable(loss.raw(), &mean, sizeof(float));  // staged before it returns: no wait for the local
  return count;
}

void cross_entropy_backward(In dlogits, In logits, In lse, In targets, In dloss, int64_t count, int32_t ignore_index,
                            bool write) {
  require_f32("cross_entropy", logits);
  if (count == 0) {  // no row counts: no gradient
    if (write) dlogits.zero_();
    return;
  }
  // forward: loss = mean over counted rows  =>  each row's loss gets d(loss) / count; the kernel reads
  // d(loss) on the device (a host one is copied over, queued)
  Tensor dl = dloss;
  if (dloss.device() == Device::cpu) {
    dl = Tensor::empty({1}, DType::f32, Device::cuda);
    upload_pageable(dl.raw(), dloss.raw(), sizeof(float));
  }
  Tensor dev = ids_on_device(targets);
  cuda::cross_entropy_backward_mean(floats_out("cross_entropy", dlogits), f32(logits), f32(lse), dev.data<int32_t>(),
                                    logits.shape().rows(), logits.shape().last(), ignore_index, f32(dl), count, write);
}

int64_t cross_entropy_forward_backward(In loss, In lse, In dlogits, In logits, In targets, In dloss, int64_t count,
                                       int32_t ignore_index) {
  require_f32("cross_entropy", logits);
  // Device targets the host has not checked: their sums come back first (cross_entropy_forward), so
  // the backward runs after.
  if (targets.device() != Device::cpu && !backend::CheckedDeviceTokens::active()) {
    const int64_t counted = cross_entropy_forward(loss, lse, logits, targets, ignore_index);
    cross_entropy_backward(dlogits, logits, lse, targets, dloss, count, ignore_index, true);
    return counted;
  }
  Tensor dl = dloss;  // read on the device: a host one is copied over, queued
  if (dloss.device() == Device::cpu) {
    dl = Tensor::empty({1}, DType::f32, Device::cuda);
    upload_pageable(dl.raw(), dloss.raw(), sizeof(float));
  }
  const int64_t N = logits.shape().rows(), V = logits.shape().last();
  int64_t counted = N;  // device targets checked before their upload: every row counts
  if (targets.device() == Device::cpu) {
    const int32_t* t = targets.data<int32_t>();
    counted = 0;
    for (int64_t i = 0; i < N; ++i) {
      LINATTN_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < V), "cross_entropy: target id ", t[i], " at row ", i,
                    " is outside the vocabulary [0, ", V, ") and is not the ignore index ", ignore_index);
      counted += t[i] != ignore_index;
    }
  }
  Tensor sums = Tensor::empty({3}, DType::f64, Device::cuda);
  Tensor ids = ids_on_device(targets);
  cuda::cross_entropy_forward_backward(f32(lse), sums.data<double>(), f32(loss), floats_out("cross_entropy", dlogits),
                                       f32(logits), ids.data<int32_t>(), N, V, ignore_index, f32(dl), count);
  return counted;
}

namespace {

// train.precision: bf16 with dk = dv in {32, 64, 128}: the tensor-core kernels on bf16 copies of the
// inputs (kernels/cuda/attention.h); o and the gradients come back as float32. Other head sizes stay
// float32: the bf16 kernels would run them on the CUDA cores anyway.
bool bf16_attention(In q, In v) {
  const int64_t d = q.size(3);
  return backend::matmul_precision() == MatmulPrecision::bf16 && v.size(3) == d && (d == 32 || d == 64 || d == 128);
}

// The bf16 operand of a device tensor: a bf16 tensor's own bits (the copy a tape node keeps), else a
// bf16 copy of a float32 one, or (copy false) zeroed bf16 scratch of its size.
struct Bf16Copy {
  std::optional<Bf16Scratch> scratch;
  uint16_t* bits = nullptr;
  explicit Bf16Copy(In t, bool copy = true) {
    if (t.dtype() == DType::bf16) {
      bits = bf16_bits(t);
      return;
    }
    scratch.emplace(t.numel());
    bits = scratch->data();
    if (copy) to_bf16(bits, f32(t), t.numel());
    else zero(bits, size_t(t.numel()) * sizeof(uint16_t));
  }
  uint16_t* data() const { return bits; }
};

}  // namespace

void attention_forward(In o, In lse, In q, In k, In v, int64_t window, double scale, Sequences seqs) {
  require_f32("attention", q);
  if (bf16_attention(q, v)) {
    Bf16Copy q16(q), k16(k), v16(v), o16(o, false);
    cuda::attention_forward_bf16(o16.data(), f32(lse), q16.data(), k16.data(), v16.data(), q.size(0), q.size(1),
                                 q.size(2), k.size(2), q.size(3), v.size(3), window, float(scale), seqs);
    from_bf16(f32(o), o16.data(), o.numel());
    return;
  }
  cuda::attention_forward(f32(o), f32(lse), f32(q), f32(k), f32(v), q.size(0), q.size(1), q.size(2), k.size(2),
                          q.size(3), v.size(3), window, float(scale), seqs);
}

void attention_backward(In dq, In dk, In dv, In q, In k, In v, In o, In lse, In dO, int64_t window, double scale,
                        Sequences seqs, bool write) {
  for (const Tensor* t : {&q, &k, &v, &o}) require_f32_or_bf16("attention", *t);  // kept copies
  if (bf16_attention(q, v)) {
    Bf16Copy q16(q), k16(k), v16(v), o16(o), do16(dO), dq16(dq, false), dk16(dk, false), dv16(dv, false);
    cuda::attention_backward_bf16(dq16.data(), dk16.data(), dv16.data(), q16.data(), k16.data(), v16.data(),
                                  o16.data(), f32(lse), do16.data(), q.size(0), q.size(1), q.size(2), k.size(2),
                                  q.size(3), v.size(3), window, float(scale), seqs);
    for (auto [g, g16] : {std::pair{&dq, &dq16}, {&dk, &dk16}, {&dv, &dv16}}) {
      if (write) from_bf16(f32(*g), g16->data(), g->numel());
      else add_from_bf16(f32(*g), g16->data(), g->numel());
    }
    return;
  }
  if (write)  // the float32 kernels add into them
    for (const Tensor* g : {&dq, &dk, &dv}) g->zero_();
  const Tensor q32 = backend::float32_of(q), k32 = backend::float32_of(k), v32 = backend::float32_of(v);
  const Tensor o32 = backend::float32_of(o);
  cuda::attention_backward(f32(dq), f32(dk), f32(dv), f32(q32), f32(k32), f32(v32), f32(o32), f32(lse), f32(dO),
                           q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3), window, float(scale),
                           seqs);
}

void rope_forward(In y, In x, int64_t offset, double theta, Sequences seqs) {
  require_f32("rope", x);
  cuda::rope_forward(f32(y), f32(x), x.size(0), x.size(1), x.size(2), x.size(3), offset, theta, seqs);
}

void rope_backward(In dx, In dy, int64_t offset, double theta, Sequences seqs) {
  require_f32("rope", dx);
  cuda::rope_backward(f32(dx), f32(dy), dx.size(0), dx.size(1), dx.size(2), dx.size(3), offset, theta, seqs);
}

// ---- DeltaNet and Gated DeltaNet (kernels/cuda/deltanet.cu) ----

// With documents (r.seqs), every launch covers all of them; `saved` holds a block per (tile, head)
// (kernels/sequences.h's tile indices, the rows' [B * H, chunks] without documents).
int64_t delta_rule_saved_size(const MixerArgs& r) {
  const int64_t C = r.chunk_size;
  return deltanet_chunk_saved_size(1, tile_count(r.seqs, r.B, r.T, C) * C, r.H, r.Dk, r.Dv, C);
}

void delta_rule_forward(const MixerArgs& r) {
  require_f32("deltanet", r.q);
  DeltaNetArgs<float> p = backend::deltanet_args<float>(r);
  p.precision = backend::matmul_precision();
  if (r.chunk) {
    LINATTN_CHECK(r.saved.defined(), "deltanet (cuda): the chunk form needs the `saved` buffer of ",
                  "delta_rule_saved_size elements");
    cuda::deltanet_chunk_forward(p);
  } else {
    Tensor state = Tensor::scratch({sequence_count(r.seqs, r.B) * r.H * r.Dk * r.Dv}, DType::f32, Device::cuda);
    p.saved = nullptr;
    cuda::deltanet_recurrent_forward(p, f32(state));
  }
}

void delta_rule_backward(const MixerArgs& kept) {
  const MixerArgs r = backend::for_float32_adding_kernels(kept);  // the DeltaNet kernels read float32 and add
  require_f32("deltanet", r.q);
  DeltaNetArgs<float> p = backend::deltanet_args<float>(r);
  p.precision = backend::matmul_precision();
  p.chunk_size = r.chunk ? r.chunk_size : cuda::kDeltaNetMaxChunk;
  Tensor saved = r.saved;
  if (!r.chunk) {
    // The recurrent form saves nothing: the chunkwise forward recomputes what the chunkwise backward
    // reads (the same function, so the same gradients), into scratch, leaving o and ht alone.
    MixerArgs chunked = r;
    chunked.chunk_size = p.chunk_size;
    saved = Tensor::scratch({delta_rule_saved_size(chunked)}, DType::f32, Device::cuda);
    Tensor o = Tensor::scratch(r.dO.shape(), DType::f32, Device::cuda);
    DeltaNetArgs<float> f = p;
    f.o = f32(o), f.ht = nullptr, f.saved = f32(saved);
    cuda::deltanet_chunk_forward(f);
  }
  p.saved = f32(saved);
  Tensor work = Tensor::scratch({delta::backward_scratch(delta::dims(p))}, DType::f32, Device::cuda);
  cuda::deltanet_chunk_backward(p, f32(work));
}

namespace {
void require_control(const char* op, In control) {
  LINATTN_CHECK(control.dtype() == DType::f64 && control.device() == Device::cuda &&
                    control.numel() == step_control::size,
                op, ": the step's control numbers are f64 [", int(step_control::size), "] on the GPU, got ",
                control.str());
}
}  // namespace

void step_loss(In control, In losses) {
  require_f32("step_loss", losses);
  require_control("step_loss", control);
  cuda::step_loss(control.data<double>(), f32(losses), losses.numel());
}

void step_control(In control, In g, double max_norm) {
  require_f32("step_control", g);
  require_control("step_control", control);
  cuda::step_control(control.data<double>(), f32(g), g.numel(), max_norm);
}

void adamw_step(In w, In w16, In g, In m, In v, In decay_ranges, In control, const AdamWStep& s) {
  require_f32("adamw", w);
  LINATTN_CHECK(!w16.defined() || (w16.dtype() == DType::bf16 && w16.numel() == w.numel() &&
                                   w16.device() == Device::cuda),
                "adamw: the weights' copy ", w16.str(), " is not a bf16 copy of ", w.str());
  require_control("adamw", control);
  LINATTN_CHECK(decay_ranges.dtype() == DType::f64 && decay_ranges.device() == Device::cuda &&
                    decay_ranges.numel() % 2 == 0,
                "adamw: decay_ranges are f64 pairs on the GPU, got ", decay_ranges.str());
  // the constants rounded to float32 as the CPU entry rounds them
  const cuda::AdamWStep c{float(s.beta1), float(s.beta2), float(s.eps)};
  cuda::adamw_update(f32(w), w16.defined() ? bf16_bits(w16) : nullptr, f32(m), f32(v), f32(g), w.numel(),
                     decay_ranges.numel() ? decay_ranges.data<double>() : nullptr, decay_ranges.numel() / 2,
                     control.data<double>(), c);
}

double sum_squares(In x) {
  require_f32("sum_squares", x);
  Tensor out = Tensor::empty({1}, DType::f64, Device::cuda);
  cuda::sum_squares(out.data<double>(), f32(x), x.numel());
  return read_device(out.data<double>());
}

void scale_inplace(In x, double c) {
  require_f32("scale", x);
  cuda::scale_forward(f32(x), f32(x), float(c), x.numel());
}

// ---- token mixers (kernels/cuda/chunk_gla.h: both forms run the chunk-parallel passes over the batch's
// documents; `saved` is not used) ----

void linear_attention_forward(const MixerArgs& r) {
  require_f32("linear_attention", r.q);
  cuda::linear_attention_forward(chunk::to_mixer<float>(r));
}

void linear_attention_backward(const MixerArgs& r) {
  // q, k and v may be kept bf16 copies: the passes read them as they are
  for (const Tensor* t : {&r.q, &r.k, &r.v}) require_f32_or_bf16("linear_attention", *t);
  cuda::linear_attention_backward(chunk::to_mixer<float>(r));
}

void gla_forward(const MixerArgs& r) {
  require_f32("gla", r.q);
  cuda::gla_forward(chunk::to_mixer<float>(r));
}

void gla_backward(const MixerArgs& r) {
  // q, k, v and the gate may be kept bf16 copies: the passes read them as they are
  for (const Tensor* t : {&r.q, &r.k, &r.v, &r.gate})
    if (t->defined()) require_f32_or_bf16("gla", *t);
  cuda::gla_backward(chunk::to_mixer<float>(r));
}

// The backward recomputes the chunk states: nothing is kept in `saved`.
int64_t linear_attention_saved_size(const MixerArgs&) { return 0; }
int64_t gla_saved_size(const MixerArgs&) { return 0; }

// Mamba2 (kernels/cuda/mamba2.h) in MixerArgs' terms (kernels/backend.h): q = C, k = B, v = x,
// gate = the time step before its softplus, rate = A_log, skip = D.
namespace {
cuda::Mamba2Call mamba2_call(const MixerArgs& r) {
  for (const Tensor* t : {&r.q, &r.k, &r.v, &r.gate}) require_f32_or_bf16("mamba2", *t);
  for (const Tensor* t : {&r.rate, &r.skip}) require_f32("mamba2", *t);
  cuda::Mamba2Call c;
  c.batch = r.B, c.T = r.T, c.H = r.H, c.G = r.G ? r.G : r.H, c.N = r.Dk, c.P = r.Dv;
  c.precision = backend::matmul_precision();
  c.seqs = r.seqs;
  c.x = floats("mamba2", r.v), c.gate = floats("mamba2", r.gate);
  c.Bm = floats("mamba2", r.k), c.Cm = floats("mamba2", r.q);
  c.A_log = f32(r.rate), c.D = f32(r.skip), c.h0 = f32(r.h0);
  return c;
}
}  // namespace

void mamba2_forward(const MixerArgs& r) {
  require_f32("mamba2", r.v);
  cuda::Mamba2Call c = mamba2_call(r);
  c.o = f32(r.o), c.ht = f32(r.ht), c.final_state = r.final_state;
  cuda::mamba2_forward(c);
}

void mamba2_backward(const MixerArgs& r) {
  // x, the time step, B and C may be kept bf16 copies: the kernels read them as they are
  cuda::Mamba2Call c = mamba2_call(r);
  c.dx = f32(r.dv), c.dgate = f32(r.dgate), c.dB = f32(r.dk), c.dC = f32(r.dq);
  c.dA_log = f32(r.drate), c.dD = f32(r.dskip), c.dh0 = f32(r.dh0);
  c.write = r.write;
  c.dO = f32(r.dO), c.dht = f32(r.dht);
  cuda::mamba2_backward(c);
}

// The backward recomputes GLA's inputs and states: nothing is kept in `saved`.
int64_t mamba2_saved_size(const MixerArgs&) { return 0; }

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, In A, In B, double beta, In C) {
  backend::check_gemm_dtypes(A, B, beta, C);
  if (C.dtype() == DType::bf16) {
    cuda::gemm_bf16(trans_a, trans_b, M, N, K, float(alpha), bf16_bits(A), trans_a ? M : K, bf16_bits(B),
                    trans_b ? K : N, bf16_bits(C), N);
    return;
  }
  if (A.dtype() == DType::bf16) {
    cuda::gemm_bf16(trans_a, trans_b, M, N, K, float(alpha), bf16_bits(A), trans_a ? M : K, bf16_bits(B),
                    trans_b ? K : N, float(beta), C.data<float>(), N);
    return;
  }
  require_f32("gemm", C);
  cuda::gemm(trans_a, trans_b, M, N, K, float(alpha), A.data<float>(), trans_a ? M : K, B.data<float>(),
             trans_b ? K : N, float(beta), C.data<float>(), N, backend::matmul_precision());
}

void convert(In y, In x) {
  backend::check_convert(y, x);
  if (y.dtype() == DType::bf16) to_bf16(bf16_bits(y), x.data<float>(), x.numel());
  else from_bf16(y.data<float>(), bf16_bits(x), x.numel());
}

}  // namespace linattn::cuda::entry
#endif  // LINATTN_CUDA
