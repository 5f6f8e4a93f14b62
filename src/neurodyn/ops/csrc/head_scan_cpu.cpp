// Fused CPU kernel for the multi-head selective scan with one decay per head (ops/head_scan.py).
//
// Per batch element b, scan set s (a scan direction), head h with P channels p and N states n:
//   a_t = exp(dt_t A_h),  h_t[p, n] = a_t h_{t-1}[p, n] + dt_t B_t[n] u_t[p],  y_t[p] = sum_n C_t[n] h_t[p, n] + D[p] u_t[p]
// (dt, B, C shared by the head's channels, B and C by the heads of a group). The vector lane is the channel:
// one task is W = 64 bytes of channels (16 float / 8 double) of one head, its state an N-array of W-lane vectors,
// so the state update and the output sum over n are plain multiply-adds (no horizontal sums) and one scalar exp
// per step serves W x N state elements. Layouts are time-major, as the model holds them (no transposes):
//   u, y, gu: (batch, sets, L, heads * P)      dt, gdt: (batch, sets, L, heads)
//   B, C:     (batch, sets, L, groups, N)      A: (sets, heads)   D: (sets, heads * P)
// The forward stores the state every HCHUNK steps; the backward replays a chunk from its checkpoint and runs the
// adjoint lam_t = C_t gy_t + a_{t+1} lam_{t+1} backwards. Its B / C gradients are sums over the channels (the
// lanes): N vectors are reduced at once by a transpose-and-add tree (fold_tree). Per-task partial gradients
// (B, C, dt, A, D) are written to separate slots and summed over tasks by the caller.

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "checks.h"
#include "fast_math.h"

namespace {

namespace ck = neurodyn_check;
using neurodyn_math::fast_exp;

constexpr int64_t HCHUNK = 32;

template <typename T> struct HLanes;
template <> struct HLanes<float> {
  static constexpr int W = 16;
  using I = int32_t;
  typedef float type __attribute__((vector_size(64)));
  typedef int32_t itype __attribute__((vector_size(64)));
};
template <> struct HLanes<double> {
  static constexpr int W = 8;
  using I = int64_t;
  typedef double type __attribute__((vector_size(64)));
  typedef int64_t itype __attribute__((vector_size(64)));
};
template <typename T> using HV = typename HLanes<T>::type;
template <typename T> using HM = typename HLanes<T>::itype;

template <typename T> inline HV<T> vload(const T* p) { HV<T> v; std::memcpy(&v, p, sizeof(v)); return v; }
template <typename T> inline void vstore(T* p, const HV<T>& v) { std::memcpy(p, &v, sizeof(v)); }
template <typename T> inline HV<T> vzero() { return HV<T>{}; }

// Shuffle masks of one fold level with block size S: even blocks take x's two halves, odd blocks y's.
template <typename T, int S, bool HI>
struct FoldMask {
  static constexpr int W = HLanes<T>::W;
  using I = typename HLanes<T>::I;
  static constexpr std::array<I, W> make() {
    std::array<I, W> m{};
    for (int i = 0; i < W; ++i) {
      const bool odd = (i / S) % 2 == 1;
      m[i] = static_cast<I>(HI ? (odd ? W + i : i + S) : (odd ? W + i - S : i));
    }
    return m;
  }
  static constexpr std::array<I, W> value = make();
};

// Lane rotation by S (lane i takes lane i + S mod W), for the horizontal sum of one vector.
template <typename T, int S>
struct RotMask {
  static constexpr int W = HLanes<T>::W;
  using I = typename HLanes<T>::I;
  static constexpr std::array<I, W> make() {
    std::array<I, W> m{};
    for (int i = 0; i < W; ++i) m[i] = static_cast<I>((i + S) % W);
    return m;
  }
  static constexpr std::array<I, W> value = make();
};

// Sum of the lanes of v: log2 W rotate-and-add steps (a loop of scalar adds is one W-long dependency chain).
template <typename T, int S = HLanes<T>::W / 2>
inline T vsum(HV<T> v) {
  HM<T> m;
  std::memcpy(&m, RotMask<T, S>::value.data(), sizeof(m));
  v += __builtin_shuffle(v, m);
  if constexpr (S > 1) {
    return vsum<T, S / 2>(v);
  } else {
    return v[0];
  }
}

template <typename T, int S>
inline HV<T> fold(const HV<T>& x, const HV<T>& y) {
  HM<T> lo, hi;
  std::memcpy(&lo, FoldMask<T, S, false>::value.data(), sizeof(lo));
  std::memcpy(&hi, FoldMask<T, S, true>::value.data(), sizeof(hi));
  return __builtin_shuffle(x, y, lo) + __builtin_shuffle(x, y, hi);
}

// v[0 .. W) -> v[0]: lane j of the result is the lane sum of the original v[j]. Level S folds neighbours (v[2i],
// v[2i+1]) with block size S, from S = 1 up to W / 2; after level S every 2S-lane block holds partial sums of 2S
// consecutive vectors. Starting at S = 1 keeps the wide levels (most folds) inside 128-bit lanes, where the
// shuffles are cheap; only the last log2(W / 4) levels, with few folds, cross them.
template <typename T, int S = 1>
inline void fold_tree(HV<T>* v) {
  constexpr int W = HLanes<T>::W;
#pragma GCC unroll 16
  for (int i = 0; i < W / (2 * S); ++i) v[i] = fold<T, S>(v[2 * i], v[2 * i + 1]);
  if constexpr (2 * S < W) fold_tree<T, 2 * S>(v);
}

// out[i] = scale * (sum of the lanes of v[i]), i < n; v is overwritten.
template <typename T>
inline void reduce_lanes(HV<T>* v, int64_t n, T scale, T* out) {
  constexpr int W = HLanes<T>::W;
  for (int64_t base = 0; base < n; base += W) {
    const int64_t m = std::min<int64_t>(W, n - base);
    HV<T> tmp[W];
    HV<T>* grp = v + base;
    if (m < W) {
      for (int i = 0; i < W; ++i) tmp[i] = i < m ? grp[i] : vzero<T>();
      grp = tmp;
    }
    fold_tree<T>(grp);
    if (m == W) {
      vstore(out + base, grp[0] * scale);
    } else {
      for (int j = 0; j < m; ++j) out[base + j] = scale * grp[0][j];
    }
  }
}

// N state vectors: a local array when N is compiled in (registers / stack), a heap vector otherwise.
template <typename T, int NS>
struct StateBuf {
  HV<T> local[NS > 0 ? NS : 1];
  std::vector<HV<T>> heap;
  explicit StateBuf(int64_t n) : heap(NS > 0 ? 0 : n) {}
  HV<T>* data() { return NS > 0 ? local : heap.data(); }
};

template <typename T>
struct HeadArgs {
  int64_t batch, sets, L, heads, P, groups, N, nblk;
  const T *u, *dt, *A, *B, *C, *D;
  // one task = (b, s, h, channel block); task = ((b * sets + s) * heads + h) * nblk + blk
  int64_t tasks() const { return batch * sets * heads * nblk; }
};

// The addresses a task reads, at step 0 (strides: u / y per step HP, dt per step heads, B / C per step G N).
template <typename T>
struct TaskView {
  int64_t bs, s, h, chan, HP, sBC;
  const T *u, *dt, *B, *C;
  T Ah;
  TaskView(const HeadArgs<T>& a, int64_t task) {
    const int64_t blk = task % a.nblk;
    h = (task / a.nblk) % a.heads;
    bs = task / (a.nblk * a.heads);
    s = bs % a.sets;
    HP = a.heads * a.P;
    chan = h * a.P + blk * HLanes<T>::W;
    sBC = a.groups * a.N;
    const int64_t g = h / (a.heads / a.groups);
    u = a.u + bs * a.L * HP + chan;
    dt = a.dt + bs * a.L * a.heads + h;
    B = a.B + bs * a.L * sBC + g * a.N;
    C = a.C + bs * a.L * sBC + g * a.N;
    Ah = a.A[s * a.heads + h];
  }
};

template <typename T, int NS>
void head_fwd_task(const HeadArgs<T>& a, int64_t task, T* y, T* ckpt) {
  constexpr int W = HLanes<T>::W;
  const int64_t N = NS > 0 ? NS : a.N;
  const TaskView<T> v(a, task);
  const HV<T> Dv = a.D ? vload(a.D + v.s * v.HP + v.chan) : vzero<T>();
  T* yo = y + v.bs * a.L * v.HP + v.chan;
  const int64_t nck = (a.L + HCHUNK - 1) / HCHUNK;
  T* ck = ckpt ? ckpt + task * nck * N * W : nullptr;
  StateBuf<T, NS> sb(N);
  HV<T>* hs = sb.data();
  for (int64_t n = 0; n < N; ++n) hs[n] = vzero<T>();
  for (int64_t t = 0; t < a.L; ++t) {
    const T d = v.dt[t * a.heads];
    const T at = fast_exp(d * v.Ah);
    const HV<T> uv = vload(v.u + t * v.HP);
    const HV<T> duv = uv * d;
    const T* Bt = v.B + t * v.sBC;
    const T* Ct = v.C + t * v.sBC;
    HV<T> acc[4] = {Dv * uv, vzero<T>(), vzero<T>(), vzero<T>()};  // 4 sums: the adds are not one chain
#pragma GCC unroll 32
    for (int64_t n = 0; n < N; ++n) {
      hs[n] = at * hs[n] + Bt[n] * duv;
      acc[n & 3] += Ct[n] * hs[n];
    }
    vstore(yo + t * v.HP, (acc[0] + acc[1]) + (acc[2] + acc[3]));
    if (ck && ((t + 1) % HCHUNK == 0 || t + 1 == a.L)) {
      T* dst = ck + (t / HCHUNK) * N * W;
      for (int64_t n = 0; n < N; ++n) vstore(dst + n * W, hs[n]);
    }
  }
}

template <typename T>
struct HeadGrads {
  T *gu, *gdt, *gB, *gC;  // gdt: (batch, sets, L, heads, nblk); gB, gC: (tasks, L, N)
  double *gA, *gD;        // (tasks,), (tasks, W)
};

template <typename T, int NS>
void head_bwd_task(const HeadArgs<T>& a, const HeadGrads<T>& g, int64_t task, const T* gout, const T* ckpt,
                   std::vector<HV<T>>& work, std::vector<T>& decay) {
  constexpr int W = HLanes<T>::W;
  const int64_t N = NS > 0 ? NS : a.N;
  const TaskView<T> v(a, task);
  const HV<T> Dv = a.D ? vload(a.D + v.s * v.HP + v.chan) : vzero<T>();
  const int64_t L = a.L, nck = (L + HCHUNK - 1) / HCHUNK;
  const T* go = gout + v.bs * L * v.HP + v.chan;
  T* gu = g.gu + v.bs * L * v.HP + v.chan;
  const int64_t blk = task % a.nblk;
  T* gdt = g.gdt + (v.bs * L * a.heads + v.h) * a.nblk + blk;  // step stride heads * nblk
  T* gB = g.gB + task * L * N;
  T* gC = g.gC + task * L * N;
  const T* ck = ckpt + task * nck * N * W;

  HV<T>* hbuf = work.data();  // (HCHUNK + 1) x N states of the chunk
  T* abuf = decay.data();
  StateBuf<T, NS> cb(N), hc(N), pBb(N), pCb(N);
  HV<T>* pB = pBb.data();  // lam_t[n] u_t (lane sums -> gB)
  HV<T>* pC = pCb.data();  // gy_t h_t[n]  (lane sums -> gC)
  HV<T>* carry = cb.data();  // a_{t+1} lam_{t+1}
  HV<T>* hcur = hc.data();
  for (int64_t n = 0; n < N; ++n) carry[n] = vzero<T>();
  double gA = 0.0;
  double gD[W] = {};

  for (int64_t c = nck - 1; c >= 0; --c) {
    const int64_t t0 = c * HCHUNK, t1 = std::min(L, t0 + HCHUNK);
    for (int64_t n = 0; n < N; ++n) hcur[n] = c == 0 ? vzero<T>() : vload(ck + ((c - 1) * N + n) * W);
    for (int64_t n = 0; n < N; ++n) hbuf[n] = hcur[n];
    for (int64_t t = t0; t < t1; ++t) {  // replay: h_t of the chunk and a_t
      const int64_t i = t - t0;
      const T d = v.dt[t * a.heads];
      const T at = fast_exp(d * v.Ah);
      abuf[i] = at;
      const HV<T> duv = vload(v.u + t * v.HP) * d;
      const T* Bt = v.B + t * v.sBC;
      HV<T>* hn = hbuf + (i + 1) * N;
#pragma GCC unroll 32
      for (int64_t n = 0; n < N; ++n) {
        hcur[n] = at * hcur[n] + Bt[n] * duv;
        hn[n] = hcur[n];
      }
    }
    T gA_chunk = 0;
    HV<T> gD_chunk = vzero<T>();
    for (int64_t t = t1 - 1; t >= t0; --t) {
      const int64_t i = t - t0;
      const T d = v.dt[t * a.heads];
      const T at = abuf[i];
      const HV<T> uv = vload(v.u + t * v.HP);
      const HV<T> gy = vload(go + t * v.HP);
      const T* Bt = v.B + t * v.sBC;
      const T* Ct = v.C + t * v.sBC;
      const HV<T>* hp = hbuf + i * N;
      const HV<T>* hn = hbuf + (i + 1) * N;
      // sums over n (two chains each): lam h_{t-1} (-> dL/da_t) and lam B (-> gu, gdt)
      HV<T> sh0 = vzero<T>(), sh1 = vzero<T>(), sb0 = vzero<T>(), sb1 = vzero<T>();
#pragma GCC unroll 32
      for (int64_t n = 0; n < N; ++n) {
        const HV<T> lam = carry[n] + Ct[n] * gy;  // dL/dh_t
        if (n & 1) {
          sh1 += lam * hp[n];
          sb1 += lam * Bt[n];
        } else {
          sh0 += lam * hp[n];
          sb0 += lam * Bt[n];
        }
        pB[n] = lam * uv;
        pC[n] = gy * hn[n];
        carry[n] = at * lam;
      }
      const HV<T> lb = sb0 + sb1;
      vstore(gu + t * v.HP, Dv * gy + lb * d);
      gD_chunk += gy * uv;
      const T q = vsum<T>(sh0 + sh1) * at;  // dL/d(dt_t A_h)
      gdt[t * a.heads * a.nblk] = q * v.Ah + vsum<T>(lb * uv);
      gA_chunk += q * d;
      reduce_lanes<T>(pB, N, d, gB + t * N);
      reduce_lanes<T>(pC, N, T(1), gC + t * N);
    }
    gA += gA_chunk;
    for (int j = 0; j < W; ++j) gD[j] += gD_chunk[j];
  }
  g.gA[task] = gA;
  for (int j = 0; j < W; ++j) g.gD[task * W + j] = gD[j];
}

#define NEURODYN_HEAD_N_DISPATCH(n, NAME, ...)               \
  switch (n) {                                               \
    case 8: { constexpr int NAME = 8; __VA_ARGS__ } break;   \
    case 16: { constexpr int NAME = 16; __VA_ARGS__ } break; \
    case 32: { constexpr int NAME = 32; __VA_ARGS__ } break; \
    case 64: { constexpr int NAME = 64; __VA_ARGS__ } break; \
    default: { constexpr int NAME = 0; __VA_ARGS__ } break;  \
  }

// u (b, S, L, H P) float / double; dt (b, S, L, H) with H dividing H P into P = a multiple of the lanes; A (S, H);
// B, C (b, S, L, G, N) with G dividing H; D (S, H P). Returns the sizes the kernel indexes.
template <typename T>
HeadArgs<T> check_head_inputs(const char* op, const at::Tensor& u, const at::Tensor& dt, const at::Tensor& A,
                              const at::Tensor& B, const at::Tensor& C, const c10::optional<at::Tensor>& D) {
  constexpr int64_t W = HLanes<T>::W;
  const auto dtype = u.scalar_type();
  HeadArgs<T> a;
  a.batch = u.size(0);
  a.sets = u.size(1);
  a.L = u.size(2);
  const int64_t HP = u.size(3);
  ck::rank(op, "dt", dt, 4, "(batch, S, L, H)");
  a.heads = dt.size(3);
  TORCH_CHECK(a.heads > 0 && HP % a.heads == 0 && (HP / a.heads) % W == 0, "neurodyn_scan.", op, ": dt has shape ",
              dt.sizes(), ", expected (batch, S, L, H) = [", a.batch, ", ", a.sets, ", ", a.L,
              ", H] with H dividing the ", HP, " channels of u into heads of a multiple of ", W, " channels (",
              dtype, ")");
  a.P = HP / a.heads;
  a.nblk = a.P / W;
  ck::like(op, "dt", dt, dtype, {a.batch, a.sets, a.L, a.heads}, "(batch, S, L, H)");
  ck::like(op, "A", A, dtype, {a.sets, a.heads}, "(S, H)");
  ck::rank(op, "B", B, 5, "(batch, S, L, G, N)");
  a.groups = B.size(3);
  a.N = B.size(4);
  TORCH_CHECK(a.groups > 0 && a.heads % a.groups == 0, "neurodyn_scan.", op, ": B has shape ", B.sizes(),
              ", expected (batch, S, L, G, N) = [", a.batch, ", ", a.sets, ", ", a.L, ", G, N] with G dividing the ",
              a.heads, " heads");
  ck::like(op, "B", B, dtype, {a.batch, a.sets, a.L, a.groups, a.N}, "(batch, S, L, G, N)");
  ck::like(op, "C", C, dtype, {a.batch, a.sets, a.L, a.groups, a.N}, "(batch, S, L, G, N) like B");
  if (D.has_value()) ck::like(op, "D", *D, dtype, {a.sets, HP}, "(S, H P)");
  a.u = u.data_ptr<T>();
  a.dt = dt.data_ptr<T>();
  a.A = A.data_ptr<T>();
  a.B = B.data_ptr<T>();
  a.C = C.data_ptr<T>();
  a.D = D.has_value() ? D->data_ptr<T>() : nullptr;
  return a;
}

}  // namespace

int64_t head_scan_lanes(bool is_double) {
  return is_double ? HLanes<double>::W : HLanes<float>::W;
}

std::vector<at::Tensor> head_scan_fwd(const at::Tensor& u, const at::Tensor& dt, const at::Tensor& A,
                                      const at::Tensor& B, const at::Tensor& C, const c10::optional<at::Tensor>& D,
                                      bool save_checkpoints) {
  ck::input("head_scan_fwd", "u", u, 4, "(batch, S, L, H P)");
  at::Tensor y = at::empty_like(u);
  at::Tensor ckpt;
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "neurodyn_head_scan_fwd", [&] {
    const HeadArgs<scalar_t> a = check_head_inputs<scalar_t>("head_scan_fwd", u, dt, A, B, C, D);
    const int64_t nck = (a.L + HCHUNK - 1) / HCHUNK;
    if (save_checkpoints) ckpt = at::empty({a.tasks(), nck, a.N, HLanes<scalar_t>::W}, u.options());
    scalar_t* yp = y.data_ptr<scalar_t>();
    scalar_t* cp = save_checkpoints ? ckpt.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, a.tasks(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        NEURODYN_HEAD_N_DISPATCH(a.N, NS, head_fwd_task<scalar_t, NS>(a, i, yp, cp);)
      }
    });
  });
  return {y, ckpt};
}

// Returns gu (like u), gdt (batch, sets, L, heads, nblk), gA (tasks,) double, gB / gC (tasks, L, N),
// gD (tasks, W) double: partial sums over tasks, reduced by the caller.
std::vector<at::Tensor> head_scan_bwd(const at::Tensor& u, const at::Tensor& dt, const at::Tensor& A,
                                      const at::Tensor& B, const at::Tensor& C, const c10::optional<at::Tensor>& D,
                                      const at::Tensor& ckpt, const at::Tensor& gout) {
  const char* op = "head_scan_bwd";
  ck::input(op, "u", u, 4, "(batch, S, L, H P)");
  ck::like(op, "gout", gout, u.scalar_type(), u.sizes(), "(batch, S, L, H P) like u");
  at::Tensor gu = at::empty_like(u);
  at::Tensor gdt, gA, gB, gC, gD;
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "neurodyn_head_scan_bwd", [&] {
    constexpr int W = HLanes<scalar_t>::W;
    const HeadArgs<scalar_t> a = check_head_inputs<scalar_t>(op, u, dt, A, B, C, D);
    const int64_t tasks = a.tasks();
    ck::like(op, "ckpt", ckpt, u.scalar_type(), {tasks, (a.L + HCHUNK - 1) / HCHUNK, a.N, W},
             "(tasks, chunks, N, lanes) as head_scan_fwd saved it");
    gdt = at::empty({a.batch, a.sets, a.L, a.heads, a.nblk}, u.options());
    gB = at::empty({tasks, a.L, a.N}, u.options());
    gC = at::empty({tasks, a.L, a.N}, u.options());
    auto dopt = u.options().dtype(at::kDouble);
    gA = at::empty({tasks}, dopt);
    gD = at::empty({tasks, W}, dopt);
    HeadGrads<scalar_t> g;
    g.gu = gu.data_ptr<scalar_t>();
    g.gdt = gdt.data_ptr<scalar_t>();
    g.gB = gB.data_ptr<scalar_t>();
    g.gC = gC.data_ptr<scalar_t>();
    g.gA = gA.data_ptr<double>();
    g.gD = gD.data_ptr<double>();
    const scalar_t* go = gout.data_ptr<scalar_t>();
    const scalar_t* cp = ckpt.data_ptr<scalar_t>();
    at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
      std::vector<HV<scalar_t>> work((HCHUNK + 1) * a.N);
      std::vector<scalar_t> decay(HCHUNK);
      for (int64_t i = begin; i < end; ++i) {
        NEURODYN_HEAD_N_DISPATCH(a.N, NS, head_bwd_task<scalar_t, NS>(a, g, i, go, cp, work, decay);)
      }
    });
  });
  return {gu, gdt, gA, gB, gC, gD};
}

TORCH_LIBRARY_FRAGMENT(neurodyn_scan, m) {
  m.def("head_scan_fwd", &head_scan_fwd);
  m.def("head_scan_bwd", &head_scan_bwd);
  m.def("head_scan_lanes", &head_scan_lanes);
}
