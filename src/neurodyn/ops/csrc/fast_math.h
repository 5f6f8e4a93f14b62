// Branch-free exp / expm1 for the fused CPU kernels (included by selective_scan_cpu.cpp and ncp_cpu.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace neurodyn_math {

// Cody-Waite reduction y = k ln2 + r, |r| <= ln2/2 (ln2 split in a high part exact in T and a low
// correction), a Taylor polynomial for e^r = 1 + r q(r) with q(r) = sum_j r^j / (j+1)!, j < TERMS (float: 7
// terms, double: 13, both below 1 ulp of truncation error), and 2^k assembled in the exponent bits. Rounding
// to the nearest k uses the 1.5 * 2^mantissa_bits trick, which is exact without -ffast-math. No libm call, so
// the state loops that call it vectorise.
template <typename T> struct ExpTraits;
template <> struct ExpTraits<float> {
  using Int = int32_t;
  static constexpr float lo = -87.0f, hi = 88.0f, magic = 12582912.0f;  // 1.5 * 2^23
  static constexpr float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  static constexpr int bias = 127, mantissa = 23, terms = 7;
};
template <> struct ExpTraits<double> {
  using Int = int64_t;
  static constexpr double lo = -708.0, hi = 709.0, magic = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr double log2e = 1.44269504088896340736, ln2_hi = 6.93147180369123816490e-01,
                          ln2_lo = 1.90821492927058770002e-10;
  static constexpr int bias = 1023, mantissa = 52, terms = 13;
};

constexpr double inv_factorial(int n) {
  double f = 1.0;
  for (int i = 2; i <= n; ++i) f *= i;
  return 1.0 / f;
}

// The reduction shared by fast_exp and fast_exp_em1: clamps y, returns r and 2^k.
template <typename T>
__attribute__((always_inline)) inline void reduce(T& y, T& r, T& scale) {
  using X = ExpTraits<T>;
  y = std::min(std::max(y, X::lo), X::hi);
  T kf = y * X::log2e + X::magic;
  typename X::Int kbits;
  std::memcpy(&kbits, &kf, sizeof(kbits));
  kf -= X::magic;
  r = (y - kf * X::ln2_hi) - kf * X::ln2_lo;
  const typename X::Int ebits = (kbits + X::bias) << X::mantissa;
  std::memcpy(&scale, &ebits, sizeof(scale));
}

// q(r) = sum_{j < TERMS} r^j / (j+1)!, by Horner's rule with compile-time coefficients
template <typename T, int J, int N>
__attribute__((always_inline)) inline T horner_from(T r) {  // sum_{j = J}^{N-1} r^(j-J) / (j+1)!
  constexpr T c = static_cast<T>(inv_factorial(J + 1));
  if constexpr (J == N - 1) {
    return c;
  } else {
    return horner_from<T, J + 1, N>(r) * r + c;
  }
}

template <typename T>
__attribute__((always_inline)) inline T taylor_q(T r) {
  return horner_from<T, 0, ExpTraits<T>::terms>(r);
}

template <typename T>
__attribute__((always_inline)) inline T fast_exp(T x) {
  T r, scale;
  reduce(x, r, scale);
  return (taylor_q(r) * r + T(1)) * scale;  // (1 + r q(r)) 2^k
}

// exp(y) and expm1(y) together (the ZOH input factor needs 1 - exp(-x) without cancellation): with
// e^r = 1 + r q, expm1(y) = 2^k (r q) + (2^k - 1), exact in its leading term for |y| < ln2 / 2 (k = 0) and
// without harmful cancellation elsewhere.
template <typename T>
__attribute__((always_inline)) inline void fast_exp_em1(T y, T& e, T& m) {
  T r, scale;
  reduce(y, r, scale);
  const T rq = r * taylor_q(r);
  e = scale + scale * rq;
  m = scale * rq + (scale - T(1));
}

}  // namespace neurodyn_math
