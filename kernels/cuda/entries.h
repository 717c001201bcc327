// The CUDA column of the backend table (kernels/backend.cpp): each entry checks the dtype, takes
// the device pointers and sizes from its tensors and launches the kernel of kernels/cuda/ on the
// compute stream. Only entries with a kernel are here. Signatures and shapes: kernels/backend.h.
// Compiled with the CUDA backend only (LINATTN_CUDA).
#pragma once

#include "kernels/backend.h"

namespace linattn::cuda::entry {

using backend::AdamWStep;
using backend::In;
using backend::MixerArgs;

void add(In y, In a, In b);
void add_inplace(In y, In x);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, In A, In B, double beta, In C);

// kernels/cuda/{elementwise,norm,embedding,conv,cross_entropy,rope,optimizer}.cu
void mul_forward(In y, In a, In b);
void mul_backward(In da, In db, In a, In b, In dy);
void scale_forward(In y, In x, double c);
void axpy(In y, double c, In x);
void activation_forward(cpu::Activation f, In y, In x);
void activation_backward(cpu::Activation f, In dx, In x, In dy);
void swiglu_forward(In y, In gate, In up);
void swiglu_backward(In dgate, In dup, In gate, In up, In dy);
// kernels/cuda/{gdn_decay,bias}.cu
void gdn_decay_forward(In a, In x, In A_log, In dt_bias);
void gdn_decay_backward(In dx, In dA_log, In ddt_bias, In x, In A_log, In dt_bias, In da);
void bias_forward(In y, In bias);
void bias_backward(In dbias, In dy);
void rmsnorm_forward(In y, In rstd, In x, In w, double eps);
void rmsnorm_backward(In dx, In dw, In x, In w, In rstd, In dy);
void l2norm_forward(In y, In r, In x, double eps);
void l2norm_backward(In dx, In y, In r, In dy);
void embedding_forward(In y, In ids, In table);
void embedding_backward(In dtable, In ids, In dy);
void short_conv_forward(In y, In x, In w, In bias);
void short_conv_backward(In dx, In dw, In dbias, In x, In w, In dy);
int64_t cross_entropy_forward(In loss, In lse, In logits, In targets, int32_t ignore_index);
void cross_entropy_backward(In dlogits, In logits, In lse, In targets, In dloss, int64_t count, int32_t ignore_index);
void attention_forward(In o, In lse, In q, In k, In v, int64_t window, double scale);
void attention_backward(In dq, In dk, In dv, In q, In k, In v, In o, In lse, In dO, int64_t window, double scale);
void rope_forward(In y, In x, int64_t offset, double theta);
void rope_backward(In dx, In dy, int64_t offset, double theta);
// kernels/cuda/deltanet.cu
void delta_rule_forward(const MixerArgs& r);
void delta_rule_backward(const MixerArgs& r);
void adamw_step(In w, In g, In m, In v, const AdamWStep& s);
double sum_squares(In x);
void scale_inplace(In x, double c);

// kernels/cuda/{linear_attn,gla}.cu
void linear_attention_forward(const MixerArgs& r);
void linear_attention_backward(const MixerArgs& r);
void gla_forward(const MixerArgs& r);
void gla_backward(const MixerArgs& r);

}  // namespace linattn::cuda::entry
