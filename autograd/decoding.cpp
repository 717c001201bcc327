#include "autograd/decoding.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "autograd/op_support.h"
#include "kernels/backend.h"

namespace linattn::ops {

using detail::check_inputs;

namespace {

// These ops copy host memory directly (and the cache entries have CPU kernels only); on another
// device they throw, naming the op.
void require_cpu(const char* op, const Variable& x) {
  LINATTN_CHECK(!x.defined() || x.device() == Device::cpu, op, ": decoding runs on the CPU only, not yet on ",
                device_name(x.device()), "; sample from a checkpoint with linattn-generate, which decodes on the CPU");
}

// Copies rows [t0, t0 + n) along dim 1 of src [B, Ts, inner...] to rows [u0, u0 + n) of dst [B, Td, inner...].
void copy_rows(const Tensor& dst, int64_t u0, const Tensor& src, int64_t t0, int64_t n) {
  const int64_t B = src.shape()[0], Ts = src.shape()[1], Td = dst.shape()[1];
  const size_t row = src.nbytes() / size_t(std::max<int64_t>(1, B * Ts));
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(static_cast<char*>(dst.raw()) + size_t(b * Td + u0) * row,
                static_cast<const char*>(src.raw()) + size_t(b * Ts + t0) * row, size_t(n) * row);
}

// A global layer's cache grown to hold at least `need` positions (by half again, so that growing
// costs O(1) per token), keeping positions 0 .. pos - 1 in their slots.
void grow(KVCache& cache, int64_t need, int64_t pos) {
  const int64_t C = cache.capacity();
  if (C >= need) return;
  const int64_t capacity = (std::max(need, C + C / 2) + 63) / 64 * 64;
  for (Tensor* t : {&cache.k, &cache.v}) {
    const Shape& s = t->shape();
    Tensor bigger = Tensor::zeros({s[0], capacity, s[2], s[3]}, t->dtype());
    copy_rows(bigger, 0, *t, 0, pos);
    *t = bigger;
  }
}

}  // namespace

Variable slice_time(const Variable& x, int64_t t0, int64_t t1) {
  check_inputs("slice_time", {&x});
  require_cpu("slice_time", x);
  const Shape& s = x.shape();
  LINATTN_CHECK(s.ndim() >= 2 && 0 <= t0 && t0 <= t1 && t1 <= s[1], "slice_time: rows [", t0, ", ", t1, ") of ",
                x.value().str(), " (time is dim 1)");
  Shape out = s;
  out[1] = t1 - t0;
  Tensor y = Tensor::scratch(out, x.dtype());
  copy_rows(y, 0, x.value(), t0, t1 - t0);
  return Variable(y);
}

Variable short_conv_continue(const Variable& x, const Variable& weight, Tensor& window) {
  check_inputs("short_conv_continue", {&x, &weight});
  require_cpu("short_conv_continue", x);
  LINATTN_CHECK(x.shape().ndim() == 3 && weight.shape().ndim() == 2 && weight.shape()[0] == x.shape()[2] &&
                    weight.shape()[1] >= 2,
                "short_conv_continue: expected x [B, T, C] and weight [C, W >= 2], got ", x.value().str(), " and ",
                weight.value().str());
  const int64_t B = x.shape()[0], T_ = x.shape()[1], C = x.shape()[2], W = weight.shape()[1];
  if (!window.defined()) window = Tensor::zeros({B, W - 1, C}, x.dtype());
  LINATTN_CHECK(window.shape() == (Shape{B, W - 1, C}) && window.dtype() == x.dtype(),
                "short_conv_continue: the window should be ", dtype_name(x.dtype()), "[", B, ", ", W - 1, ", ", C,
                "] (the last W-1 inputs), got ", window.str());
  // The convolution over [window; x], of which the rows of x are kept: the same sums as over the
  // whole sequence, since each output reads the W-1 inputs before it.
  Tensor whole = Tensor::scratch({B, W - 1 + T_, C}, x.dtype());
  copy_rows(whole, 0, window, 0, W - 1);
  copy_rows(whole, W - 1, x.value(), 0, T_);
  Tensor y_whole = Tensor::scratch(whole.shape(), x.dtype());
  backend::short_conv_forward(x.device(), y_whole, whole, weight.value(), Tensor(), Sequences{});
  Tensor next = Tensor::empty(window.shape(), x.dtype());
  copy_rows(next, 0, whole, T_, W - 1);
  window = next;
  Tensor y = Tensor::scratch(x.shape(), x.dtype());
  copy_rows(y, 0, y_whole, W - 1, T_);
  return Variable(y);
}

Variable attention_continue(const Variable& q, const Variable& k, const Variable& v, KVCache& cache, int64_t pos,
                            int64_t window, double scale) {
  const char* op = "attention_continue";
  check_inputs(op, {&q, &k, &v});
  require_cpu(op, q);
  LINATTN_CHECK(q.shape().ndim() == 4 && k.shape().ndim() == 4 && v.shape().ndim() == 4 &&
                    k.shape()[0] == q.shape()[0] && k.shape()[1] == q.shape()[1] && k.shape()[3] == q.shape()[3] &&
                    v.shape()[0] == q.shape()[0] && v.shape()[1] == q.shape()[1] && v.shape()[2] == k.shape()[2] &&
                    q.shape()[2] % k.shape()[2] == 0,
                op, ": expected q [B, T, H, dk], k [B, T, Hkv, dk], v [B, T, Hkv, dv] with H a multiple of Hkv, got ",
                q.value().str(), ", ", k.value().str(), ", ", v.value().str());
  LINATTN_CHECK(pos >= 0 && window >= 0, op, ": position ", pos, " and window ", window, " must be >= 0");
  const int64_t B = q.shape()[0], T_ = q.shape()[1], H = q.shape()[2], dk = q.shape()[3];
  const int64_t Hkv = k.shape()[2], dv = v.shape()[3];
  const double sc = scale != 0 ? scale : 1.0 / std::sqrt(double(dk));
  const DType dt = q.dtype();
  Tensor o = Tensor::scratch({B, T_, H, dv}, dt);
  if (pos > 0 && window > 0 && T_ > 1) {
    // A ring of `window` slots holds the keys one new query needs, not those of several: one at a time.
    for (int64_t t = 0; t < T_; ++t) {
      Variable ot = attention_continue(slice_time(q, t, t + 1), slice_time(k, t, t + 1), slice_time(v, t, t + 1),
                                       cache, pos + t, window, scale);
      copy_rows(o, t, ot.value(), 0, 1);
    }
    return Variable(o);
  }
  if (pos == 0) {  // a fresh sequence: the cache starts here
    const int64_t C = window > 0 ? window : (T_ + 63) / 64 * 64;
    cache.k = Tensor::zeros({B, C, Hkv, dk}, dt);
    cache.v = Tensor::zeros({B, C, Hkv, dv}, dt);
  }
  LINATTN_CHECK(cache.k.defined() && cache.k.shape()[0] == B && cache.k.shape()[2] == Hkv &&
                    cache.k.shape()[3] == dk && cache.v.shape()[3] == dv && cache.k.dtype() == dt,
                op, ": the cache ", cache.k.defined() ? cache.k.str() : "(empty)", " does not continue q ",
                q.value().str(), ", k ", k.value().str(), " at position ", pos);
  if (window == 0) grow(cache, pos + T_, pos);
  const Device dev = q.device();
  if (pos == 0) backend::attention_forward(dev, o, Tensor(), q.value(), k.value(), v.value(), window, sc, Sequences{});
  backend::kv_cache_write(dev, cache.k, cache.v, k.value(), v.value(), pos);
  if (pos > 0) backend::attention_decode(dev, o, q.value(), cache.k, cache.v, pos, window, sc);
  return Variable(o);
}

}  // namespace linattn::ops
