// Fused CPU kernels for neurodyn.ops (built on first use by neurodyn/ops/cpu_kernel.py).
//
// selective scan, per (batch b, channel d), states n = 0..N-1, step size dt (already softplus'd):
//   a_t,n = exp(dt_t A_n),  h_t,n = a_t,n h_{t-1},n + w_t,n B_t,n u_t,  y_t = sum_n C_t,n h_t,n + D u_t
// with w = dt (Mamba, "euler" input) or, with zoh = true, w = (1 - a) / lambda, lambda = -A > 0 (the
// Kirchhoff cell's exact zero-order hold, ops/knc_scan.py; expm1 and its derivative in-kernel).
// (softplus, delta_bias and the z gate act on (batch, d, L) tensors; they are applied by vectorised
// torch ops around the kernel, which keeps per-step scalar transcendentals out of the state loop.)
// The N states live in registers / L1; (batch, d, L, N) is never materialised. The forward stores the
// state at the end of every CHUNK steps; the backward replays one chunk at a time from those
// checkpoints and runs the adjoint recurrence lam_t = C_t gy_t + a_{t+1} lam_{t+1} in reverse.
//
// linear_scan: h_t = a_t h_{t-1} + x_t along dim 1 of contiguous (P, L, Q) tensors.
//
// The Python side pads N to a multiple of 8 (zero B and C columns keep padded states at zero),
// transposes input-dependent B/C to (batch, groups, L, Npad) and casts everything to float or double.

// Only the headers needed (not torch/extension.h): this keeps the first-use compile short.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "checks.h"
#include "fast_math.h"

namespace {

namespace ck = neurodyn_check;
using neurodyn_math::fast_exp;
using neurodyn_math::fast_exp_em1;

constexpr int64_t CHUNK = 64;

// psi(x) = (phi(x) - e^-x) / x = -phi'(x) for x >= 0, phi(x) = (1 - e^-x) / x, given a = e^-x and
// m = expm1(-x): psi(x) = sum_j (-1)^j (j+1)/(j+2)! x^j below x = 1/4 (float: degree 6, double:
// degree 11, truncation below 1 ulp), the closed form (-m - x a) / x^2 (cancellation < 8 ulp) above.
constexpr double psi_coef(int j) {
  double f = 1.0;
  for (int i = 2; i <= j + 2; ++i) f *= i;
  return (j % 2 ? -1.0 : 1.0) * (j + 1) / f;
}

template <typename T> struct PsiDegree;
template <> struct PsiDegree<float> { static constexpr int value = 6; };
template <> struct PsiDegree<double> { static constexpr int value = 11; };

// Horner's scheme unrolled at compile time (a loop here would keep the caller's simd loop scalar).
template <typename T, int J, int DEG>
inline T psi_poly(T x) {
  if constexpr (J == DEG) {
    return T(psi_coef(J));
  } else {
    return psi_poly<T, J + 1, DEG>(x) * x + T(psi_coef(J));
  }
}

template <typename T>
inline T zoh_psi(T x, T a, T m) {
  const T p = psi_poly<T, 0, PsiDegree<T>::value>(x);
  const T xs = std::max(x, T(0.25));
  const T closed = (-m - x * a) / (xs * xs);
  return x < T(0.25) ? p : closed;
}

// n values per row: a local array when the state count is compiled in (NP > 0; it can then live in
// registers), a heap vector otherwise.
template <typename T, int NP>
struct RowBuf {
  T local[NP > 0 ? NP : 1];
  std::vector<T> heap;
  explicit RowBuf(int64_t n) : heap(NP > 0 ? 0 : n) {}
  T* data() { return NP > 0 ? local : heap.data(); }
};

// Sum of p[0..n): a pairwise tree of adds over halves for the compiled state counts, an omp reduction
// otherwise. The forward uses it at N = 8 and 16, where the `omp simd reduction` inside the state loop
// compiled to 16 dependent scalar adds per step and bounded the forward (N = 16 took as long as N = 32;
// with the tree 5.7 vs 6.9 ms at batch 32, d 64, L 256). At N >= 32 the in-loop reduction is faster.
template <typename T, int NP>
inline T lane_sum(T* p, int64_t n) {
  if constexpr (NP >= 2) {
    for (int k = 0; k < NP / 2; ++k) p[k] += p[k + NP / 2];
    return lane_sum<T, NP / 2>(p, n);
  } else if constexpr (NP == 1) {
    return p[0];
  } else {
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; ++k) s += p[k];
    return s;
  }
}

template <typename T>
struct Args {
  // sizes
  int64_t batch, dim, L, np, groups_B, groups_C;
  bool var_B, var_C, has_D, has_h0;
  // inputs (delta is the step size dt)
  const T *u, *delta, *A, *B, *C, *D, *h0;
  // B/C of channel (b, d) at step t: base + t * stride
  inline const T* B_at(int64_t b, int64_t d) const {
    return var_B ? B + (b * groups_B + d / (dim / groups_B)) * L * np : B + d * np;
  }
  inline const T* C_at(int64_t b, int64_t d) const {
    return var_C ? C + (b * groups_C + d / (dim / groups_C)) * L * np : C + d * np;
  }
};

// One (batch, channel) row of the scan: its sequences, its A, B and C, its skip, the state size np and the
// number of checkpointed chunks; shared by the forward and the backward row.
template <typename T>
struct Row {
  int64_t L, row, sB, sC, nck;
  const T *u, *delta, *A, *Bp, *Cp;
  T Dd;
  Row(const Args<T>& a, int64_t b, int64_t d, int64_t np)
      : L(a.L), row(b * a.dim + d), sB(a.var_B ? np : 0), sC(a.var_C ? np : 0), nck((a.L + CHUNK - 1) / CHUNK),
        u(a.u + row * a.L), delta(a.delta + row * a.L), A(a.A + d * np), Bp(a.B_at(b, d)), Cp(a.C_at(b, d)),
        Dd(a.has_D ? a.D[d] : T(0)) {}
};

// ZOH = false: Mamba's input term dt B_t u_t; ZOH = true: the exact zero-order hold of the Kirchhoff
// cell, (1 - exp(dt A)) / (-A) B_t u_t with A = -lambda < 0 (the factor is computed in-kernel).
// SA (scalar A, Euler only): every state of the row has the same A (Mamba-2's scalar A per head, the
// LaMO / GeoMaNO default), so a_t = exp(dt_t A) is one scalar exponential per step instead of N.
template <typename T, int NP, bool ZOH, bool SA = false>
void fwd_row(const Args<T>& a, int64_t b, int64_t d, T* out, T* last, T* ckpt) {
  const int64_t np = NP > 0 ? NP : a.np;  // a compile-time constant where NP > 0
  const Row<T> r(a, b, d, np);
  const int64_t L = r.L, row = r.row, sB = r.sB, sC = r.sC, nck = r.nck;
  const T *u = r.u, *delta = r.delta, *A = r.A, *Bp = r.Bp, *Cp = r.Cp;
  const T Dd = r.Dd;
  T* o = out + row * L;
  T* ck = ckpt ? ckpt + row * nck * np : nullptr;

  RowBuf<T, NP> hb(np), pb(np);
  T* h = hb.data();
  T* p = pb.data();  // C_t h_t per state, summed by lane_sum when TREE
  constexpr bool TREE = NP == 8 || NP == 16;
  for (int64_t k = 0; k < np; ++k) h[k] = a.has_h0 ? a.h0[row * np + k] : T(0);
  std::vector<T> ilv(ZOH ? np : 0);  // 1 / lambda = -1 / A
  for (int64_t k = 0; k < (ZOH ? np : 0); ++k) ilv[k] = T(-1) / A[k];
  const T* il = ilv.data();

  for (int64_t t = 0; t < L; ++t) {
    const T dt = delta[t];
    const T du = dt * u[t];
    const T ut = u[t];
    const T* Bt = Bp + t * sB;
    const T* Ct = Cp + t * sC;
    // y_t = sum_k C_k h_k: a tree over a buffer at N <= 16, an omp reduction in the loop above that
    T y = 0;
    if (ZOH) {
#pragma omp simd reduction(+ : y)
      for (int64_t k = 0; k < np; ++k) {
        T ak, mk;
        fast_exp_em1(dt * A[k], ak, mk);
        h[k] = ak * h[k] - (mk * il[k]) * ut * Bt[k];
        if (TREE) p[k] = Ct[k] * h[k]; else y += Ct[k] * h[k];
      }
    } else if (SA) {
      const T ak = fast_exp(dt * A[0]);
#pragma omp simd reduction(+ : y)
      for (int64_t k = 0; k < np; ++k) {
        h[k] = ak * h[k] + du * Bt[k];
        if (TREE) p[k] = Ct[k] * h[k]; else y += Ct[k] * h[k];
      }
    } else {
#pragma omp simd reduction(+ : y)
      for (int64_t k = 0; k < np; ++k) {
        const T ak = fast_exp(dt * A[k]);
        h[k] = ak * h[k] + du * Bt[k];
        if (TREE) p[k] = Ct[k] * h[k]; else y += Ct[k] * h[k];
      }
    }
    if (TREE) y = lane_sum<T, NP>(p, np);
    o[t] = y + Dd * u[t];
    if (ck && ((t + 1) % CHUNK == 0 || t + 1 == L)) {
      T* dst = ck + (t / CHUNK) * np;
      for (int64_t k = 0; k < np; ++k) dst[k] = h[k];
    }
  }
  T* lp = last + row * np;
  for (int64_t k = 0; k < np; ++k) lp[k] = h[k];
}

template <typename T>
struct Grads {
  T *gu, *gdelta, *gh0;
  double *gA, *gD;           // (batch, dim, np), (batch, dim): summed over batch in Python
  double *gB_fix, *gC_fix;   // (batch, dim, np) when B / C are fixed
  T *gB_var, *gC_var;        // (batch, groups, L, np) when input-dependent
};

// Per-thread accumulator for an input-dependent B or C gradient: rows of the same (b, group) are
// summed locally and added to the shared output under a lock when the key changes.
template <typename T>
struct GroupAccum {
  std::vector<T> buf;
  int64_t key = -1;
  T* dst = nullptr;
  std::mutex* mu = nullptr;
  void flush() {
    if (key < 0) return;
    {
      std::lock_guard<std::mutex> lock(*mu);
      T* o = dst + key * static_cast<int64_t>(buf.size());
      for (size_t i = 0; i < buf.size(); ++i) o[i] += buf[i];
    }
    std::fill(buf.begin(), buf.end(), T(0));
    key = -1;
  }
  T* get(int64_t k) {
    if (k != key) {
      flush();
      key = k;
    }
    return buf.data();
  }
};

template <typename T, int NP, bool ZOH, bool SA = false>
void bwd_row(const Args<T>& a, const Grads<T>& g, int64_t b, int64_t d, const T* gout,
             const T* glast, const T* ckpt, GroupAccum<T>& accB, GroupAccum<T>& accC,
             std::vector<T>& work) {
  const int64_t np = NP > 0 ? NP : a.np;  // a compile-time constant where NP > 0
  const Row<T> r(a, b, d, np);
  const int64_t L = r.L, row = r.row, sB = r.sB, sC = r.sC, nck = r.nck;
  const T *u = r.u, *delta = r.delta, *A = r.A, *Bp = r.Bp, *Cp = r.Cp;
  const T Dd = r.Dd;
  const T* go = gout + row * L;
  const T* ck = ckpt + row * nck * np;

  // work layout: h (CHUNK+1)*np | a CHUNK*np | carry np | chunk dB np | chunk dC np | ZOH: w, psi
  T* hbuf = work.data();
  T* abuf = hbuf + (CHUNK + 1) * np;
  T* carry_w = abuf + CHUNK * np;
  T carry_s[NP > 0 ? NP : 1];  // a_{t+1} lam_{t+1}: a local array at a compiled N, so it stays in registers
  T* carry = NP > 0 ? carry_s : carry_w;
  T* cB = carry_w + np;     // per-chunk partial sums of fixed-B / fixed-C gradients
  T* cC = cB + np;
  T* wbuf = cC + np;  // ZOH input factors (1 - a_t) / lambda of the chunk
  T* pbuf = wbuf + CHUNK * np;  // u_t dw_t/dA = u_t dt_t^2 psi(dt_t lambda) of the chunk
  std::vector<T> ilv(ZOH ? np : 0);
  for (int64_t k = 0; k < (ZOH ? np : 0); ++k) ilv[k] = T(-1) / A[k];
  const T* il = ilv.data();
  // B/C gradients at step t: row t of the group accumulator, or the per-chunk partial sum.
  T* gBv = a.var_B ? accB.get(b * a.groups_B + d / (a.dim / a.groups_B)) : cB;
  T* gCv = a.var_C ? accC.get(b * a.groups_C + d / (a.dim / a.groups_C)) : cC;

  RowBuf<T, NP> hcb(np);
  T* hcur = hcb.data();
  std::vector<double> acc(3 * np, 0.0);  // sum_t dL/d(dt A_k) dt, fixed dB, fixed dC
  double* gA = acc.data();
  double* gBf = gA + np;
  double* gCf = gA + 2 * np;
  for (int64_t k = 0; k < np; ++k) {
    carry[k] = glast ? glast[row * np + k] : T(0);
    cB[k] = cC[k] = T(0);
  }
  double gD = 0.0;

  for (int64_t c = nck - 1; c >= 0; --c) {
    const int64_t t0 = c * CHUNK, t1 = std::min(L, t0 + CHUNK);
    if (c == 0) {
      for (int64_t k = 0; k < np; ++k) hbuf[k] = a.has_h0 ? a.h0[row * np + k] : T(0);
    } else {
      for (int64_t k = 0; k < np; ++k) hbuf[k] = ck[(c - 1) * np + k];
    }
    // the running state lives in hcur (registers at a compiled N), hbuf only receives copies: reading h_{t-1}
    // back from hbuf put a store-to-load forwarding on the loop's critical path (a fifth of the backward)
    for (int64_t k = 0; k < np; ++k) hcur[k] = hbuf[k];
    for (int64_t t = t0; t < t1; ++t) {  // replay the chunk, keeping h_{t-1}, h_t and a_t
      const int64_t i = t - t0;
      const T dt = delta[t];
      const T du = dt * u[t];
      const T* Bt = Bp + t * sB;
      T* hn = hbuf + (i + 1) * np;
      T* at = abuf + i * np;
      if (ZOH) {
        const T ut = u[t];
        const T udt2 = ut * dt * dt;
        T* wt = wbuf + i * np;
        T* pt = pbuf + i * np;
#pragma omp simd
        for (int64_t k = 0; k < np; ++k) {
          T ak, mk;
          fast_exp_em1(dt * A[k], ak, mk);
          const T wk = -mk * il[k];
          at[k] = ak;
          wt[k] = wk;
          pt[k] = udt2 * zoh_psi(-dt * A[k], ak, mk);  // off the adjoint's critical path
          hcur[k] = ak * hcur[k] + wk * ut * Bt[k];
          hn[k] = hcur[k];
        }
      } else if (SA) {
        const T ak = fast_exp(dt * A[0]);
#pragma omp simd
        for (int64_t k = 0; k < np; ++k) {
          at[k] = ak;
          hcur[k] = ak * hcur[k] + du * Bt[k];
          hn[k] = hcur[k];
        }
      } else {
#pragma omp simd
        for (int64_t k = 0; k < np; ++k) {
          const T ak = fast_exp(dt * A[k]);
          at[k] = ak;
          hcur[k] = ak * hcur[k] + du * Bt[k];
          hn[k] = hcur[k];
        }
      }
    }
    for (int64_t t = t1 - 1; t >= t0; --t) {
      const int64_t i = t - t0;
      const T dt = delta[t];
      const T gy = go[t];
      gD += static_cast<double>(gy) * u[t];
      const T du = dt * u[t];
      const T* Bt = Bp + t * sB;
      const T* Ct = Cp + t * sC;
      const T* hp = hbuf + i * np;
      const T* hn = hbuf + (i + 1) * np;
      const T* at = abuf + i * np;
      T* gBt = gBv + t * sB;
      T* gCt = gCv + t * sC;
      T gdtA = 0, glamB = 0;
      if (ZOH) {
        // w = (1 - a) / lambda: dw/d dt = a, dw/dA = dt^2 psi(dt lambda)
        const T ut = u[t];
        const T* wt = wbuf + i * np;
        const T* pt = pbuf + i * np;
        T glamBa = 0;
#pragma omp simd reduction(+ : gdtA, glamB, glamBa)
        for (int64_t k = 0; k < np; ++k) {
          const T lam = gy * Ct[k] + carry[k];
          const T gla = lam * hp[k] * at[k];
          const T lb = lam * Bt[k];
          gA[k] += static_cast<double>(gla * dt + lb * pt[k]);
          gdtA += gla * A[k];
          glamB += lb * wt[k];
          glamBa += lb * at[k];
          gBt[k] += lam * wt[k] * ut;
          gCt[k] += gy * hn[k];
          carry[k] = at[k] * lam;
        }
        g.gu[row * L + t] = gy * Dd + glamB;
        g.gdelta[row * L + t] = gdtA + glamBa * ut;
      } else {
#pragma omp simd reduction(+ : gdtA, glamB)
        for (int64_t k = 0; k < np; ++k) {
          const T lam = gy * Ct[k] + carry[k];  // dL/dh_t
          const T gla = lam * hp[k] * at[k];    // dL/d(dt A_k)
          gA[k] += static_cast<double>(gla * dt);
          gdtA += gla * A[k];
          glamB += lam * Bt[k];
          gBt[k] += lam * du;
          gCt[k] += gy * hn[k];
          carry[k] = at[k] * lam;
        }
        g.gu[row * L + t] = gy * Dd + glamB * dt;
        g.gdelta[row * L + t] = gdtA + glamB * u[t];
      }
    }
    if (!a.var_B)
      for (int64_t k = 0; k < np; ++k) { gBf[k] += cB[k]; cB[k] = T(0); }
    if (!a.var_C)
      for (int64_t k = 0; k < np; ++k) { gCf[k] += cC[k]; cC[k] = T(0); }
  }
  for (int64_t k = 0; k < np; ++k) {
    g.gA[row * np + k] = gA[k];
    if (!a.var_B) g.gB_fix[row * np + k] = gBf[k];
    if (!a.var_C) g.gC_fix[row * np + k] = gCf[k];
    if (g.gh0) g.gh0[row * np + k] = carry[k];
  }
  g.gD[row] = gD;
}

template <typename T>
Args<T> make_args(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                  const at::Tensor& B, const at::Tensor& C, const c10::optional<at::Tensor>& D,
                  const c10::optional<at::Tensor>& h0) {
  Args<T> a;
  a.batch = u.size(0);
  a.dim = u.size(1);
  a.L = u.size(2);
  a.np = A.size(1);
  a.var_B = B.dim() == 4;
  a.var_C = C.dim() == 4;
  a.groups_B = a.var_B ? B.size(1) : 1;
  a.groups_C = a.var_C ? C.size(1) : 1;
  a.has_D = D.has_value();
  a.has_h0 = h0.has_value();
  a.u = u.data_ptr<T>();
  a.delta = delta.data_ptr<T>();
  a.A = A.data_ptr<T>();
  a.B = B.data_ptr<T>();
  a.C = C.data_ptr<T>();
  a.D = a.has_D ? D->data_ptr<T>() : nullptr;
  a.h0 = a.has_h0 ? h0->data_ptr<T>() : nullptr;
  return a;
}

// Templated on the padded state count so that common sizes keep the states in registers.
#define NEURODYN_NP_DISPATCH(np, NAME, ...)          \
  switch (np) {                                      \
    case 8: { constexpr int NAME = 8; __VA_ARGS__ } break;   \
    case 16: { constexpr int NAME = 16; __VA_ARGS__ } break; \
    case 32: { constexpr int NAME = 32; __VA_ARGS__ } break; \
    default: { constexpr int NAME = 0; __VA_ARGS__ } break;  \
  }

// True when the row's A is one value for every state (exact comparison: the scalar path is then
// bit-identical in a_t; padded states carry a copy of A[0] from the Python side).
template <typename T>
bool row_has_scalar_A(const T* A, int64_t np) {
  for (int64_t k = 1; k < np; ++k)
    if (A[k] != A[0]) return false;
  return true;
}

// B or C: fixed (d, n_pad), or input-dependent (batch, groups, L, n_pad) with groups dividing d
void check_coef(const char* op, const char* name, const at::Tensor& W, at::ScalarType dtype, int64_t batch,
                int64_t dim, int64_t L, int64_t np) {
  const int64_t groups = W.defined() && W.dim() == 4 ? W.size(1) : 0;
  TORCH_CHECK(W.defined() && (W.dim() == 2 || (groups > 0 && dim % groups == 0)), "neurodyn_scan.", op, ": ", name,
              " has shape ", W.defined() ? W.sizes() : at::IntArrayRef{}, ", expected (d, n_pad) = [", dim, ", ", np,
              "] or (batch, groups, L, n_pad) = [", batch, ", G, ", L, ", ", np, "] with G dividing d = ", dim);
  if (groups > 0) {
    ck::like(op, name, W, dtype, {batch, groups, L, np}, "(batch, groups, L, n_pad)");
  } else {
    ck::like(op, name, W, dtype, {dim, np}, "(d, n_pad)");
  }
}

// u, delta (batch, d, L); A (d, n_pad); B, C (d, n_pad) or (batch, groups, L, n_pad); D (d,); h0 (batch, d, n_pad)
void check_inputs(const char* op, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                  const at::Tensor& B, const at::Tensor& C, const c10::optional<at::Tensor>& D,
                  const c10::optional<at::Tensor>& h0) {
  ck::input(op, "u", u, 3, "(batch, d, L)");
  const auto dtype = u.scalar_type();
  const int64_t batch = u.size(0), dim = u.size(1), L = u.size(2);
  ck::like(op, "delta", delta, dtype, {batch, dim, L}, "(batch, d, L) like u");
  const int64_t np = ck::padded_states(op, A, dim);
  ck::like(op, "A", A, dtype, {dim, np}, "(d, n_pad)");
  check_coef(op, "B", B, dtype, batch, dim, L, np);
  check_coef(op, "C", C, dtype, batch, dim, L, np);
  if (D.has_value()) ck::like(op, "D", *D, dtype, {dim}, "(d,)");
  if (h0.has_value()) ck::like(op, "h0", *h0, dtype, {batch, dim, np}, "(batch, d, n_pad)");
}

}  // namespace

std::vector<at::Tensor> selective_scan_fwd(const at::Tensor& u, const at::Tensor& delta,
                                           const at::Tensor& A, const at::Tensor& B,
                                           const at::Tensor& C, const c10::optional<at::Tensor>& D,
                                           const c10::optional<at::Tensor>& h0, bool save_checkpoints,
                                           bool zoh) {
  check_inputs("selective_scan_fwd", u, delta, A, B, C, D, h0);
  const int64_t batch = u.size(0), dim = u.size(1), L = u.size(2), np = A.size(1);
  const int64_t nck = (L + CHUNK - 1) / CHUNK;
  at::Tensor out = at::empty_like(u);
  at::Tensor last = at::empty({batch, dim, np}, u.options());
  at::Tensor ckpt = save_checkpoints ? at::empty({batch, dim, nck, np}, u.options()) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "neurodyn_selective_scan_fwd", [&] {
    const Args<scalar_t> a = make_args<scalar_t>(u, delta, A, B, C, D, h0);
    scalar_t* o = out.data_ptr<scalar_t>();
    scalar_t* lp = last.data_ptr<scalar_t>();
    scalar_t* cp = save_checkpoints ? ckpt.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, batch * dim, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (zoh) {
          NEURODYN_NP_DISPATCH(np, NP, fwd_row<scalar_t, NP, true>(a, i / dim, i % dim, o, lp, cp);)
        } else if (row_has_scalar_A(a.A + (i % dim) * np, np)) {
          NEURODYN_NP_DISPATCH(np, NP, fwd_row<scalar_t, NP, false, true>(a, i / dim, i % dim, o, lp, cp);)
        } else {
          NEURODYN_NP_DISPATCH(np, NP, fwd_row<scalar_t, NP, false>(a, i / dim, i % dim, o, lp, cp);)
        }
      }
    });
  });
  return {out, last, ckpt};
}

std::vector<at::Tensor> selective_scan_bwd(
    const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& B,
    const at::Tensor& C, const c10::optional<at::Tensor>& D, const c10::optional<at::Tensor>& h0,
    const at::Tensor& ckpt, const at::Tensor& gout, const c10::optional<at::Tensor>& glast, bool zoh) {
  const char* op = "selective_scan_bwd";
  check_inputs(op, u, delta, A, B, C, D, h0);
  const int64_t batch = u.size(0), dim = u.size(1), L = u.size(2), np = A.size(1);
  const auto dtype = u.scalar_type();
  ck::like(op, "ckpt", ckpt, dtype, {batch, dim, (L + CHUNK - 1) / CHUNK, np},
           "(batch, d, chunks, n_pad) as selective_scan_fwd saved it");
  ck::like(op, "gout", gout, dtype, {batch, dim, L}, "(batch, d, L) like u");
  if (glast.has_value()) ck::like(op, "glast", *glast, dtype, {batch, dim, np}, "(batch, d, n_pad)");
  auto dopt = u.options().dtype(at::kDouble);
  at::Tensor gu = at::empty_like(u), gdelta = at::empty_like(u);
  at::Tensor gh0 = h0.has_value() ? at::empty({batch, dim, np}, u.options()) : at::Tensor();
  at::Tensor gA = at::empty({batch, dim, np}, dopt);
  at::Tensor gD = at::empty({batch, dim}, dopt);
  const bool var_B = B.dim() == 4, var_C = C.dim() == 4;
  at::Tensor gB = var_B ? at::zeros_like(B) : at::empty({batch, dim, np}, dopt);
  at::Tensor gC = var_C ? at::zeros_like(C) : at::empty({batch, dim, np}, dopt);
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "neurodyn_selective_scan_bwd", [&] {
    const Args<scalar_t> a = make_args<scalar_t>(u, delta, A, B, C, D, h0);
    Grads<scalar_t> g;
    g.gu = gu.data_ptr<scalar_t>();
    g.gdelta = gdelta.data_ptr<scalar_t>();
    g.gh0 = h0.has_value() ? gh0.data_ptr<scalar_t>() : nullptr;
    g.gA = gA.data_ptr<double>();
    g.gD = gD.data_ptr<double>();
    g.gB_fix = var_B ? nullptr : gB.data_ptr<double>();
    g.gC_fix = var_C ? nullptr : gC.data_ptr<double>();
    g.gB_var = var_B ? gB.data_ptr<scalar_t>() : nullptr;
    g.gC_var = var_C ? gC.data_ptr<scalar_t>() : nullptr;
    const scalar_t* go = gout.data_ptr<scalar_t>();
    const scalar_t* gl = glast.has_value() ? glast->data_ptr<scalar_t>() : nullptr;
    const scalar_t* cp = ckpt.data_ptr<scalar_t>();
    std::mutex muB, muC;
    at::parallel_for(0, batch * dim, 1, [&](int64_t begin, int64_t end) {
      GroupAccum<scalar_t> accB, accC;
      if (var_B) { accB.buf.assign(L * np, scalar_t(0)); accB.dst = g.gB_var; accB.mu = &muB; }
      if (var_C) { accC.buf.assign(L * np, scalar_t(0)); accC.dst = g.gC_var; accC.mu = &muC; }
      std::vector<scalar_t> work((4 * CHUNK + 4) * np);
      for (int64_t i = begin; i < end; ++i) {
        if (zoh) {
          NEURODYN_NP_DISPATCH(np, NP,
              bwd_row<scalar_t, NP, true>(a, g, i / dim, i % dim, go, gl, cp, accB, accC, work);)
        } else if (row_has_scalar_A(a.A + (i % dim) * np, np)) {
          NEURODYN_NP_DISPATCH(np, NP,
              bwd_row<scalar_t, NP, false, true>(a, g, i / dim, i % dim, go, gl, cp, accB, accC, work);)
        } else {
          NEURODYN_NP_DISPATCH(np, NP,
              bwd_row<scalar_t, NP, false>(a, g, i / dim, i % dim, go, gl, cp, accB, accC, work);)
        }
      }
      accB.flush();
      accC.flush();
    });
  });
  return {gu, gdelta, gA, gB, gC, gD, gh0};
}

namespace {
template <typename T>
void linear_scan_rows(const T* ap, const T* xp, const T* h0p, T* hp, int64_t begin, int64_t end,
                      int64_t L, int64_t Q, bool reverse) {
  for (int64_t p = begin; p < end; ++p) {
    const int64_t base = p * L * Q;
    for (int64_t s = 0; s < L; ++s) {
      const int64_t t = reverse ? L - 1 - s : s;
      const T* at_ = ap + base + t * Q;
      const T* xt = xp + base + t * Q;
      T* ht = hp + base + t * Q;
      if (s == 0 && h0p == nullptr) {
        for (int64_t q = 0; q < Q; ++q) ht[q] = xt[q];
        continue;
      }
      const T* hprev = s == 0 ? h0p + p * Q : hp + base + (reverse ? t + 1 : t - 1) * Q;
#pragma omp simd
      for (int64_t q = 0; q < Q; ++q) ht[q] = at_[q] * hprev[q] + xt[q];
    }
  }
}
}  // namespace

// h_t = a_t h_{t-1} + x_t along dim 1 of contiguous (P, L, Q) tensors (reverse: t = L-1 .. 0).
at::Tensor linear_scan(const at::Tensor& a, const at::Tensor& x, const c10::optional<at::Tensor>& h0,
                       bool reverse) {
  const char* op = "linear_scan";
  ck::input(op, "x", x, 3, "(P, L, Q)");
  const int64_t P = x.size(0), L = x.size(1), Q = x.size(2);
  ck::like(op, "a", a, x.scalar_type(), {P, L, Q}, "(P, L, Q) like x");
  if (h0.has_value()) ck::like(op, "h0", *h0, x.scalar_type(), {P, Q}, "(P, Q)");
  at::Tensor h = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "neurodyn_linear_scan", [&] {
    const scalar_t* ap = a.data_ptr<scalar_t>();
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* h0p = h0.has_value() ? h0->data_ptr<scalar_t>() : nullptr;
    scalar_t* hp = h.data_ptr<scalar_t>();
    at::parallel_for(0, P, 1, [&](int64_t begin, int64_t end) {
      linear_scan_rows<scalar_t>(ap, xp, h0p, hp, begin, end, L, Q, reverse);
    });
  });
  return h;
}

// ---------------------------------------------------------------------------------------------
// 2-D selective scan (GeoMaNO / 2DMamba), one direction, in that direction's frame:
//   g[i,j] = a[i,j] g[i,j-1] + bx[i,j],   h[i,j] = a[i,j] h[i-1,j] + g[i,j],
//   y[i,j] = sum_s C_s (h_s - corr_s) (- sum_s R_s bx_s for eq9) + D x,
//   a = exp(dt A), bx = dt B x, corr = R bx (cbx) | 0 (eq9) | R x (alg2); dt given (softplus'd).
// Per (b, d) the forward keeps g (N) and the column states h[i-1, :, :] (W x N) in a row buffer; the
// backward replays ROWS rows at a time from stored row states and runs the two adjoints
//   mu[i,j] = C gy + a[i+1,j] mu[i+1,j],   nu[i,j] = mu[i,j] + a[i,j+1] nu[i,j+1].
namespace {

constexpr int64_t ROWS = 8;

struct Args2d {
  int64_t batch, dim, H, W, np;
  bool has_D;
};

template <typename T, int NP, int FORM>
void fwd2d_row(const Args2d& s, int64_t b, int64_t d, const T* x, const T* delta, const T* A,
               const T* B, const T* C, const T* D, const T* R, T* out, T* ckpt,
               std::vector<T>& hcol) {
  const int64_t np = NP > 0 ? NP : s.np;
  const int64_t H = s.H, W = s.W, row = b * s.dim + d;
  const T* xr = x + row * H * W;
  const T* dr = delta + row * H * W;
  const T* Ad = A + d * np;
  const T* Rd = R + d * np;
  const T Dd = s.has_D ? D[d] : T(0);
  T* o = out + row * H * W;
  const int64_t nck = (H + ROWS - 1) / ROWS;
  std::fill(hcol.begin(), hcol.end(), T(0));
  RowBuf<T, NP> gb(np);
  T* g = gb.data();
  for (int64_t i = 0; i < H; ++i) {
    for (int64_t k = 0; k < np; ++k) g[k] = T(0);
    for (int64_t j = 0; j < W; ++j) {
      const T dt = dr[i * W + j];
      const T xv = xr[i * W + j];
      const T du = dt * xv;
      const T* Bp = B + ((b * H + i) * W + j) * np;
      const T* Cp = C + ((b * H + i) * W + j) * np;
      T* hc = hcol.data() + j * np;
      T y = 0, y2 = 0;
#pragma omp simd reduction(+ : y, y2)
      for (int64_t k = 0; k < np; ++k) {
        const T a = fast_exp(dt * Ad[k]);
        const T bx = du * Bp[k];
        g[k] = a * g[k] + bx;
        const T h = a * hc[k] + g[k];
        hc[k] = h;
        const T corr = FORM == 0 ? Rd[k] * bx : (FORM == 2 ? Rd[k] * xv : T(0));
        y += Cp[k] * (h - corr);
        if (FORM == 1) y2 += Rd[k] * bx;
      }
      o[i * W + j] = y - y2 + Dd * xv;
    }
    if (ckpt && (i + 1) % ROWS == 0 && i + 1 < H) {
      T* dst = ckpt + (row * nck + i / ROWS) * W * np;
      std::copy(hcol.begin(), hcol.end(), dst);
    }
  }
}

template <typename T>
struct Grads2d {
  T *gx, *gdelta;
  double *gA, *gD, *gR;  // (batch, dim, np), (batch, dim), (batch, dim, np)
};

template <typename T, int NP, int FORM>
void bwd2d_row(const Args2d& s, const Grads2d<T>& G, int64_t b, int64_t d, const T* x,
               const T* delta, const T* A, const T* B, const T* C, const T* D, const T* R, const T* ckpt, const T* gout, T* gB, T* gC, std::vector<T>& work) {
  const int64_t np = NP > 0 ? NP : s.np;
  const int64_t H = s.H, W = s.W, row = b * s.dim + d;
  const T* xr = x + row * H * W;
  const T* dr = delta + row * H * W;
  const T* gy_r = gout + row * H * W;
  const T* Ad = A + d * np;
  const T* Rd = R + d * np;
  const T Dd = s.has_D ? D[d] : T(0);
  const int64_t nck = (H + ROWS - 1) / ROWS;
  const int64_t WN = W * np;
  // work: a, g, h for ROWS rows | column states | mu carry | nu carry
  T* abuf = work.data();
  T* gbuf = abuf + ROWS * WN;
  T* hbuf = gbuf + ROWS * WN;
  T* hcol = hbuf + ROWS * WN;
  T* mucar = hcol + WN;  // a[i+1,j] mu[i+1,j]
  T* nucar = mucar + WN;  // a[i,j+1] nu[i,j+1] (np entries)
  std::fill(mucar, mucar + WN, T(0));
  std::vector<double> acc(2 * np, 0.0);
  double* gA = acc.data();
  double* gR = gA + np;
  double gD = 0.0;
  for (int64_t c = nck - 1; c >= 0; --c) {
    const int64_t r0 = c * ROWS, r1 = std::min(H, r0 + ROWS);
    if (c == 0) {
      std::fill(hcol, hcol + WN, T(0));
    } else {
      const T* src = ckpt + (row * nck + c - 1) * WN;
      std::copy(src, src + WN, hcol);
    }
    for (int64_t i = r0; i < r1; ++i) {  // replay the rows of this block
      T* ar = abuf + (i - r0) * WN;
      T* gr = gbuf + (i - r0) * WN;
      T* hr = hbuf + (i - r0) * WN;
      for (int64_t j = 0; j < W; ++j) {
        const T dt = dr[i * W + j];
        const T du = dt * xr[i * W + j];
        const T* Bp = B + ((b * H + i) * W + j) * np;
        const T* gprev = j > 0 ? gr + (j - 1) * np : nullptr;
        T* hc = hcol + j * np;
#pragma omp simd
        for (int64_t k = 0; k < np; ++k) {
          const T a = fast_exp(dt * Ad[k]);
          const T gk = a * (gprev ? gprev[k] : T(0)) + du * Bp[k];
          const T hk = a * hc[k] + gk;
          ar[j * np + k] = a;
          gr[j * np + k] = gk;
          hr[j * np + k] = hk;
          hc[k] = hk;
        }
      }
    }
    for (int64_t i = r1 - 1; i >= r0; --i) {
      const T* ar = abuf + (i - r0) * WN;
      const T* gr = gbuf + (i - r0) * WN;
      const T* hr = hbuf + (i - r0) * WN;
      for (int64_t k = 0; k < np; ++k) nucar[k] = T(0);
      for (int64_t j = W - 1; j >= 0; --j) {
        const T dt = dr[i * W + j];
        const T xv = xr[i * W + j];
        const T du = dt * xv;
        const T gyv = gy_r[i * W + j];
        gD += static_cast<double>(gyv) * xv;
        const T* Bp = B + ((b * H + i) * W + j) * np;
        const T* Cp = C + ((b * H + i) * W + j) * np;
        T* gBp = gB + (i * W + j) * np;
        T* gCp = gC + (i * W + j) * np;
        const T* a = ar + j * np;
        const T* gg = gr + j * np;
        const T* hh = hr + j * np;
        T* mc = mucar + j * np;
        T gdtA = 0, gbxB = 0, gxc = 0;
#pragma omp simd reduction(+ : gdtA, gbxB, gxc)
        for (int64_t k = 0; k < np; ++k) {
          const T bx = du * Bp[k];
          const T mu = gyv * Cp[k] + mc[k];
          const T nu = mu + nucar[k];
          const T gla = nu * (gg[k] - bx) + mu * (hh[k] - gg[k]);
          gA[k] += static_cast<double>(gla * dt);
          gdtA += gla * Ad[k];
          T gbx = nu, corr = T(0), gr_k = T(0);
          if (FORM == 0) { gbx -= gyv * Cp[k] * Rd[k]; corr = Rd[k] * bx; gr_k = -gyv * Cp[k] * bx; }
          if (FORM == 1) { gbx -= gyv * Rd[k]; gr_k = -gyv * bx; }
          if (FORM == 2) { corr = Rd[k] * xv; gr_k = -gyv * Cp[k] * xv; gxc -= gyv * Cp[k] * Rd[k]; }
          gR[k] += static_cast<double>(gr_k);
          gbxB += gbx * Bp[k];
          gBp[k] += gbx * du;
          gCp[k] += gyv * (hh[k] - corr);
          mc[k] = a[k] * mu;
          nucar[k] = a[k] * nu;
        }
        G.gx[row * H * W + i * W + j] = gbxB * dt + Dd * gyv + gxc;
        G.gdelta[row * H * W + i * W + j] = gdtA + gbxB * xv;
      }
    }
  }
  for (int64_t k = 0; k < np; ++k) {
    G.gA[row * np + k] = gA[k];
    G.gR[row * np + k] = gR[k];
  }
  G.gD[row] = gD;
}

#define NEURODYN_FORM_DISPATCH(form, NAME, ...)                 \
  switch (form) {                                               \
    case 0: { constexpr int NAME = 0; __VA_ARGS__ } break;      \
    case 1: { constexpr int NAME = 1; __VA_ARGS__ } break;      \
    default: { constexpr int NAME = 2; __VA_ARGS__ } break;     \
  }

// x, delta (batch, d, H, W); A, R (d, n_pad); B, C (batch, H, W, n_pad); D (d,); form 0 (cbx), 1 (eq9), 2 (alg2)
Args2d make_args2d(const char* op, const at::Tensor& x, const at::Tensor& delta, const at::Tensor& A,
                   const at::Tensor& B, const at::Tensor& C, const c10::optional<at::Tensor>& D, const at::Tensor& R,
                   int64_t form) {
  ck::input(op, "x", x, 4, "(batch, d, H, W)");
  const auto dtype = x.scalar_type();
  Args2d s;
  s.batch = x.size(0);
  s.dim = x.size(1);
  s.H = x.size(2);
  s.W = x.size(3);
  s.np = ck::padded_states(op, A, s.dim);
  s.has_D = D.has_value();
  ck::like(op, "delta", delta, dtype, {s.batch, s.dim, s.H, s.W}, "(batch, d, H, W) like x");
  ck::like(op, "A", A, dtype, {s.dim, s.np}, "(d, n_pad)");
  ck::like(op, "B", B, dtype, {s.batch, s.H, s.W, s.np}, "(batch, H, W, n_pad)");
  ck::like(op, "C", C, dtype, {s.batch, s.H, s.W, s.np}, "(batch, H, W, n_pad)");
  if (D.has_value()) ck::like(op, "D", *D, dtype, {s.dim}, "(d,)");
  ck::like(op, "R", R, dtype, {s.dim, s.np}, "(d, n_pad)");
  TORCH_CHECK(form >= 0 && form <= 2, "neurodyn_scan.", op, ": form is ", form,
              ", expected 0 (cbx), 1 (eq9) or 2 (alg2)");
  return s;
}

}  // namespace

// x, dt (b, d, H, W); A, R (d, np); B, C (b, H, W, np); D (d,). Returns y and row states.
std::vector<at::Tensor> scan2d_fwd(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& A,
                                   const at::Tensor& B, const at::Tensor& C,
                                   const c10::optional<at::Tensor>& D, const at::Tensor& R,
                                   int64_t form, bool save_checkpoints) {
  const Args2d s = make_args2d("scan2d_fwd", x, delta, A, B, C, D, R, form);
  const int64_t nck = (s.H + ROWS - 1) / ROWS;
  at::Tensor out = at::empty_like(x);
  at::Tensor ckpt = save_checkpoints ? at::empty({s.batch, s.dim, nck, s.W, s.np}, x.options()) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "neurodyn_scan2d_fwd", [&] {
    const scalar_t* Dp = s.has_D ? D->data_ptr<scalar_t>() : nullptr;
    scalar_t* cp = save_checkpoints ? ckpt.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, s.batch * s.dim, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> hcol(s.W * s.np);
      for (int64_t i = begin; i < end; ++i) {
        NEURODYN_FORM_DISPATCH(form, FORM, NEURODYN_NP_DISPATCH(s.np, NP,
            fwd2d_row<scalar_t, NP, FORM>(s, i / s.dim, i % s.dim, x.data_ptr<scalar_t>(),
                delta.data_ptr<scalar_t>(), A.data_ptr<scalar_t>(), B.data_ptr<scalar_t>(),
                C.data_ptr<scalar_t>(), Dp, R.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), cp,
                hcol);))
      }
    });
  });
  return {out, ckpt};
}

std::vector<at::Tensor> scan2d_bwd(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& A,
                                   const at::Tensor& B, const at::Tensor& C,
                                   const c10::optional<at::Tensor>& D, const at::Tensor& R,
                                   int64_t form, const at::Tensor& ckpt, const at::Tensor& gout) {
  const char* op = "scan2d_bwd";
  const Args2d s = make_args2d(op, x, delta, A, B, C, D, R, form);
  ck::like(op, "ckpt", ckpt, x.scalar_type(), {s.batch, s.dim, (s.H + ROWS - 1) / ROWS, s.W, s.np},
           "(batch, d, row blocks, W, n_pad) as scan2d_fwd saved it");
  ck::like(op, "gout", gout, x.scalar_type(), {s.batch, s.dim, s.H, s.W}, "(batch, d, H, W) like x");
  auto dopt = x.options().dtype(at::kDouble);
  at::Tensor gx = at::empty_like(x), gdelta = at::empty_like(x);
  at::Tensor gA = at::empty({s.batch, s.dim, s.np}, dopt), gR = at::empty({s.batch, s.dim, s.np}, dopt);
  at::Tensor gD = at::empty({s.batch, s.dim}, dopt);
  at::Tensor gB = at::zeros_like(B), gC = at::zeros_like(C);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "neurodyn_scan2d_bwd", [&] {
    Grads2d<scalar_t> G{gx.data_ptr<scalar_t>(), gdelta.data_ptr<scalar_t>(), gA.data_ptr<double>(),
                        gD.data_ptr<double>(), gR.data_ptr<double>()};
    const scalar_t* Dp = s.has_D ? D->data_ptr<scalar_t>() : nullptr;
    std::mutex mu;
    at::parallel_for(0, s.batch * s.dim, 1, [&](int64_t begin, int64_t end) {
      const int64_t WN = s.W * s.np;
      std::vector<scalar_t> work(3 * ROWS * WN + 2 * WN + s.np);
      GroupAccum<scalar_t> accB, accC;  // B, C are shared by the channels of a batch element
      accB.buf.assign(s.H * WN, scalar_t(0)); accB.dst = gB.data_ptr<scalar_t>(); accB.mu = &mu;
      accC.buf.assign(s.H * WN, scalar_t(0)); accC.dst = gC.data_ptr<scalar_t>(); accC.mu = &mu;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / s.dim;
        scalar_t* gBp = accB.get(b);
        scalar_t* gCp = accC.get(b);
        NEURODYN_FORM_DISPATCH(form, FORM, NEURODYN_NP_DISPATCH(s.np, NP,
            bwd2d_row<scalar_t, NP, FORM>(s, G, b, i % s.dim, x.data_ptr<scalar_t>(),
                delta.data_ptr<scalar_t>(), A.data_ptr<scalar_t>(), B.data_ptr<scalar_t>(),
                C.data_ptr<scalar_t>(), Dp, R.data_ptr<scalar_t>(), ckpt.data_ptr<scalar_t>(),
                gout.data_ptr<scalar_t>(), gBp, gCp, work);))
      }
      accB.flush();
      accC.flush();
    });
  });
  return {gx, gdelta, gA, gB, gC, gD, gR};
}

// exposes fast_exp_em1 (which = 0: exp, 1: expm1) and zoh_psi (which = 2, of x >= 0) for the tests
at::Tensor zoh_test(const at::Tensor& x, int64_t which) {
  ck::input("zoh_test", "x", x, -1, "float32 or float64");
  TORCH_CHECK(which >= 0 && which <= 2, "neurodyn_scan.zoh_test: which is ", which,
              ", expected 0 (exp), 1 (expm1) or 2 (psi)");
  at::Tensor y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "neurodyn_zoh_test", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      scalar_t e, m;
      fast_exp_em1(which == 2 ? -xp[i] : xp[i], e, m);
      yp[i] = which == 0 ? e : (which == 1 ? m : zoh_psi(xp[i], e, m));
    }
  });
  return y;
}

at::Tensor exp_test(const at::Tensor& x) {  // exposes fast_exp for the accuracy test
  ck::input("exp_test", "x", x, -1, "float32 or float64");
  at::Tensor y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "neurodyn_exp_test", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = fast_exp(xp[i]);
  });
  return y;
}

int64_t chunk_size() { return CHUNK; }

// Registered as torch.ops.neurodyn_scan.* (no pybind11 needed).
TORCH_LIBRARY(neurodyn_scan, m) {
  m.def("selective_scan_fwd", &selective_scan_fwd);
  m.def("selective_scan_bwd", &selective_scan_bwd);
  m.def("linear_scan", &linear_scan);
  m.def("scan2d_fwd", &scan2d_fwd);
  m.def("scan2d_bwd", &scan2d_bwd);
  m.def("exp_test", &exp_test);
  m.def("zoh_test", &zoh_test);
  m.def("chunk_size", &chunk_size);
}
