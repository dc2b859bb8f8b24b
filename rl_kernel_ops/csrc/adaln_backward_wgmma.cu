// adaln_projection's backward on Hopper wgmma/TMA kernels (gemm_wgmma_bwd_bf16.cuh), a
// translation unit of its own so that it compiles beside adaln_projection.cu. The
// arithmetic and its order are adaln_backward.cuh's, as for the mma.sync backward: only the GEMM
// kernels differ, each output's chain of 16-wide k steps is the same, so are the bits.
//
// Op: adaln_proj_backward_wgmma(dout, temb, a, w, splits_dgrad, row_chunk, need_temb, need_w,
//         need_b, variant) -> [d_temb, dw, db]; `variant` 0 lets dgrad pick its tile by T,
//         1..3 force one (wgmma_bwd::dgrad), for benchmarks; every variant gives the same bits.
#include "adaln_backward.cuh"
#include "gemm_common.cuh"
#include "gemm_wgmma_bwd_bf16.cuh"

namespace rlk {
namespace {

std::vector<at::Tensor> adaln_backward_wgmma(const at::Tensor& dout, const at::Tensor& temb,
                                             const at::Tensor& a, const at::Tensor& w,
                                             int64_t splits_dgrad, int64_t row_chunk,
                                             bool need_temb, bool need_w, bool need_b,
                                             int64_t variant) {
  constexpr const char* op = "adaln_proj_backward_wgmma";
  TORCH_CHECK(variant >= 0 && variant <= 3, op, ": variant must be 0..3");
  return adaln_backward_with(
      op, dout, temb, a, w, splits_dgrad, row_chunk, need_temb, need_w, need_b,
      [&](int T, int N, int D) {
        TORCH_CHECK(wgmma_bwd::supported(T, N, D, static_cast<int>(splits_dgrad),
                                         {dout.data_ptr(), w.data_ptr(), a.data_ptr()}),
                    op, ": needs an sm_90 device, T >= 1, D % 128 == 0, N % (64 * splits_dgrad) == 0 "
                    "and 16-byte aligned tensors");
      },
      [&](const bf16* dout_p, const bf16* w_p, float* part, int T, int N, int D, int splits,
          cudaStream_t stream) {
        wgmma_bwd::dgrad(dout_p, w_p, part, T, N, D, splits, static_cast<int>(variant), stream);
      },
      [](const bf16* dout_p, const bf16* a_p, bf16* dw, int T, int N, int D, cudaStream_t stream) {
        wgmma_bwd::wgrad(dout_p, a_p, dw, T, N, D, stream);
      });
}

at::Tensor adaln_dgrad_part_wgmma(const at::Tensor& dout, const at::Tensor& w, int64_t splits) {
  constexpr const char* op = "adaln_proj_dgrad_part_wgmma";
  return adaln_dgrad_part_with(
      op, dout, w, splits,
      [&](int T, int N, int D) {
        TORCH_CHECK(wgmma_bwd::supported(T, N, D, static_cast<int>(splits),
                                         {dout.data_ptr(), w.data_ptr()}),
                    op, ": needs an sm_90 device, T >= 1, D % 128 == 0, N % (64 * splits) == 0 "
                    "and 16-byte aligned tensors");
      },
      [](const bf16* dout_p, const bf16* w_p, float* part, int T, int N, int D, int splits,
         cudaStream_t stream) { wgmma_bwd::dgrad(dout_p, w_p, part, T, N, D, splits, 0, stream); });
}

}  // namespace
}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def("adaln_proj_dgrad_part_wgmma(Tensor dout, Tensor w, int splits) -> Tensor");
  m.def(
      "adaln_proj_backward_wgmma(Tensor dout, Tensor temb, Tensor a, Tensor w, int splits_dgrad, "
      "int row_chunk, bool need_temb, bool need_w, bool need_b, int variant=0) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) {
  m.impl("adaln_proj_backward_wgmma", &rlk::adaln_backward_wgmma);
  m.impl("adaln_proj_dgrad_part_wgmma", &rlk::adaln_dgrad_part_wgmma);
}
