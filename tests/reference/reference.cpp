// The naive references (see reference.h). Each mixer is one loop over (batch, head) that runs the
// ops.md recurrence token by token, keeps every state S_0 .. S_T, and then, when gradients are
// asked for, walks the tokens backwards differentiating each forward line.
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace linattn::reference {
namespace {

constexpr double kNormalizeEps = 1e-6;  // ops.md, normalized linear attention

using Vec = std::vector<double>;  // a vector [dk] or [dv], or a state [dk, dv] row-major

struct Dims {
  int64_t B, T, H, Hkv, dk, dv;
};

Dims dims_of(const Problem& p) {
  const Shape &q = p.in.at("q").shape, &k = p.in.at("k").shape, &v = p.in.at("v").shape;
  return {q[0], q[1], q[2], k[2], q[3], v[3]};
}

double scale_of(const Problem& p, const Dims& d) { return p.scale != 0 ? p.scale : 1.0 / std::sqrt(double(d.dk)); }

Array zeros(const Shape& s) { return {s, Vec(s.numel(), 0.0)}; }

const Array* find(const Problem& p, const std::string& name) {
  auto it = p.in.find(name);
  return it == p.in.end() ? nullptr : &it->second;
}

// x[b, t, h, :] of a [B, T, H, D] array.
const double* row(const Array& x, int64_t b, int64_t t, int64_t h) {
  return x.data.data() + ((b * x.shape[1] + t) * x.shape[2] + h) * x.shape[3];
}
double* row(Array& x, int64_t b, int64_t t, int64_t h) {
  return x.data.data() + ((b * x.shape[1] + t) * x.shape[2] + h) * x.shape[3];
}
// x[b, t, h] of a [B, T, H] array.
double scalar(const Array& x, int64_t b, int64_t t, int64_t h) { return x.data[(b * x.shape[1] + t) * x.shape[2] + h]; }
double& scalar(Array& x, int64_t b, int64_t t, int64_t h) { return x.data[(b * x.shape[1] + t) * x.shape[2] + h]; }
// x[b, h, ...] of a state [B, H, dk, dv] or a normalizer [B, H, dk].
int64_t head_size(const Array& x) { return x.shape.numel() / (x.shape[0] * x.shape[1]); }
const double* head(const Array& x, int64_t b, int64_t h) { return x.data.data() + (b * x.shape[1] + h) * head_size(x); }
double* head(Array& x, int64_t b, int64_t h) { return x.data.data() + (b * x.shape[1] + h) * head_size(x); }

// What one mixer call computes: o (and ht), and with gradients the d<name> of every input.
struct Result {
  Arrays out, grad;
};

// The gradient arrays of the linear mixers' inputs, zero, named d<name>.
Arrays zero_gradients(const Problem& p) {
  Arrays g;
  for (const std::string& name : differentiable_inputs(p)) g["d" + name] = zeros(p.in.at(name).shape);
  return g;
}

// Head (b, h) of a state, or n zeros when s is not given: the initial states h0, z0 and the
// upstream gradients dht, dzt.
Vec initial(const Array* s, int64_t b, int64_t h, int64_t n) {
  return s ? Vec(head(*s, b, h), head(*s, b, h) + n) : Vec(n, 0.0);
}

// ---- Linear attention: phi in {identity, elu1, relu} on q and k.
//   S_t = S_{t-1} + phi(k_t) v_t^T
//   unnormalized: o_t = scale * S_t^T phi(q_t)
//   normalized:   z_t = z_{t-1} + phi(k_t), o_t = S_t^T phi(q_t) / (phi(q_t)^T z_t + eps)

double phi(const std::string& map, double x) {
  if (map == "identity") return x;
  if (map == "elu1") return x > 0 ? x + 1 : std::exp(x);
  if (map == "relu") return x > 0 ? x : 0;
  throw std::invalid_argument("unknown feature map '" + map + "'");
}
double phi_derivative(const std::string& map, double x) {
  if (map == "identity") return 1;
  if (map == "elu1") return x > 0 ? 1 : std::exp(x);
  return x > 0 ? 1 : 0;  // relu
}

Result linear_attention(const Problem& p, bool with_gradients) {
  const Dims d = dims_of(p);
  const double scale = scale_of(p, d);
  const Array &q = p.in.at("q"), &k = p.in.at("k"), &v = p.in.at("v");
  Result r;
  Array& o = r.out["o"] = zeros({d.B, d.T, d.H, d.dv});
  Array& ht = r.out["ht"] = zeros({d.B, d.H, d.dk, d.dv});
  if (p.normalize) r.out["zt"] = zeros({d.B, d.H, d.dk});
  if (with_gradients) r.grad = zero_gradients(p);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      std::vector<Vec> pq(d.T, Vec(d.dk)), pk(d.T, Vec(d.dk));  // phi(q_t), phi(k_t)
      std::vector<Vec> S(d.T + 1), z(d.T + 1, Vec(d.dk));        // S_0 .. S_T, z_0 .. z_T
      S[0] = initial(find(p, "h0"), b, h, d.dk * d.dv);
      z[0] = initial(find(p, "z0"), b, h, d.dk);
      // The output of token t from S_t, z_t: the numerator S_t^T phi(q_t) and the denominator.
      auto numerator = [&](int64_t t) {
        Vec num(d.dv, 0.0);
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) num[j] += S[t + 1][i * d.dv + j] * pq[t][i];
        return num;
      };
      auto denominator = [&](int64_t t) {
        double den = kNormalizeEps;
        for (int64_t i = 0; i < d.dk; ++i) den += pq[t][i] * z[t + 1][i];
        return den;
      };
      for (int64_t t = 0; t < d.T; ++t) {
        const double *qt = row(q, b, t, h), *kt = row(k, b, t, h), *vt = row(v, b, t, h);
        for (int64_t i = 0; i < d.dk; ++i) {
          pq[t][i] = phi(p.feature_map, qt[i]);
          pk[t][i] = phi(p.feature_map, kt[i]);
        }
        S[t + 1] = S[t];
        for (int64_t i = 0; i < d.dk; ++i) {
          for (int64_t j = 0; j < d.dv; ++j) S[t + 1][i * d.dv + j] += pk[t][i] * vt[j];
          z[t + 1][i] = z[t][i] + pk[t][i];
        }
        Vec num = numerator(t);
        const double den = denominator(t);
        double* ot = row(o, b, t, h);
        for (int64_t j = 0; j < d.dv; ++j) ot[j] = p.normalize ? num[j] / den : scale * num[j];
      }
      std::copy(S[d.T].begin(), S[d.T].end(), head(ht, b, h));
      if (p.normalize) std::copy(z[d.T].begin(), z[d.T].end(), head(r.out["zt"], b, h));
      if (!with_gradients) continue;

      Vec dS = initial(find(p, "dht"), b, h, d.dk * d.dv), dz = initial(find(p, "dzt"), b, h, d.dk);
      for (int64_t t = d.T - 1; t >= 0; --t) {
        const double *qt = row(q, b, t, h), *kt = row(k, b, t, h), *vt = row(v, b, t, h);
        const double* dot = row(p.in.at("do"), b, t, h);
        const Vec& St = S[t + 1];
        Vec dpq(d.dk, 0.0);  // d phi(q_t)
        if (p.normalize) {
          // o = num / den  =>  d num = do / den, d den = -(do . num) / den^2
          Vec num = numerator(t);
          const double den = denominator(t);
          double dden = 0;
          for (int64_t j = 0; j < d.dv; ++j) dden -= dot[j] * num[j] / (den * den);
          // num = S_t^T phi(q), den = phi(q) . z_t + eps  =>  d phi(q) = S_t d num + z_t d den,
          // dS_t += phi(q) d num^T, dz_t += phi(q) d den
          for (int64_t i = 0; i < d.dk; ++i) {
            for (int64_t j = 0; j < d.dv; ++j) {
              dpq[i] += St[i * d.dv + j] * dot[j] / den;
              dS[i * d.dv + j] += pq[t][i] * dot[j] / den;
            }
            dpq[i] += z[t + 1][i] * dden;
            dz[i] += pq[t][i] * dden;
          }
        } else {
          // o = scale S_t^T phi(q)  =>  d phi(q) = scale S_t do, dS_t += scale phi(q) do^T
          for (int64_t i = 0; i < d.dk; ++i)
            for (int64_t j = 0; j < d.dv; ++j) {
              dpq[i] += scale * St[i * d.dv + j] * dot[j];
              dS[i * d.dv + j] += scale * pq[t][i] * dot[j];
            }
        }
        // S_t = S_{t-1} + phi(k) v^T, z_t = z_{t-1} + phi(k)  =>  d phi(k) = dS_t v + dz_t,
        // dv = dS_t^T phi(k); dS_{t-1} = dS_t, dz_{t-1} = dz_t
        double *dq = row(r.grad["dq"], b, t, h), *dk = row(r.grad["dk"], b, t, h), *dv = row(r.grad["dv"], b, t, h);
        for (int64_t i = 0; i < d.dk; ++i) {
          double dpk = dz[i];
          for (int64_t j = 0; j < d.dv; ++j) {
            dpk += dS[i * d.dv + j] * vt[j];
            dv[j] += dS[i * d.dv + j] * pk[t][i];
          }
          dq[i] = dpq[i] * phi_derivative(p.feature_map, qt[i]);
          dk[i] = dpk * phi_derivative(p.feature_map, kt[i]);
        }
      }
      if (find(p, "h0")) std::copy(dS.begin(), dS.end(), head(r.grad["dh0"], b, h));
      if (find(p, "z0")) std::copy(dz.begin(), dz.end(), head(r.grad["dz0"], b, h));
    }
  return r;
}

// ---- GLA, with the log-gate g <= 0 per key channel:
//   S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,  o_t = scale * S_t^T q_t

Result gla(const Problem& p, bool with_gradients) {
  const Dims d = dims_of(p);
  const double scale = scale_of(p, d);
  const Array &q = p.in.at("q"), &k = p.in.at("k"), &v = p.in.at("v"), &g = p.in.at("g");
  Result r;
  Array& o = r.out["o"] = zeros({d.B, d.T, d.H, d.dv});
  Array& ht = r.out["ht"] = zeros({d.B, d.H, d.dk, d.dv});
  if (with_gradients) r.grad = zero_gradients(p);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      std::vector<Vec> S(d.T + 1);
      S[0] = initial(find(p, "h0"), b, h, d.dk * d.dv);
      for (int64_t t = 0; t < d.T; ++t) {
        const double *qt = row(q, b, t, h), *kt = row(k, b, t, h), *vt = row(v, b, t, h), *gt = row(g, b, t, h);
        S[t + 1] = Vec(d.dk * d.dv);
        double* ot = row(o, b, t, h);
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) {
            S[t + 1][i * d.dv + j] = std::exp(gt[i]) * S[t][i * d.dv + j] + kt[i] * vt[j];
            ot[j] += scale * S[t + 1][i * d.dv + j] * qt[i];
          }
      }
      std::copy(S[d.T].begin(), S[d.T].end(), head(ht, b, h));
      if (!with_gradients) continue;

      Vec dS = initial(find(p, "dht"), b, h, d.dk * d.dv);
      for (int64_t t = d.T - 1; t >= 0; --t) {
        const double *qt = row(q, b, t, h), *kt = row(k, b, t, h), *vt = row(v, b, t, h), *gt = row(g, b, t, h);
        const double* dot = row(p.in.at("do"), b, t, h);
        double *dq = row(r.grad["dq"], b, t, h), *dk = row(r.grad["dk"], b, t, h), *dv = row(r.grad["dv"], b, t, h),
               *dg = row(r.grad["dg"], b, t, h);
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) {
            // o = scale S_t^T q  =>  dq = scale S_t do, dS_t += scale q do^T
            dq[i] += scale * S[t + 1][i * d.dv + j] * dot[j];
            dS[i * d.dv + j] += scale * qt[i] * dot[j];
          }
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) {
            // S_t = diag(exp(g)) S_{t-1} + k v^T  =>  dk = dS_t v, dv = dS_t^T k,
            // dg_i = exp(g_i) sum_j dS_t[i, j] S_{t-1}[i, j], dS_{t-1} = diag(exp(g)) dS_t
            const double ds = dS[i * d.dv + j];
            dk[i] += ds * vt[j];
            dv[j] += ds * kt[i];
            dg[i] += std::exp(gt[i]) * ds * S[t][i * d.dv + j];
            dS[i * d.dv + j] = std::exp(gt[i]) * ds;
          }
      }
      if (find(p, "h0")) std::copy(dS.begin(), dS.end(), head(r.grad["dh0"], b, h));
    }
  return r;
}

// ---- DeltaNet and Gated DeltaNet, with beta in (0, 1) and (gated) the log-decay a <= 0 per head:
//   S_t = exp(a_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,  o_t = scale * S_t^T q_t
// (DeltaNet: a_t = 0). With u = S_{t-1}^T k_t: S_t = exp(a_t) (S_{t-1} - beta_t k_t u^T) + beta_t k_t v_t^T.

Result deltanet(const Problem& p, bool with_gradients) {
  const Dims d = dims_of(p);
  const double scale = scale_of(p, d);
  const Array &q = p.in.at("q"), &k = p.in.at("k"), &v = p.in.at("v"), &beta = p.in.at("beta");
  const Array* a = find(p, "a");
  Result r;
  Array& o = r.out["o"] = zeros({d.B, d.T, d.H, d.dv});
  Array& ht = r.out["ht"] = zeros({d.B, d.H, d.dk, d.dv});
  if (with_gradients) r.grad = zero_gradients(p);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      std::vector<Vec> S(d.T + 1);
      S[0] = initial(find(p, "h0"), b, h, d.dk * d.dv);
      // u = S_{t-1}^T k_t
      auto recalled = [&](int64_t t) {
        const double* kt = row(k, b, t, h);
        Vec u(d.dv, 0.0);
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) u[j] += S[t][i * d.dv + j] * kt[i];
        return u;
      };
      for (int64_t t = 0; t < d.T; ++t) {
        const double *qt = row(q, b, t, h), *kt = row(k, b, t, h), *vt = row(v, b, t, h);
        const double bt = scalar(beta, b, t, h), decay = a ? std::exp(scalar(*a, b, t, h)) : 1.0;
        const Vec u = recalled(t);
        S[t + 1] = Vec(d.dk * d.dv);
        double* ot = row(o, b, t, h);
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) {
            S[t + 1][i * d.dv + j] = decay * (S[t][i * d.dv + j] - bt * kt[i] * u[j]) + bt * kt[i] * vt[j];
            ot[j] += scale * S[t + 1][i * d.dv + j] * qt[i];
          }
      }
      std::copy(S[d.T].begin(), S[d.T].end(), head(ht, b, h));
      if (!with_gradients) continue;

      Vec dS = initial(find(p, "dht"), b, h, d.dk * d.dv);
      for (int64_t t = d.T - 1; t >= 0; --t) {
        const double *qt = row(q, b, t, h), *kt = row(k, b, t, h), *vt = row(v, b, t, h);
        const double* dot = row(p.in.at("do"), b, t, h);
        const double bt = scalar(beta, b, t, h), decay = a ? std::exp(scalar(*a, b, t, h)) : 1.0;
        double *dq = row(r.grad["dq"], b, t, h), *dk = row(r.grad["dk"], b, t, h), *dv = row(r.grad["dv"], b, t, h);
        // o = scale S_t^T q  =>  dq = scale S_t do, dS_t += scale q do^T
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) {
            dq[i] += scale * S[t + 1][i * d.dv + j] * dot[j];
            dS[i * d.dv + j] += scale * qt[i] * dot[j];
          }
        const Vec u = recalled(t);
        const Vec& P = S[t];  // S_{t-1}
        // G = dS_t; Gk = G^T k, Gv = G v, Gu = G u, Pk = P Gk
        Vec Gk(d.dv, 0.0), Gv(d.dk, 0.0), Gu(d.dk, 0.0), PGk(d.dk, 0.0);
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) {
            Gk[j] += dS[i * d.dv + j] * kt[i];
            Gv[i] += dS[i * d.dv + j] * vt[j];
            Gu[i] += dS[i * d.dv + j] * u[j];
          }
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j) PGk[i] += P[i * d.dv + j] * Gk[j];
        // S_t = decay (P - beta k u^T) + beta k v^T with u = P^T k  =>
        //   dv = beta G^T k, dbeta = (G^T k) . (v - decay u),
        //   dk = beta G v - decay beta (G u + P G^T k),
        //   d a = sum(G * (S_t - beta k v^T))  (d decay / d a = decay),
        //   dP = decay (G - beta k (G^T k)^T)
        double dbeta = 0, da = 0;
        for (int64_t j = 0; j < d.dv; ++j) {
          dv[j] += bt * Gk[j];
          dbeta += Gk[j] * (vt[j] - decay * u[j]);
        }
        for (int64_t i = 0; i < d.dk; ++i) {
          dk[i] += bt * Gv[i] - decay * bt * (Gu[i] + PGk[i]);
          for (int64_t j = 0; j < d.dv; ++j) da += dS[i * d.dv + j] * (S[t + 1][i * d.dv + j] - bt * kt[i] * vt[j]);
        }
        scalar(r.grad["dbeta"], b, t, h) = dbeta;
        if (a) scalar(r.grad["da"], b, t, h) = da;
        for (int64_t i = 0; i < d.dk; ++i)
          for (int64_t j = 0; j < d.dv; ++j)
            dS[i * d.dv + j] = decay * (dS[i * d.dv + j] - bt * kt[i] * Gk[j]);
      }
      if (find(p, "h0")) std::copy(dS.begin(), dS.end(), head(r.grad["dh0"], b, h));
    }
  return r;
}

// ---- Causal softmax attention, global or over a sliding window of W positions, with k and v
// shared by groups of H / Hkv query heads (query head h reads key/value head h / (H / Hkv)):
//   o_i = sum_{j in [i-W+1, i]} softmax_j(scale * q_i . k_j) v_j   (global: j in [0, i])

Result attention(const Problem& p, bool with_gradients) {
  const Dims d = dims_of(p);
  const double scale = scale_of(p, d);
  const Array &q = p.in.at("q"), &k = p.in.at("k"), &v = p.in.at("v");
  if (d.Hkv < 1 || d.H % d.Hkv != 0)
    throw std::invalid_argument("attention: " + std::to_string(d.H) + " query heads are not a multiple of " +
                                std::to_string(d.Hkv) + " key/value heads");
  const int64_t group = d.H / d.Hkv;
  Result r;
  Array& o = r.out["o"] = zeros({d.B, d.T, d.H, d.dv});
  if (with_gradients) r.grad = zero_gradients(p);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < d.T; ++i) {
        const int64_t first = p.window > 0 ? std::max<int64_t>(0, i - p.window + 1) : 0;
        const double* qi = row(q, b, i, h);
        Vec prob(i + 1 - first);  // softmax weights of j = first .. i
        double largest = -INFINITY, sum = 0;
        for (int64_t j = first; j <= i; ++j) {
          const double* kj = row(k, b, j, hk);
          double s = 0;
          for (int64_t c = 0; c < d.dk; ++c) s += qi[c] * kj[c];
          prob[j - first] = scale * s;
          largest = std::max(largest, scale * s);
        }
        for (double& x : prob) sum += x = std::exp(x - largest);
        for (double& x : prob) x /= sum;
        double* oi = row(o, b, i, h);
        for (int64_t j = first; j <= i; ++j)
          for (int64_t c = 0; c < d.dv; ++c) oi[c] += prob[j - first] * row(v, b, j, hk)[c];
        if (!with_gradients) continue;

        // o_i = sum_j p_j v_j  =>  dp_j = do_i . v_j, dv_j += p_j do_i;
        // p = softmax(s)  =>  ds_j = p_j (dp_j - sum_l p_l dp_l);
        // s_j = scale q_i . k_j  =>  dq_i += scale ds_j k_j, dk_j += scale ds_j q_i
        const double* doi = row(p.in.at("do"), b, i, h);
        Vec dp(prob.size(), 0.0);
        double expected = 0;
        for (int64_t j = first; j <= i; ++j) {
          const double* vj = row(v, b, j, hk);
          double* dvj = row(r.grad["dv"], b, j, hk);
          for (int64_t c = 0; c < d.dv; ++c) {
            dp[j - first] += doi[c] * vj[c];
            dvj[c] += prob[j - first] * doi[c];
          }
          expected += prob[j - first] * dp[j - first];
        }
        double* dqi = row(r.grad["dq"], b, i, h);
        for (int64_t j = first; j <= i; ++j) {
          const double ds = prob[j - first] * (dp[j - first] - expected);
          const double* kj = row(k, b, j, hk);
          double* dkj = row(r.grad["dk"], b, j, hk);
          for (int64_t c = 0; c < d.dk; ++c) {
            dqi[c] += scale * ds * kj[c];
            dkj[c] += scale * ds * qi[c];
          }
        }
      }
    }
  return r;
}

// ---- Mamba2 (SSD), with dt > 0 [B, T, H], A < 0 [H], and B, C [B, T, G, N] shared by groups of H / G
// heads (head h reads group h / (H / G)); x [B, T, H, P], states [B, H, N, P]:
//   S_t = exp(dt_t A_h) S_{t-1} + dt_t B_t x_t^T,  o_t = S_t^T C_t  (no scale)

Result mamba2(const Problem& p, bool with_gradients) {
  const Array &x = p.in.at("x"), &dt = p.in.at("dt"), &A = p.in.at("A"), &Bm = p.in.at("B"), &Cm = p.in.at("C");
  const int64_t B = x.shape[0], T = x.shape[1], H = x.shape[2], P = x.shape[3], G = Bm.shape[2], N = Bm.shape[3];
  if (G < 1 || H % G != 0)
    throw std::invalid_argument("mamba2: " + std::to_string(H) + " heads do not split into " + std::to_string(G) +
                                " groups");
  Result r;
  Array& o = r.out["o"] = zeros({B, T, H, P});
  Array& ht = r.out["ht"] = zeros({B, H, N, P});
  if (with_gradients) r.grad = zero_gradients(p);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      const double Ah = A.data[h];
      std::vector<Vec> S(T + 1);
      S[0] = initial(find(p, "h0"), b, h, N * P);
      for (int64_t t = 0; t < T; ++t) {
        const double *xt = row(x, b, t, h), *Bt = row(Bm, b, t, g), *Ct = row(Cm, b, t, g);
        const double step = scalar(dt, b, t, h);
        S[t + 1] = Vec(N * P);
        double* ot = row(o, b, t, h);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < P; ++j) {
            S[t + 1][n * P + j] = std::exp(step * Ah) * S[t][n * P + j] + step * Bt[n] * xt[j];
            ot[j] += S[t + 1][n * P + j] * Ct[n];
          }
      }
      std::copy(S[T].begin(), S[T].end(), head(ht, b, h));
      if (!with_gradients) continue;

      Vec dS = initial(find(p, "dht"), b, h, N * P);
      for (int64_t t = T - 1; t >= 0; --t) {
        const double *xt = row(x, b, t, h), *Bt = row(Bm, b, t, g), *Ct = row(Cm, b, t, g);
        const double* dot = row(p.in.at("do"), b, t, h);
        const double step = scalar(dt, b, t, h), decay = std::exp(step * Ah);
        double *dx = row(r.grad["dx"], b, t, h), *dB = row(r.grad["dB"], b, t, g), *dC = row(r.grad["dC"], b, t, g);
        double& ddt = scalar(r.grad["ddt"], b, t, h);
        // o = S_t^T C  =>  dC += S_t do, dS_t += C do^T
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < P; ++j) {
            dC[n] += S[t + 1][n * P + j] * dot[j];
            dS[n * P + j] += Ct[n] * dot[j];
          }
        // S_t = exp(dt A) S_{t-1} + dt B x^T  =>  dB = dt dS_t x, dx = dt dS_t^T B,
        // d dt = sum(dS_t * (A exp(dt A) S_{t-1} + B x^T)), dA = dt exp(dt A) sum(dS_t * S_{t-1}),
        // dS_{t-1} = exp(dt A) dS_t
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < P; ++j) {
            const double ds = dS[n * P + j];
            dB[n] += step * ds * xt[j];
            dx[j] += step * ds * Bt[n];
            ddt += ds * (Ah * decay * S[t][n * P + j] + Bt[n] * xt[j]);
            r.grad["dA"].data[h] += step * decay * ds * S[t][n * P + j];
            dS[n * P + j] = decay * ds;
          }
      }
      if (find(p, "h0")) std::copy(dS.begin(), dS.end(), head(r.grad["dh0"], b, h));
    }
  return r;
}

Result run(const Problem& p, bool with_gradients) {
  if (p.op == "mamba2") return mamba2(p, with_gradients);
  if (p.op == "linear_attn") return linear_attention(p, with_gradients);
  if (p.op == "gla") return gla(p, with_gradients);
  if (p.op == "deltanet" || p.op == "gated_deltanet") return deltanet(p, with_gradients);
  if (p.op == "attention") return attention(p, with_gradients);
  throw std::invalid_argument("unknown op '" + p.op + "'");
}

}  // namespace

std::vector<std::string> differentiable_inputs(const Problem& p) {
  std::vector<std::string> names;
  for (const char* name : {"q", "k", "v", "g", "beta", "a", "x", "dt", "A", "B", "C", "h0", "z0"})
    if (p.in.count(name)) names.push_back(name);
  return names;
}

Arrays forward(const Problem& p) { return run(p, false).out; }

Arrays backward(const Problem& p) { return run(p, true).grad; }

}  // namespace linattn::reference
