// Branch-free exp / expm1 for the fused CPU kernels (included by selective_scan_cpu.cpp and ncp_cpu.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace neurodyn_math {

// exp without libm calls so that the N-loop vectorises: Cody-Waite reduction x = k ln2 + r,
// |r| <= ln2/2, Taylor polynomial (float: degree 7, double: degree 13, both below 1 ulp of
// truncation error), 2^k assembled in the exponent bits. Rounding to the nearest k uses the
// 1.5 * 2^mantissa_bits trick, which is exact without -ffast-math.
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float magic = 12582912.0f;  // 1.5 * 2^23
  float kf = x * 1.44269504088896341f + magic;
  int32_t kbits;
  std::memcpy(&kbits, &kf, sizeof(kbits));
  kf -= magic;
  float r = x - kf * 0.693359375f;
  r = r + kf * 2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t ebits = (kbits + 127) << 23;
  float scale;
  std::memcpy(&scale, &ebits, sizeof(scale));
  return p * scale;
}

inline double fast_exp(double x) {
  x = std::min(std::max(x, -708.0), 709.0);
  const double magic = 6755399441055744.0;  // 1.5 * 2^52
  double kf = x * 1.44269504088896340736 + magic;
  int64_t kbits;
  std::memcpy(&kbits, &kf, sizeof(kbits));
  kf -= magic;
  double r = x - kf * 6.93147180369123816490e-01;
  r = r - kf * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int64_t ebits = (kbits + 1023) << 52;
  double scale;
  std::memcpy(&scale, &ebits, sizeof(scale));
  return p * scale;
}

// exp(y) and expm1(y) together (the ZOH input factor needs 1 - exp(-x) without cancellation):
// with y = k ln2 + r and e^r = 1 + r q(r), expm1(y) = 2^k (r q) + (2^k - 1), exact in its leading
// term for |y| < ln2 / 2 (k = 0) and without harmful cancellation elsewhere.
inline void fast_exp_em1(float y, float& e, float& m) {
  y = std::min(std::max(y, -87.0f), 88.0f);
  const float magic = 12582912.0f;
  float kf = y * 1.44269504088896341f + magic;
  int32_t kbits;
  std::memcpy(&kbits, &kf, sizeof(kbits));
  kf -= magic;
  float r = y - kf * 0.693359375f;
  r = r + kf * 2.12194440e-4f;
  float q = 1.0f / 5040.0f;
  q = q * r + 1.0f / 720.0f;
  q = q * r + 1.0f / 120.0f;
  q = q * r + 1.0f / 24.0f;
  q = q * r + 1.0f / 6.0f;
  q = q * r + 0.5f;
  q = q * r + 1.0f;
  const float rq = r * q;
  int32_t ebits = (kbits + 127) << 23;
  float scale;
  std::memcpy(&scale, &ebits, sizeof(scale));
  e = scale + scale * rq;
  m = scale * rq + (scale - 1.0f);
}

inline void fast_exp_em1(double y, double& e, double& m) {
  y = std::min(std::max(y, -708.0), 709.0);
  const double magic = 6755399441055744.0;
  double kf = y * 1.44269504088896340736 + magic;
  int64_t kbits;
  std::memcpy(&kbits, &kf, sizeof(kbits));
  kf -= magic;
  double r = y - kf * 6.93147180369123816490e-01;
  r = r - kf * 1.90821492927058770002e-10;
  double q = 1.0 / 6227020800.0;
  q = q * r + 1.0 / 479001600.0;
  q = q * r + 1.0 / 39916800.0;
  q = q * r + 1.0 / 3628800.0;
  q = q * r + 1.0 / 362880.0;
  q = q * r + 1.0 / 40320.0;
  q = q * r + 1.0 / 5040.0;
  q = q * r + 1.0 / 720.0;
  q = q * r + 1.0 / 120.0;
  q = q * r + 1.0 / 24.0;
  q = q * r + 1.0 / 6.0;
  q = q * r + 0.5;
  q = q * r + 1.0;
  const double rq = r * q;
  int64_t ebits = (kbits + 1023) << 52;
  double scale;
  std::memcpy(&scale, &ebits, sizeof(scale));
  e = scale + scale * rq;
  m = scale * rq + (scale - 1.0);
}

}  // namespace neurodyn_math
