// adaln_projection's backward around two GEMM launchers; adaln_projection.cu (mma.sync, any
// sm_80+ device) and adaln_backward_wgmma.cu (wgmma/TMA, sm_90a) differ only in those launchers:
//   d_temb = silu'(temb) * float(bf16(sum_s part[s])), part[s] = dout @ w over k chunk s of N:
//            `splits_dgrad` chunks, each one FP32 chain over its 16-wide k steps in ascending
//            order, folded in ascending s (fold_splits), rounded once as eager rounds the BF16
//            GEMM result; the grad of `.to(bf16)` is a cast;
//   dw     = bf16(dout^T @ a): one chain over all T rows, ascending, rounded once;
//   db     = fixed-chunk FP32 column sums of dout (column_sum), cast once.
// Both launcher pairs keep that order, so they give the same bits; no T-dependent order, so rows
// of d_temb are batch-invariant, and nothing uses atomics.
#pragma once

#include <vector>

#include "gemm_common.cuh"

namespace rlk {

inline void check_tensor(const char* op, const at::Tensor& t, at::ScalarType dtype, int64_t dim,
                         const char* name) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == dtype && t.dim() == dim && t.is_contiguous(), op,
              ": ", name, " must be a contiguous ", dim, "-D ", c10::toString(dtype), " CUDA tensor");
}

// part (splits, T, D) FP32: dgrad's chain over each of `splits` equal chunks of N, not folded.
template <class Dgrad>
at::Tensor dgrad_part(const at::Tensor& dout, const at::Tensor& w, int64_t splits, Dgrad&& dgrad,
                      cudaStream_t stream) {
  const int T = dout.size(0), N = w.size(0), D = w.size(1);
  at::Tensor part = at::empty({splits, T, D}, dout.options().dtype(at::kFloat));
  dgrad(reinterpret_cast<const bf16*>(dout.data_ptr()), reinterpret_cast<const bf16*>(w.data_ptr()),
        part.data_ptr<float>(), T, N, D, static_cast<int>(splits), stream);
  return part;
}

// d_temb from the chunk partials: folded in ascending chunk order, rounded to BF16 once, times
// silu'(temb).
inline at::Tensor fold_dgrad(const at::Tensor& part, const at::Tensor& temb, cudaStream_t stream) {
  at::Tensor dtemb = at::empty_like(temb);
  fold_splits<FOLD_BF16_SILU_GRAD>(part, static_cast<int>(part.size(0)), temb.size(0), temb.size(1),
                                   nullptr, temb.data_ptr<float>(), dtemb.data_ptr<float>(), nullptr,
                                   stream);
  return dtemb;
}

// The ops adaln_proj_dgrad_part(_wgmma)(dout, w, splits) -> part: the partials a sharded caller
// computes for the chunks it holds, all-gathers and folds with adaln_proj_fold_dgrad, so the
// fold is the one adaln_backward_with runs. covers(T, N, D) throws where the launcher cannot.
template <class Covers, class Dgrad>
at::Tensor adaln_dgrad_part_with(const char* op, const at::Tensor& dout, const at::Tensor& w,
                                 int64_t splits, Covers&& covers, Dgrad&& dgrad) {
  check_tensor(op, dout, at::kBFloat16, 2, "dout");
  check_tensor(op, w, at::kBFloat16, 2, "w");
  TORCH_CHECK(dout.size(1) == w.size(0), op, ": shape mismatch");
  TORCH_CHECK(splits >= 1 && w.size(0) % splits == 0, op, ": N=", w.size(0),
              " is not split into ", splits, " equal chunks");
  const c10::cuda::CUDAGuard guard(w.device());
  covers(dout.size(0), w.size(0), w.size(1));
  return dgrad_part(dout, w, splits, dgrad, c10::cuda::getCurrentCUDAStream());
}

// Returns [d_temb, dw, db]; gradients not asked for come back as empty tensors. After the shape
// checks, covers(T, N, D) must throw if the launchers cannot take the problem; then
//   dgrad(dout, w, part, T, N, D, splits, stream)  writes part (splits, T, D), FP32;
//   wgrad(dout, a, dw, T, N, D, stream)             writes dw (N, D), BF16.
template <class Covers, class Dgrad, class Wgrad>
std::vector<at::Tensor> adaln_backward_with(const char* op, const at::Tensor& dout,
                                            const at::Tensor& temb, const at::Tensor& a,
                                            const at::Tensor& w, int64_t splits_dgrad,
                                            int64_t row_chunk, bool need_temb, bool need_w,
                                            bool need_b, Covers&& covers, Dgrad&& dgrad,
                                            Wgrad&& wgrad) {
  check_tensor(op, dout, at::kBFloat16, 2, "dout");
  check_tensor(op, temb, at::kFloat, 2, "temb");
  check_tensor(op, a, at::kBFloat16, 2, "a");
  check_tensor(op, w, at::kBFloat16, 2, "w");
  const c10::cuda::CUDAGuard guard(temb.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int T = temb.size(0), D = temb.size(1), N = w.size(0);
  TORCH_CHECK(dout.size(0) == T && dout.size(1) == N && a.size(0) == T && a.size(1) == D &&
                  w.size(1) == D,
              op, ": shape mismatch");
  covers(T, N, D);
  const bf16* dout_p = reinterpret_cast<const bf16*>(dout.data_ptr());
  at::Tensor none = at::empty({0}, temb.options());
  at::Tensor dtemb = none, dw = none, db = none;
  if (need_temb) dtemb = fold_dgrad(dgrad_part(dout, w, splits_dgrad, dgrad, stream), temb, stream);
  if (need_w) {
    dw = at::empty({N, D}, w.options());
    wgrad(dout_p, reinterpret_cast<const bf16*>(a.data_ptr()), reinterpret_cast<bf16*>(dw.data_ptr()),
          T, N, D, stream);
  }
  if (need_b) {
    db = at::empty({N}, w.options());
    column_sum<bf16, bf16>(dout, static_cast<int>(row_chunk), db, stream);
  }
  return {dtemb, dw, db};
}

}  // namespace rlk
