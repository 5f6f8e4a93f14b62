// Argument checks of the registered ops (torch.ops.neurodyn_scan.*, callable by anyone, not only by the Python
// wrappers that validate first). Every tensor an op reads is checked for presence, device, shape (each dimension
// the op indexes, against the others), dtype and contiguity; a failure raises a RuntimeError naming the op, the
// argument, and the expected and actual shape or dtype, e.g.
//   neurodyn_scan.selective_scan_fwd: delta has shape [2, 4, 69], expected (batch, d, L) like u = [2, 4, 70]
// The checks read sizes and flags only (O(1) per tensor); the messages are built only on failure.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string_view>

namespace neurodyn_check {

// t is a defined CPU tensor with `dims` dimensions; `layout` names them, e.g. "(batch, d, L)"
inline void rank(std::string_view op, std::string_view arg, const at::Tensor& t, int64_t dims,
                 std::string_view layout) {
  TORCH_CHECK(t.defined(), "neurodyn_scan.", op, ": ", arg, " is missing, expected a ", layout, " tensor");
  TORCH_CHECK(t.device().is_cpu(), "neurodyn_scan.", op, ": ", arg, " is on ", t.device(),
              ", expected a CPU tensor");
  TORCH_CHECK(t.dim() == dims, "neurodyn_scan.", op, ": ", arg, " has shape ", t.sizes(), ", expected ", layout);
}

inline void contiguous(std::string_view op, std::string_view arg, const at::Tensor& t) {
  TORCH_CHECK(t.is_contiguous(), "neurodyn_scan.", op, ": ", arg, " of shape ", t.sizes(),
              " is not contiguous, expected a contiguous tensor");
}

// The op's first tensor, whose dtype the others must share: a contiguous float32 / float64 CPU tensor with `dims`
// dimensions (any number when dims < 0).
inline void input(std::string_view op, std::string_view arg, const at::Tensor& t, int64_t dims,
                  std::string_view layout) {
  rank(op, arg, t, dims < 0 ? t.dim() : dims, layout);
  const auto dtype = t.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble, "neurodyn_scan.", op, ": ", arg, " has dtype ", dtype,
              ", expected Float or Double");
  contiguous(op, arg, t);
}

// t is a contiguous CPU tensor of `dtype` with exactly `shape`
inline void like(std::string_view op, std::string_view arg, const at::Tensor& t, at::ScalarType dtype,
                 at::IntArrayRef shape, std::string_view layout) {
  rank(op, arg, t, static_cast<int64_t>(shape.size()), layout);
  TORCH_CHECK(t.sizes() == shape, "neurodyn_scan.", op, ": ", arg, " has shape ", t.sizes(), ", expected ", layout,
              " = ", shape);
  TORCH_CHECK(t.scalar_type() == dtype, "neurodyn_scan.", op, ": ", arg, " has dtype ", t.scalar_type(),
              ", expected ", dtype);
  contiguous(op, arg, t);
}

// the padded state size n_pad = A.size(1) of a (rows, n_pad) A: a positive multiple of 8
inline int64_t padded_states(std::string_view op, const at::Tensor& A, int64_t rows) {
  rank(op, "A", A, 2, "(d, n_pad)");
  const int64_t np = A.size(1);
  TORCH_CHECK(A.size(0) == rows && np > 0 && np % 8 == 0, "neurodyn_scan.", op, ": A has shape ", A.sizes(),
              ", expected (d, n_pad) = [", rows,
              ", n_pad] with n_pad a positive multiple of 8 (the padded state size)");
  return np;
}

}  // namespace neurodyn_check
