// Fused CPU forward / backward of a pruned NCP backbone (neurodyn/nn/ncp.py, NCPCell.forward), 16 rows (NAC
// query-key pairs) at a time, so the per-layer activations of a tile stay in registers and L1 instead of
// passing through memory once per elementwise op and once per small matmul.
//
// For C cells (independent weight sets), M rows per cell, input x (C, M, a) and layers l = 0..Ly-1 of
// widths h_l (the neurons an Algorithm-1 update computes):
//   s_0 = act(x W_in_0 + b_0) * mask_0,     s_l = act(x W_in_l + b_l + s_{l-1} W_rec_l) * mask_l  (l >= 1)
// with W_in_l (C, a, h_l) (an empty tensor: no input term, e.g. NCP command and motor neurons, which have no
// input synapses), b_l (C, h_l), W_rec_l (C, h_{l-1}, h_l), mask_l (h_l,) in {0, 1} and act in {linear, tanh,
// relu, sigmoid} (codes 0-3). The forward returns every s_l in the tile layout (C, tiles, h_l, R) (the
// backward's saved activations) and s_{Ly-1} as (C, M, h); the backward runs the layers in reverse with
//   gp_l = g_l * mask_l * act'(s_l),   g_{l-1} = gp_l W_rec_l^T,   gx += gp_l W_in_l^T,
// and accumulates the weight gradients per thread and lane (one small copy of every weight), then sums.
// Optional synapse patterns (pat_in[l] (a, h_l), pat_rec[l] (h_{l-1}, h_l), shared by the cells) restrict every
// sum to the wiring's synapses (struct Synapses): weights outside them are not read and get no gradient.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "checks.h"
#include "fast_math.h"

namespace {

namespace ck = neurodyn_check;

// "name[l]", the argument name of a list entry in the messages
inline std::string item(const char* name, int64_t l) { return std::string(name) + "[" + std::to_string(l) + "]"; }

enum Act : int64_t { LINEAR = 0, TANH = 1, RELU = 2, SIGMOID = 3 };

template <typename T, int ACT>
inline T activate(T x) {
  if constexpr (ACT == TANH) {  // tanh(x) = expm1(2x) / (expm1(2x) + 2): no cancellation near 0
    T e, m;
    neurodyn_math::fast_exp_em1(2 * x, e, m);
    return m / (m + 2);
  } else if constexpr (ACT == RELU) {
    return x > 0 ? x : T(0);
  } else if constexpr (ACT == SIGMOID) {
    return T(1) / (T(1) + neurodyn_math::fast_exp(-x));
  } else {
    return x;
  }
}

// d act / d pre, from the activation's output s
template <typename T, int ACT>
inline T activate_grad(T s) {
  if constexpr (ACT == TANH) {
    return T(1) - s * s;
  } else if constexpr (ACT == RELU) {
    return s > 0 ? T(1) : T(0);
  } else if constexpr (ACT == SIGMOID) {
    return s * (T(1) - s);
  } else {
    return T(1);
  }
}

// calls f.template operator()<ACT>() with the activation code as a compile-time constant
template <typename F>
void with_act(int64_t act, F&& f) {
  switch (act) {
    case TANH: f(std::integral_constant<int, TANH>{}); break;
    case RELU: f(std::integral_constant<int, RELU>{}); break;
    case SIGMOID: f(std::integral_constant<int, SIGMOID>{}); break;
    default: f(std::integral_constant<int, LINEAR>{}); break;
  }
}

struct Shapes {
  int64_t C, M, a, layers, tiles;
  std::vector<int64_t> h;      // widths
  std::vector<bool> has_in;    // layer l has an input term
  bool affine = false;         // the layers read x * in_scale + in_shift
  int64_t head = 0;            // outputs of the linear head x W_head + b_head (0: none)
};

// Rows are processed in tiles of R with the row as the vector lane, so that every operation is a vertical
// multiply-add over R rows (no horizontal sums). The tiles are GCC / Clang vector types: left to itself the
// compiler vectorised these loops across the wrong index, with a shuffle per multiply-add (5x slower).
constexpr int64_t R = 16;

template <typename T> struct Lanes;
template <> struct Lanes<float> { typedef float type __attribute__((vector_size(R * sizeof(float)))); };
template <> struct Lanes<double> { typedef double type __attribute__((vector_size(R * sizeof(double)))); };
template <typename T> using V = typename Lanes<T>::type;

// x (C, M, a) float / double; per layer l: w_in[l] empty or (C, a, h_l), bias[l] (C, h_l) (defines h_l),
// w_rec[l] (C, h_{l-1}, h_l) for l >= 1 (w_rec[0] is not read), mask[l] (h_l,); act 0-3.
Shapes check(const char* op, const at::Tensor& x, const std::vector<at::Tensor>& w_in,
             const std::vector<at::Tensor>& bias, const std::vector<at::Tensor>& w_rec,
             const std::vector<at::Tensor>& mask, int64_t act) {
  ck::input(op, "x", x, 3, "(C, M, a)");
  TORCH_CHECK(act >= 0 && act <= 3, "neurodyn_scan.", op, ": act is ", act,
              ", expected 0 (linear), 1 (tanh), 2 (relu) or 3 (sigmoid)");
  Shapes s{x.size(0), x.size(1), x.size(2), static_cast<int64_t>(w_in.size()), (x.size(1) + R - 1) / R, {}, {}};
  TORCH_CHECK(s.layers >= 1 && bias.size() == w_in.size() && w_rec.size() == w_in.size() &&
                  mask.size() == w_in.size(), "neurodyn_scan.", op, ": w_in, bias, w_rec and mask have ",
              w_in.size(), ", ", bias.size(), ", ", w_rec.size(), " and ", mask.size(),
              " entries, expected one per layer (at least one)");
  const auto dtype = x.scalar_type();
  for (int64_t l = 0; l < s.layers; ++l) {
    ck::rank(op, item("bias", l), bias[l], 2, "(C, h)");
    const int64_t h = bias[l].size(1);
    ck::like(op, item("bias", l), bias[l], dtype, {s.C, h}, "(C, h)");
    const auto& w = w_in[l];
    s.has_in.push_back(w.numel() > 0);
    if (w.numel() > 0) ck::like(op, item("w_in", l), w, dtype, {s.C, s.a, h}, "(C, a, h) or empty");
    ck::like(op, item("mask", l), mask[l], dtype, {h}, "(h,)");
    if (l > 0) ck::like(op, item("w_rec", l), w_rec[l], dtype, {s.C, s.h.back(), h}, "(C, h_prev, h)");
    s.h.push_back(h);
  }
  return s;
}

// io = {in_scale (C, a), in_shift (C, a), head_w (C, a, o), head_b (C, o)}, each empty when unused (the scale and
// shift come together, and so do the head's weight and bias).
void check_io(const char* op, Shapes& s, const at::Tensor& x, const std::vector<at::Tensor>& io) {
  TORCH_CHECK(io.size() == 4, "neurodyn_scan.", op, ": io has ", io.size(),
              " entries, expected 4 (in_scale, in_shift, head_w, head_b; empty when unused)");
  const auto dtype = x.scalar_type();
  s.affine = io[0].numel() > 0;
  if (s.affine) {
    ck::like(op, "in_scale", io[0], dtype, {s.C, s.a}, "(C, a)");
    ck::like(op, "in_shift", io[1], dtype, {s.C, s.a}, "(C, a)");
  }
  s.head = io[2].numel() > 0 ? io[2].size(-1) : 0;
  if (s.head) {
    ck::like(op, "head_w", io[2], dtype, {s.C, s.a, s.head}, "(C, a, o)");
    ck::like(op, "head_b", io[3], dtype, {s.C, s.head}, "(C, o)");
  }
}

// The head's weights and the input affine of one cell (nullptr when unused).
template <typename T>
struct IO {
  const T *scale = nullptr, *shift = nullptr, *hw = nullptr, *hb = nullptr;
  IO(const Shapes& sh, const std::vector<at::Tensor>& io) {
    if (sh.affine) { scale = io[0].data_ptr<T>(); shift = io[1].data_ptr<T>(); }
    if (sh.head) { hw = io[2].data_ptr<T>(); hb = io[3].data_ptr<T>(); }
  }
};

// x_eff = x * scale + shift, in place on a tile of cell c
template <typename T>
inline void affine_tile(const Shapes& sh, const IO<T>& io, int64_t c, const V<T>* xr, V<T>* xt) {
  for (int64_t i = 0; i < sh.a; ++i)
    xt[i] = sh.affine ? xr[i] * io.scale[c * sh.a + i] + io.shift[c * sh.a + i] : xr[i];
}

// The synapses of one weight block (rows = sources i, columns = targets j) as lists per target: src[ptr[j] ..
// ptr[j + 1]) are the sources i of target j. Built from a {0, 1} pattern (h_src, h) shared by the cells, or dense
// (every (i, j)) without one. NCP wiring keeps a third of the synapses, so the loops over these lists do a third
// of the dense multiply-adds; weights outside the pattern are never read and get no gradient.
// The backward walks them per source instead: dst[sptr[i] .. sptr[i + 1]) are the targets j of source i (so the
// source's input gradient is summed in a register), and accumulates the weight gradient of synapse e (in that
// order) in slot e of a compact buffer, read in sequence; flat[e] = i * cols + j places it in the (rows, cols)
// weight afterwards. (Accumulating into the dense (rows, cols) layout scattered the read-modify-writes over
// four times the memory: half of the backward's time.)
struct Synapses {
  std::vector<int64_t> ptr, src, sptr, dst, flat;
  // pattern: checked by Wiring (empty: dense)
  Synapses(const at::Tensor& pattern, int64_t rows, int64_t cols) : ptr(cols + 1, 0), sptr(rows + 1, 0) {
    at::Tensor p = pattern.numel() ? pattern.to(at::kFloat).contiguous() : at::Tensor();
    const float* pp = p.defined() ? p.data_ptr<float>() : nullptr;
    auto on = [&](int64_t i, int64_t j) { return !pp || pp[i * cols + j] != 0.0f; };
    for (int64_t j = 0; j < cols; ++j) {
      for (int64_t i = 0; i < rows; ++i)
        if (on(i, j)) src.push_back(i);
      ptr[j + 1] = static_cast<int64_t>(src.size());
    }
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j)
        if (on(i, j)) {
          dst.push_back(j);
          flat.push_back(i * cols + j);
        }
      sptr[i + 1] = static_cast<int64_t>(dst.size());
    }
  }
  int64_t count() const { return static_cast<int64_t>(dst.size()); }
};

// per layer: input synapses (a, h_l) and recurrent synapses (h_{l-1}, h_l)
struct Wiring {
  std::vector<Synapses> in, rec;
  // pat_in[l] (a, h_l) and pat_rec[l] (h_{l-1}, h_l), any dtype (read as {0, 1}); empty entries or lists: dense
  Wiring(const char* op, const Shapes& sh, const std::vector<at::Tensor>& pat_in,
         const std::vector<at::Tensor>& pat_rec) {
    for (const auto* pats : {&pat_in, &pat_rec})
      TORCH_CHECK(pats->empty() || static_cast<int64_t>(pats->size()) == sh.layers, "neurodyn_scan.", op, ": ",
                  pats == &pat_in ? "pat_in" : "pat_rec", " has ", pats->size(), " entries, expected one per layer (",
                  sh.layers, ") or none");
    const at::Tensor dense = at::empty({0});
    for (int64_t l = 0; l < sh.layers; ++l) {
      const at::Tensor& pi = sh.has_in[l] && !pat_in.empty() ? pat_in[l] : dense;
      const at::Tensor& pr = l > 0 && !pat_rec.empty() ? pat_rec[l] : dense;
      if (pi.numel()) check_pattern(op, item("pat_in", l), pi, sh.a, sh.h[l], "(a, h)");
      if (pr.numel()) check_pattern(op, item("pat_rec", l), pr, sh.h[l - 1], sh.h[l], "(h_prev, h)");
      in.emplace_back(pi, sh.a, sh.h[l]);
      rec.emplace_back(pr, l > 0 ? sh.h[l - 1] : 0, sh.h[l]);
    }
  }
  static void check_pattern(const char* op, const std::string& arg, const at::Tensor& p, int64_t rows,
                            int64_t cols, const char* layout) {
    ck::rank(op, arg, p, 2, layout);
    TORCH_CHECK(p.size(0) == rows && p.size(1) == cols, "neurodyn_scan.", op, ": ", arg, " has shape ", p.sizes(),
                ", but a synapse pattern must be ", layout, " = [", rows, ", ", cols, "]");
  }
};

template <typename T>
inline const T* ptr_or_null(const at::Tensor& t) {
  return t.numel() ? t.data_ptr<T>() : nullptr;
}

// rows r0 .. r0 + n - 1 of a row-major (rows, width) block -> width lane vectors, zero past n
template <typename T>
inline void load_tile(const T* src, int64_t width, int64_t n, V<T>* tile) {
  T* t = reinterpret_cast<T*>(tile);  // vector types may alias their element type
  if (n < R) std::fill(t, t + width * R, T(0));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < width; ++i) t[i * R + r] = src[r * width + i];
  }
}

template <typename T>
inline void store_tile(const V<T>* tile, int64_t width, int64_t n, T* dst) {
  const T* t = reinterpret_cast<const T*>(tile);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < width; ++i) dst[r * width + i] = t[i * R + r];
  }
}

template <typename T, int ACT>
inline V<T> activate_lanes(V<T> v) {
  if constexpr (ACT == LINEAR) {
    return v;
  } else {
    T t[R];
    std::memcpy(t, &v, sizeof(v));
#pragma omp simd
    for (int64_t r = 0; r < R; ++r) t[r] = activate<T, ACT>(t[r]);
    std::memcpy(&v, t, sizeof(v));
    return v;
  }
}

// one tile through layer l: o[j] = act(b[j] + sum_i w_in[i][j] x[i] + sum_k w_rec[k][j] prev[k]) mask[j], the
// sums over the synapses of j
template <typename T, int ACT>
inline void layer_forward(int64_t h, const V<T>* xt, const V<T>* prev, const T* wi, const Synapses& si,
                          const T* bl, const T* wr, const Synapses& sr, const T* ml, V<T>* o) {
  for (int64_t j = 0; j < h; ++j) {
    V<T> acc = V<T>{} + bl[j];
    if (wi) {
      for (int64_t e = si.ptr[j]; e < si.ptr[j + 1]; ++e) acc += wi[si.src[e] * h + j] * xt[si.src[e]];
    }
    if (prev) {
      for (int64_t e = sr.ptr[j]; e < sr.ptr[j + 1]; ++e) acc += wr[sr.src[e] * h + j] * prev[sr.src[e]];
    }
    o[j] = activate_lanes<T, ACT>(acc) * ml[j];
  }
}

template <typename T, int ACT>
void forward_tiles(const Shapes& sh, const Wiring& wg, const IO<T>& io, const T* x, const std::vector<const T*>& w_in,
                   const std::vector<const T*>& b, const std::vector<const T*>& w_rec,
                   const std::vector<const T*>& mask, const std::vector<T*>& saved, T* y, T* head_out, int64_t t0,
                   int64_t t1) {
  std::vector<V<T>> xr(sh.a), xt(sh.a), ht(sh.head);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t c = t / sh.tiles, m0 = (t % sh.tiles) * R, n = std::min(R, sh.M - m0);
    load_tile(x + (c * sh.M + m0) * sh.a, sh.a, n, xr.data());
    if (sh.head) {  // the linear head reads the raw input
      const T* hw = io.hw + c * sh.a * sh.head;
      for (int64_t o = 0; o < sh.head; ++o) {
        V<T> acc = V<T>{} + io.hb[c * sh.head + o];
        for (int64_t i = 0; i < sh.a; ++i) acc += hw[i * sh.head + o] * xr[i];
        ht[o] = acc;
      }
      store_tile(ht.data(), sh.head, n, head_out + (c * sh.M + m0) * sh.head);
    }
    affine_tile(sh, io, c, xr.data(), xt.data());
    const V<T>* prev = nullptr;
    for (int64_t l = 0; l < sh.layers; ++l) {
      const int64_t h = sh.h[l], hp = l > 0 ? sh.h[l - 1] : 0;
      V<T>* cur = reinterpret_cast<V<T>*>(saved[l]) + t * h;
      layer_forward<T, ACT>(h, xt.data(), prev, w_in[l] ? w_in[l] + c * sh.a * h : nullptr, wg.in[l], b[l] + c * h,
                            l > 0 ? w_rec[l] + c * hp * h : nullptr, wg.rec[l], mask[l], cur);
      prev = cur;
    }
    const int64_t hl = sh.h.back();
    store_tile(prev, hl, n, y + (c * sh.M + m0) * hl);
  }
}

// returns [saved activations per layer (C, tiles, h_l, R), y (C, M, h_last), head output (C, M, o) or empty]
std::vector<at::Tensor> ncp_mlp_fwd(const at::Tensor& x, std::vector<at::Tensor> w_in, std::vector<at::Tensor> bias,
                                    std::vector<at::Tensor> w_rec, std::vector<at::Tensor> mask, int64_t act,
                                    std::vector<at::Tensor> pat_in, std::vector<at::Tensor> pat_rec,
                                    std::vector<at::Tensor> io) {
  const char* op = "ncp_mlp_fwd";
  Shapes sh = check(op, x, w_in, bias, w_rec, mask, act);
  check_io(op, sh, x, io);
  const Wiring wg(op, sh, pat_in, pat_rec);
  std::vector<at::Tensor> outs;
  for (int64_t l = 0; l < sh.layers; ++l) outs.push_back(at::empty({sh.C, sh.tiles, sh.h[l], R}, x.options()));
  outs.push_back(at::empty({sh.C, sh.M, sh.h.back()}, x.options()));
  outs.push_back(sh.head ? at::empty({sh.C, sh.M, sh.head}, x.options()) : at::empty({0}, x.options()));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ncp_mlp_fwd", [&] {
    std::vector<const scalar_t*> wi, b, wr, m;
    std::vector<scalar_t*> o;
    for (int64_t l = 0; l < sh.layers; ++l) {
      wi.push_back(ptr_or_null<scalar_t>(w_in[l]));
      b.push_back(bias[l].data_ptr<scalar_t>());
      wr.push_back(l > 0 ? w_rec[l].data_ptr<scalar_t>() : nullptr);
      m.push_back(mask[l].data_ptr<scalar_t>());
      o.push_back(outs[l].data_ptr<scalar_t>());
    }
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = outs[sh.layers].data_ptr<scalar_t>();
    scalar_t* hp = sh.head ? outs.back().data_ptr<scalar_t>() : nullptr;
    const IO<scalar_t> iop(sh, io);
    with_act(act, [&](auto A) {
      at::parallel_for(0, sh.C * sh.tiles, 16, [&](int64_t t0, int64_t t1) {
        forward_tiles<scalar_t, decltype(A)::value>(sh, wg, iop, xp, wi, b, wr, m, o, yp, hp, t0, t1);
      });
    });
  });
  return outs;
}

// offsets (in lane vectors) of one cell's weight gradients inside a per-thread accumulator:
// [layer 0: g_w_in (its synapses, if any), g_b (h_0)] [layer 1: g_w_in, g_b, g_w_rec (its synapses)] ...
struct GradLayout {
  std::vector<int64_t> w_in, b, w_rec;
  int64_t per_cell = 0, scale = 0, shift = 0, hw = 0, hb = 0;  // then [in_scale, in_shift (a each), head_w, head_b]
  GradLayout(const Shapes& sh, const Wiring& wg) {  // weight gradients: one slot per synapse (Synapses::flat)
    for (int64_t l = 0; l < sh.layers; ++l) {
      w_in.push_back(per_cell);
      per_cell += sh.has_in[l] ? wg.in[l].count() : 0;
      b.push_back(per_cell);
      per_cell += sh.h[l];
      w_rec.push_back(per_cell);
      per_cell += l > 0 ? wg.rec[l].count() : 0;
    }
    scale = per_cell;
    shift = scale + (sh.affine ? sh.a : 0);
    hw = shift + (sh.affine ? sh.a : 0);
    hb = hw + sh.a * sh.head;
    per_cell = hb + sh.head;
  }
};

template <typename T, int ACT>
void backward_tiles(const Shapes& sh, const Wiring& wg, const GradLayout& gl, const IO<T>& io, const T* x,
                    const std::vector<const T*>& w_in, const std::vector<const T*>& w_rec,
                    const std::vector<const T*>& mask, const std::vector<const T*>& saved, const T* gout,
                    const T* ghead, T* gx, T* acc, int64_t t0, int64_t t1) {
  int64_t hmax = 0;
  for (int64_t h : sh.h) hmax = std::max(hmax, h);
  std::vector<V<T>> xr(sh.a), xt(sh.a), gxt(sh.a), g(hmax), gp(hmax), gh(sh.head);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t c = t / sh.tiles, m0 = (t % sh.tiles) * R, n = std::min(R, sh.M - m0), row0 = c * sh.M + m0;
    load_tile(x + row0 * sh.a, sh.a, n, xr.data());
    affine_tile(sh, io, c, xr.data(), xt.data());
    std::fill(gxt.begin(), gxt.end(), V<T>{});
    V<T>* cell_acc = reinterpret_cast<V<T>*>(acc) + c * gl.per_cell;
    const int64_t last = sh.layers - 1;
    load_tile(gout + row0 * sh.h[last], sh.h[last], n, g.data());  // zero on padded rows: no contribution
    for (int64_t l = last; l >= 0; --l) {
      const int64_t h = sh.h[l];
      const V<T>* sl = reinterpret_cast<const V<T>*>(saved[l]) + t * h;
      const T* ml = mask[l];
      for (int64_t j = 0; j < h; ++j) {
        T d[R], sv[R];
        std::memcpy(sv, &sl[j], sizeof(sv));
#pragma omp simd
        for (int64_t r = 0; r < R; ++r) d[r] = activate_grad<T, ACT>(sv[r]);
        V<T> dv;
        std::memcpy(&dv, d, sizeof(dv));
        gp[j] = g[j] * dv * ml[j];
      }
      V<T>* gb = cell_acc + gl.b[l];
      for (int64_t j = 0; j < h; ++j) gb[j] += gp[j];
      if (w_in[l]) {
        const T* wi = w_in[l] + c * sh.a * h;
        V<T>* gwi = cell_acc + gl.w_in[l];
        const Synapses& si = wg.in[l];
        for (int64_t i = 0; i < sh.a; ++i) {
          const V<T> xi = xt[i];
          V<T> gxi = gxt[i];
          for (int64_t e = si.sptr[i]; e < si.sptr[i + 1]; ++e) {
            const int64_t j = si.dst[e];
            gwi[e] += xi * gp[j];
            gxi += wi[i * h + j] * gp[j];
          }
          gxt[i] = gxi;
        }
      }
      if (l > 0) {
        const int64_t hp = sh.h[l - 1];
        const V<T>* sp = reinterpret_cast<const V<T>*>(saved[l - 1]) + t * hp;
        const T* wr = w_rec[l] + c * hp * h;
        V<T>* gwr = cell_acc + gl.w_rec[l];
        const Synapses& sr = wg.rec[l];
        for (int64_t k = 0; k < hp; ++k) {
          const V<T> sk = sp[k];
          V<T> gk = {};
          for (int64_t e = sr.sptr[k]; e < sr.sptr[k + 1]; ++e) {
            const int64_t j = sr.dst[e];
            gwr[e] += sk * gp[j];
            gk += wr[k * h + j] * gp[j];
          }
          g[k] = gk;
        }
      }
    }
    if (sh.affine) {  // gxt is the gradient of x_eff = x * scale + shift
      V<T>* gs = cell_acc + gl.scale;
      V<T>* gsh = cell_acc + gl.shift;
      for (int64_t i = 0; i < sh.a; ++i) {
        gs[i] += gxt[i] * xr[i];
        gsh[i] += gxt[i];
        gxt[i] = gxt[i] * io.scale[c * sh.a + i];
      }
    }
    if (sh.head) {  // zero on padded rows, like gout
      load_tile(ghead + row0 * sh.head, sh.head, n, gh.data());
      const T* hw = io.hw + c * sh.a * sh.head;
      V<T>* ghw = cell_acc + gl.hw;
      V<T>* ghb = cell_acc + gl.hb;
      for (int64_t o = 0; o < sh.head; ++o) ghb[o] += gh[o];
      for (int64_t i = 0; i < sh.a; ++i) {
        V<T> gxi = gxt[i];
        for (int64_t o = 0; o < sh.head; ++o) {
          ghw[i * sh.head + o] += xr[i] * gh[o];
          gxi += hw[i * sh.head + o] * gh[o];
        }
        gxt[i] = gxi;
      }
    }
    store_tile(gxt.data(), sh.a, n, gx + row0 * sh.a);
  }
}

// returns [g_x, then per layer g_w_in (empty without an input term), g_bias, g_w_rec (empty for layer 0), then
// g_in_scale, g_in_shift, g_head_w, g_head_b (empty when unused)]; ghead: the head output's gradient (or empty)
std::vector<at::Tensor> ncp_mlp_bwd(const at::Tensor& x, std::vector<at::Tensor> w_in, std::vector<at::Tensor> bias,
                                    std::vector<at::Tensor> w_rec, std::vector<at::Tensor> mask,
                                    std::vector<at::Tensor> saved, const at::Tensor& gout, int64_t act,
                                    std::vector<at::Tensor> pat_in, std::vector<at::Tensor> pat_rec,
                                    std::vector<at::Tensor> io, const at::Tensor& ghead) {
  const char* op = "ncp_mlp_bwd";
  Shapes sh = check(op, x, w_in, bias, w_rec, mask, act);
  check_io(op, sh, x, io);
  const auto dtype = x.scalar_type();
  if (sh.head) ck::like(op, "ghead", ghead, dtype, {sh.C, sh.M, sh.head}, "(C, M, o)");
  const Wiring wg(op, sh, pat_in, pat_rec);
  TORCH_CHECK(static_cast<int64_t>(saved.size()) == sh.layers, "neurodyn_scan.", op, ": saved has ", saved.size(),
              " entries, expected one per layer (", sh.layers, ")");
  for (int64_t l = 0; l < sh.layers; ++l)
    ck::like(op, item("saved", l), saved[l], dtype, {sh.C, sh.tiles, sh.h[l], R},
             "(C, tiles, h, 16) as ncp_mlp_fwd returned it");
  ck::like(op, "gout", gout, dtype, {sh.C, sh.M, sh.h.back()}, "(C, M, h_last)");
  const GradLayout gl(sh, wg);
  const int64_t threads = at::get_num_threads();
  at::Tensor acc = at::zeros({threads, sh.C * gl.per_cell * R}, x.options());
  at::Tensor gx = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ncp_mlp_bwd", [&] {
    std::vector<const scalar_t*> wi, wr, m, sp;
    for (int64_t l = 0; l < sh.layers; ++l) {
      wi.push_back(ptr_or_null<scalar_t>(w_in[l]));
      wr.push_back(l > 0 ? w_rec[l].data_ptr<scalar_t>() : nullptr);
      m.push_back(mask[l].data_ptr<scalar_t>());
      sp.push_back(saved[l].data_ptr<scalar_t>());
    }
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* gp = gout.data_ptr<scalar_t>();
    const scalar_t* ghp = sh.head ? ghead.data_ptr<scalar_t>() : nullptr;
    const IO<scalar_t> iop(sh, io);
    scalar_t* gxp = gx.data_ptr<scalar_t>();
    scalar_t* accp = acc.data_ptr<scalar_t>();
    const int64_t stride = sh.C * gl.per_cell * R;
    with_act(act, [&](auto A) {
      at::parallel_for(0, sh.C * sh.tiles, 16, [&](int64_t t0, int64_t t1) {
        backward_tiles<scalar_t, decltype(A)::value>(sh, wg, gl, iop, xp, wi, wr, m, sp, gp, ghp, gxp,
                                                     accp + at::get_thread_num() * stride, t0, t1);
      });
    });
  });
  // the dims as an IntArrayRef: a bare {0, 3} is ambiguous between sum's IntArrayRef and DimnameList overloads
  // under -std=c++17, which the cpp_extension of torch <= 2.11 passes (benchmarks/tools/check_kernel_headers.py)
  const int64_t summed[] = {0, 3};
  at::Tensor total = acc.view({threads, sh.C, gl.per_cell, R}).sum(at::IntArrayRef(summed));
  // a compact per-synapse gradient -> the (C, rows, cols) weight gradient, zero off the synapses
  auto place = [&](int64_t offset, const Synapses& syn, int64_t rows, int64_t cols) {
    at::Tensor dense = at::zeros({sh.C, rows * cols}, x.options());
    at::Tensor flat = at::empty({syn.count()}, x.options().dtype(at::kLong));
    std::copy(syn.flat.begin(), syn.flat.end(), flat.data_ptr<int64_t>());
    dense.index_copy_(1, flat, total.narrow(1, offset, syn.count()));
    return dense.view({sh.C, rows, cols});
  };
  std::vector<at::Tensor> grads{gx};
  for (int64_t l = 0; l < sh.layers; ++l) {
    const int64_t h = sh.h[l];
    grads.push_back(sh.has_in[l] ? place(gl.w_in[l], wg.in[l], sh.a, h) : at::empty({0}, x.options()));
    grads.push_back(total.narrow(1, gl.b[l], h).reshape({sh.C, h}));
    grads.push_back(l > 0 ? place(gl.w_rec[l], wg.rec[l], sh.h[l - 1], h) : at::empty({0}, x.options()));
  }
  const at::Tensor none = at::empty({0}, x.options());
  grads.push_back(sh.affine ? total.narrow(1, gl.scale, sh.a) : none);
  grads.push_back(sh.affine ? total.narrow(1, gl.shift, sh.a) : none);
  grads.push_back(sh.head ? total.narrow(1, gl.hw, sh.a * sh.head).reshape({sh.C, sh.a, sh.head}) : none);
  grads.push_back(sh.head ? total.narrow(1, gl.hb, sh.head) : none);
  return grads;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(neurodyn_scan, m) {
  m.def("ncp_mlp_fwd", &ncp_mlp_fwd);
  m.def("ncp_mlp_bwd", &ncp_mlp_bwd);
}
