// adaln_projection's backward on Hopper wgmma/TMA kernels (gemm_wgmma_bwd_bf16.cuh; issue 13
// step 3), a translation unit of its own so that it compiles beside adaln_projection.cu.
//
// Same arithmetic and order as adaln_proj_backward (adaln_projection.cu, mma.sync):
//   d_temb = silu'(temb) * float(bf16(sum_s part[s])), part[s] = dout @ w over k chunk s of N,
//            `splits_dgrad` chunks folded in ascending order (fold_splits);
//   dw     = bf16(dout^T @ a), one chain over all T rows, ascending;
//   db     = fixed-chunk column sums of dout (column_sum, the same kernel as before).
// Only the GEMM kernels differ; each output's chain of 16-wide k steps is the same.
//
// Op: adaln_proj_backward_wgmma(dout, temb, a, w, splits_dgrad, row_chunk, need_temb, need_w,
//         need_b, variant) -> [d_temb, dw, db]; `variant` 0 lets dgrad pick its tile by T,
//         1..3 force one (wgmma_bwd::dgrad), for benchmarks; every variant gives the same bits.
#include "gemm_common.cuh"
#include "gemm_wgmma_bwd_bf16.cuh"

namespace rlk {
namespace {

void check_bwd(const at::Tensor& t, at::ScalarType dtype, int64_t dim, const char* name) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == dtype && t.dim() == dim && t.is_contiguous(),
              "adaln_proj_backward_wgmma: ", name, " must be a contiguous ", dim, "-D ",
              c10::toString(dtype), " CUDA tensor");
}

std::vector<at::Tensor> adaln_backward_wgmma(const at::Tensor& dout, const at::Tensor& temb,
                                             const at::Tensor& a, const at::Tensor& w,
                                             int64_t splits_dgrad, int64_t row_chunk,
                                             bool need_temb, bool need_w, bool need_b,
                                             int64_t variant) {
  check_bwd(dout, at::kBFloat16, 2, "dout");
  check_bwd(temb, at::kFloat, 2, "temb");
  check_bwd(a, at::kBFloat16, 2, "a");
  check_bwd(w, at::kBFloat16, 2, "w");
  TORCH_CHECK(variant >= 0 && variant <= 3, "adaln_proj_backward_wgmma: variant must be 0..3");
  const c10::cuda::CUDAGuard guard(temb.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int T = temb.size(0), D = temb.size(1), N = w.size(0);
  TORCH_CHECK(dout.size(0) == T && dout.size(1) == N && a.size(0) == T && a.size(1) == D &&
                  w.size(1) == D,
              "adaln_proj_backward_wgmma: shape mismatch");
  const bf16* dout_p = reinterpret_cast<const bf16*>(dout.data_ptr());
  const bf16* w_p = reinterpret_cast<const bf16*>(w.data_ptr());
  const bf16* a_p = reinterpret_cast<const bf16*>(a.data_ptr());
  TORCH_CHECK(wgmma_bwd::supported(T, N, D, static_cast<int>(splits_dgrad), {dout_p, w_p, a_p}),
              "adaln_proj_backward_wgmma: needs an sm_90 device, T >= 1, D % 128 == 0, "
              "N % (64 * splits_dgrad) == 0 and 16-byte aligned tensors");
  at::Tensor none = at::empty({0}, temb.options());
  at::Tensor dtemb = none, dw = none, db = none;
  if (need_temb) {
    at::Tensor part = at::empty({splits_dgrad, T, D}, temb.options());
    wgmma_bwd::dgrad(dout_p, w_p, part.data_ptr<float>(), T, N, D, static_cast<int>(splits_dgrad),
                     static_cast<int>(variant), stream);
    dtemb = at::empty({T, D}, temb.options());
    fold_splits<FOLD_BF16_SILU_GRAD>(part, static_cast<int>(splits_dgrad), T, D, nullptr,
                                     temb.data_ptr<float>(), dtemb.data_ptr<float>(), nullptr,
                                     stream);
  }
  if (need_w) {
    dw = at::empty({N, D}, w.options());
    wgmma_bwd::wgrad(dout_p, a_p, reinterpret_cast<bf16*>(dw.data_ptr()), T, N, D, stream);
  }
  if (need_b) {
    db = at::empty({N}, w.options());
    column_sum<bf16, bf16>(dout, static_cast<int>(row_chunk), db, stream);
  }
  return {dtemb, dw, db};
}

}  // namespace
}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def(
      "adaln_proj_backward_wgmma(Tensor dout, Tensor temb, Tensor a, Tensor w, int splits_dgrad, "
      "int row_chunk, bool need_temb, bool need_w, bool need_b, int variant=0) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) {
  m.impl("adaln_proj_backward_wgmma", &rlk::adaln_backward_wgmma);
}
