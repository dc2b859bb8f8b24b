// timestep_mlp: out = linear(silu(linear(x, w1, b1)), w2, b2), all FP32, no TF32.
//
// Every GEMM is the FP32 SIMT kernel of gemm_simt_f32.cuh with a fixed split count per GEMM
// (passed in by the caller, never derived from the row count T), so each output row and each
// row gradient (dx) has one summation order whatever T is: batch-invariant and deterministic.
// Weight gradients reduce over the T rows in fixed chunks of `wgrad_rows` rows (each an ascending
// FMA chain, the chunks folded in ascending order); bias gradients are fixed-chunk column sums
// folded pairwise (gemm_common.cuh). No atomics anywhere.
//
// Ops (registered in the rl_kernel_ops namespace):
//   gemm_tmlp_forward(x, w1, b1, w2, b2, splits_fc1, splits_fc2) -> (out, h, a)
//       h = x @ w1^T + b1 (pre-activation), a = silu(h), out = a @ w2^T + b2
//   gemm_tmlp_backward(dout, x, w1, w2, h, a, splits_fc2_dgrad, splits_fc1_dgrad, row_chunk,
//                      wgrad_rows, need_x, need_w1, need_b1, need_w2, need_b2)
//       -> [dx, dw1, db1, dw2, db2]
//       gradients not asked for come back as empty tensors.
#include "gemm_common.cuh"
#include "gemm_simt_f32.cuh"

namespace rlk {
namespace {

void check_f32_2d(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == at::kFloat && t.dim() == 2 && t.is_contiguous(),
              "gemm_tmlp: ", name, " must be a contiguous 2-D float32 CUDA tensor");
}

// Split-K GEMM of the canonical order: `splits` equal chunks of K (splits divides K).
template <bool A_MK, bool B_NK>
void split_gemm(const float* A, const float* B, float* part, int M, int N, int K, int64_t splits,
                int lda, int ldb, cudaStream_t stream) {
  TORCH_CHECK(splits >= 1 && K % splits == 0 && (K / splits) % 4 == 0, "gemm_tmlp: K=", K,
              " does not split in ", splits, " chunks of whole float4s");
  simt_gemm<A_MK, B_NK>(A, B, part, M, N, K, static_cast<int>(K / splits), lda, ldb, stream);
}

// Weight gradient g^T @ v over the T rows: chunks of `rows` rows, each an ascending FMA chain,
// folded in ascending order (one chunk: written straight to the output).
void weight_grad(const at::Tensor& g, const at::Tensor& v, at::Tensor& out, int64_t rows,
                 cudaStream_t stream) {
  const int T = g.size(0), M = g.size(1), N = v.size(1);
  const int chunks = ceil_div(T, rows);
  if (chunks == 1) {
    simt_gemm<false, false>(g.data_ptr<float>(), v.data_ptr<float>(), out.data_ptr<float>(), M, N,
                            T, static_cast<int>(rows), M, N, stream);
    return;
  }
  at::Tensor part = at::empty({chunks, M, N}, g.options());
  simt_gemm<false, false>(g.data_ptr<float>(), v.data_ptr<float>(), part.data_ptr<float>(), M, N,
                          T, static_cast<int>(rows), M, N, stream);
  fold_splits<FOLD_PLAIN>(part, chunks, M, N, nullptr, nullptr, out.data_ptr<float>(), nullptr,
                          stream);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tmlp_forward(const at::Tensor& x,
                                                            const at::Tensor& w1,
                                                            const at::Tensor& b1,
                                                            const at::Tensor& w2,
                                                            const at::Tensor& b2, int64_t s1,
                                                            int64_t s2) {
  check_f32_2d(x, "x");
  check_f32_2d(w1, "w1");
  check_f32_2d(w2, "w2");
  const c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int T = x.size(0), F = x.size(1), Hd = w1.size(0), D = w2.size(0);
  TORCH_CHECK(w1.size(1) == F && w2.size(1) == Hd && b1.numel() == Hd && b2.numel() == D,
              "gemm_tmlp_forward: shape mismatch");
  auto opts = x.options();
  at::Tensor part1 = at::empty({s1, T, Hd}, opts);
  split_gemm<true, true>(x.data_ptr<float>(), w1.data_ptr<float>(), part1.data_ptr<float>(), T, Hd,
                         F, s1, F, F, stream);
  at::Tensor h = at::empty({T, Hd}, opts), a = at::empty({T, Hd}, opts);
  fold_splits<FOLD_BIAS_SILU>(part1, s1, T, Hd, b1.data_ptr<float>(), nullptr,
                              h.data_ptr<float>(), a.data_ptr<float>(), stream);
  at::Tensor part2 = at::empty({s2, T, D}, opts);
  split_gemm<true, true>(a.data_ptr<float>(), w2.data_ptr<float>(), part2.data_ptr<float>(), T, D,
                         Hd, s2, Hd, Hd, stream);
  at::Tensor out = at::empty({T, D}, opts);
  fold_splits<FOLD_BIAS>(part2, s2, T, D, b2.data_ptr<float>(), nullptr, out.data_ptr<float>(),
                         nullptr, stream);
  return {out, h, a};
}

std::vector<at::Tensor> tmlp_backward(const at::Tensor& dout, const at::Tensor& x,
                                      const at::Tensor& w1, const at::Tensor& w2,
                                      const at::Tensor& h, const at::Tensor& a, int64_t s_fc2,
                                      int64_t s_fc1, int64_t row_chunk, int64_t wgrad_rows,
                                      bool need_x, bool need_w1, bool need_b1, bool need_w2,
                                      bool need_b2) {
  check_f32_2d(dout, "dout");
  check_f32_2d(x, "x");
  check_f32_2d(w1, "w1");
  check_f32_2d(w2, "w2");
  check_f32_2d(h, "h");
  check_f32_2d(a, "a");
  TORCH_CHECK(row_chunk > 0 && wgrad_rows > 0, "gemm_tmlp_backward: row chunks must be positive");
  const c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int T = x.size(0), F = x.size(1), Hd = w1.size(0), D = w2.size(0);
  TORCH_CHECK(dout.size(0) == T && dout.size(1) == D && h.size(0) == T && h.size(1) == Hd &&
                  a.size(0) == T && a.size(1) == Hd,
              "gemm_tmlp_backward: shape mismatch");
  auto opts = x.options();
  at::Tensor none = at::empty({0}, opts);
  at::Tensor dx = none, dw1 = none, db1 = none, dw2 = none, db2 = none;
  if (need_w2) {
    dw2 = at::empty({D, Hd}, opts);
    weight_grad(dout, a, dw2, wgrad_rows, stream);
  }
  if (need_b2) {
    db2 = at::empty({D}, opts);
    column_sum<float, float>(dout, static_cast<int>(row_chunk), db2, stream);
  }
  if (need_x || need_w1 || need_b1) {
    at::Tensor part = at::empty({s_fc2, T, Hd}, opts);
    split_gemm<true, false>(dout.data_ptr<float>(), w2.data_ptr<float>(), part.data_ptr<float>(),
                            T, Hd, D, s_fc2, D, Hd, stream);
    at::Tensor dh = at::empty({T, Hd}, opts);
    fold_splits<FOLD_SILU_GRAD>(part, s_fc2, T, Hd, nullptr, h.data_ptr<float>(),
                                dh.data_ptr<float>(), nullptr, stream);
    if (need_x) {
      at::Tensor part_x = at::empty({s_fc1, T, F}, opts);
      split_gemm<true, false>(dh.data_ptr<float>(), w1.data_ptr<float>(),
                              part_x.data_ptr<float>(), T, F, Hd, s_fc1, Hd, F, stream);
      dx = at::empty({T, F}, opts);
      fold_splits<FOLD_PLAIN>(part_x, s_fc1, T, F, nullptr, nullptr, dx.data_ptr<float>(), nullptr,
                              stream);
    }
    if (need_w1) {
      dw1 = at::empty({Hd, F}, opts);
      weight_grad(dh, x, dw1, wgrad_rows, stream);
    }
    if (need_b1) {
      db1 = at::empty({Hd}, opts);
      column_sum<float, float>(dh, static_cast<int>(row_chunk), db1, stream);
    }
  }
  return {dx, dw1, db1, dw2, db2};
}

}  // namespace
}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def(
      "gemm_tmlp_forward(Tensor x, Tensor w1, Tensor b1, Tensor w2, Tensor b2, int splits_fc1, "
      "int splits_fc2) -> (Tensor, Tensor, Tensor)");
  m.def(
      "gemm_tmlp_backward(Tensor dout, Tensor x, Tensor w1, Tensor w2, Tensor h, Tensor a, "
      "int splits_fc2_dgrad, int splits_fc1_dgrad, int row_chunk, int wgrad_rows, bool need_x, "
      "bool need_w1, bool need_b1, bool need_w2, bool need_b2) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) {
  m.impl("gemm_tmlp_forward", &rlk::tmlp_forward);
  m.impl("gemm_tmlp_backward", &rlk::tmlp_backward);
}
