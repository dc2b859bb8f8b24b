// adaln_projection: out = linear(silu(temb).to(bf16), w, b) with BF16 tensor cores.
//
// Forward: a = bf16(silu(temb)) with ATen's formula (x / (1 + expf(-x)), FP32, one rounding), so
// `a` is bitwise what eager `silu(temb).to(torch.bfloat16)` gives; then out = bf16(a @ w^T + b)
// from FP32 accumulators (one MMA chain per output over ascending k, bias added, one rounding).
// Backward: d_a = bf16(dout @ w) with a fixed split-K count (caller's constant), folded in
// ascending order and rounded once, as eager rounds the BF16 GEMM result; then
// d_temb = silu'(temb) * float(d_a) in FP32 (the grad of `.to(bf16)` is a cast).
// dw = bf16(dout^T @ a): one MMA chain over the T rows, ascending. db = fixed-chunk FP32 column
// sums of dout, cast once. The tile shape depends on T but the order of every output's terms
// does not: rows are batch-invariant, everything is deterministic, no atomics.
//
// Ops: adaln_proj_forward(temb, w, b) -> (out, a)
//      adaln_proj_backward(dout, temb, a, w, splits_dgrad, row_chunk, need_temb, need_w, need_b)
//          -> [d_temb, dw, db]   (gradients not asked for come back as empty tensors)
//      adaln_proj_dgrad_part(dout, w, splits) -> (splits, T, D) FP32 partials, unfolded, and
//      adaln_proj_fold_dgrad(part, temb) -> d_temb: the backward's d_temb in two steps, for shards
#include "adaln_backward.cuh"
#include "gemm_common.cuh"
#include "gemm_mma_bf16.cuh"
#include "gemm_wgmma_bf16.cuh"

namespace rlk {
namespace {

__global__ void silu_to_bf16_kernel(const float* __restrict__ x, bf16* __restrict__ y,
                                    long long quads) {
  const long long q = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q >= quads) return;
  const float4 v = reinterpret_cast<const float4*>(x)[q];
  __nv_bfloat162 lo = __floats2bfloat162_rn(silu_f32(v.x), silu_f32(v.y));
  __nv_bfloat162 hi = __floats2bfloat162_rn(silu_f32(v.z), silu_f32(v.w));
  reinterpret_cast<__nv_bfloat162*>(y)[2 * q] = lo;
  reinterpret_cast<__nv_bfloat162*>(y)[2 * q + 1] = hi;
}

std::tuple<at::Tensor, at::Tensor> adaln_forward_impl(const at::Tensor& temb, const at::Tensor& w,
                                                      const at::Tensor& b, bool wgmma, int64_t variant) {
  check_tensor("adaln_proj_forward", temb, at::kFloat, 2, "temb");
  check_tensor("adaln_proj_forward", w, at::kBFloat16, 2, "w");
  check_tensor("adaln_proj_forward", b, at::kBFloat16, 1, "b");
  const c10::cuda::CUDAGuard guard(temb.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int T = temb.size(0), D = temb.size(1), N = w.size(0);
  TORCH_CHECK(w.size(1) == D && b.numel() == N && D % 8 == 0, "adaln_proj_forward: shape mismatch");
  at::Tensor a = at::empty({T, D}, temb.options().dtype(at::kBFloat16));
  at::Tensor out = at::empty({T, N}, a.options());
  const bf16* w_p = reinterpret_cast<const bf16*>(w.data_ptr());
  const bf16* b_p = reinterpret_cast<const bf16*>(b.data_ptr());
  bf16* a_p = reinterpret_cast<bf16*>(a.data_ptr());
  bf16* out_p = reinterpret_cast<bf16*>(out.data_ptr());
  if (wgmma) {
    TORCH_CHECK(variant >= 0 && variant <= 4, "adaln_proj_forward_wgmma: variant must be 0..4, got ", variant);
    const bool stream_ok = wgmma_gemm::stream_supported(T, N, D, temb.data_ptr(), w_p);
    TORCH_CHECK(variant != 4 || stream_ok,
                "adaln_proj_forward_wgmma: variant 4 (the W-streaming kernel) needs 1..8 rows, "
                "N % 256 == 0, D % 64 == 0, an sm_90 device and 16-byte aligned tensors");
    if (variant == 4 || (variant == 0 && stream_ok)) {
      wgmma_gemm::silu_linear_bias_stream(temb.data_ptr<float>(), a_p, w_p, b_p, out_p, T, N, D, stream);
      return {out, a};
    }
  }
  const long long quads = static_cast<long long>(T) * D / 4;
  if (quads > 0) {
    silu_to_bf16_kernel<<<ceil_div(quads, 256), 256, 0, stream>>>(temb.data_ptr<float>(), a_p, quads);
    check_launch("silu_to_bf16");
  }
  if (wgmma) {
    TORCH_CHECK(T > 0 && wgmma_gemm::supported(T, N, D, a_p, w_p),
                "adaln_proj_forward_wgmma: needs an sm_90 device, N % 256 == 0, D % 64 == 0 and "
                "16-byte aligned tensors");
    wgmma_gemm::linear_bias(a_p, w_p, b_p, out_p, T, N, D, static_cast<int>(variant), stream);
  } else {
    mma_gemm_by_rows<true, true, EPI_BF16>(a_p, w_p, out.data_ptr(), b_p, T, N, D, 1, D, D, N,
                                           stream);
  }
  return {out, a};
}

// mma.sync forward (any sm_80+ device).
std::tuple<at::Tensor, at::Tensor> adaln_forward(const at::Tensor& temb, const at::Tensor& w,
                                                 const at::Tensor& b) {
  return adaln_forward_impl(temb, w, b, false, 0);
}

// wgmma/TMA forward (sm_90a): the same summation order, so the same bits. `variant` 0 is the
// default kernel choice: the W-streaming kernel (which computes silu itself) for 1..8 rows, else
// linear_bias's; 1..3 force one of linear_bias's kernels and 4 the W-streaming kernel
// (gemm_wgmma_bf16.cuh), for benchmarks.
std::tuple<at::Tensor, at::Tensor> adaln_forward_wgmma(const at::Tensor& temb, const at::Tensor& w,
                                                       const at::Tensor& b, int64_t variant) {
  return adaln_forward_impl(temb, w, b, true, variant);
}

void mma_dgrad(const bf16* dout_p, const bf16* w_p, float* part, int T, int N, int D, int splits,
               cudaStream_t stream) {
  mma_gemm_by_rows<true, false, EPI_F32>(dout_p, w_p, part, nullptr, T, D, N, splits, N, D, D,
                                         stream);
}

// mma.sync backward (any sm_80+ device); the order is adaln_backward.cuh's.
std::vector<at::Tensor> adaln_backward(const at::Tensor& dout, const at::Tensor& temb,
                                       const at::Tensor& a, const at::Tensor& w,
                                       int64_t splits_dgrad, int64_t row_chunk, bool need_temb,
                                       bool need_w, bool need_b) {
  return adaln_backward_with(
      "adaln_proj_backward", dout, temb, a, w, splits_dgrad, row_chunk, need_temb, need_w, need_b,
      [](int, int, int) {}, mma_dgrad,
      [](const bf16* dout_p, const bf16* a_p, bf16* dw, int T, int N, int D, cudaStream_t stream) {
        mma_gemm_launch<128, 128, 64, 64, 4, false, false, EPI_BF16>(dout_p, a_p, dw, nullptr, N, D,
                                                                     T, 1, N, D, D, stream);
      });
}

at::Tensor adaln_dgrad_part(const at::Tensor& dout, const at::Tensor& w, int64_t splits) {
  return adaln_dgrad_part_with("adaln_proj_dgrad_part", dout, w, splits, [](int, int, int) {},
                               mma_dgrad);
}

at::Tensor adaln_fold_dgrad(const at::Tensor& part, const at::Tensor& temb) {
  constexpr const char* op = "adaln_proj_fold_dgrad";
  check_tensor(op, part, at::kFloat, 3, "part");
  check_tensor(op, temb, at::kFloat, 2, "temb");
  TORCH_CHECK(part.size(1) == temb.size(0) && part.size(2) == temb.size(1) && temb.size(1) % 4 == 0,
              op, ": part must be (splits, T, D) for temb (T, D), D % 4 == 0");
  const c10::cuda::CUDAGuard guard(temb.device());
  return fold_dgrad(part, temb, c10::cuda::getCurrentCUDAStream());
}

}  // namespace
}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def("adaln_proj_dgrad_part(Tensor dout, Tensor w, int splits) -> Tensor");
  m.def("adaln_proj_fold_dgrad(Tensor part, Tensor temb) -> Tensor");
  m.def("adaln_proj_forward(Tensor temb, Tensor w, Tensor b) -> (Tensor, Tensor)");
  m.def("adaln_proj_forward_wgmma(Tensor temb, Tensor w, Tensor b, int variant=0) -> (Tensor, Tensor)");
  m.def(
      "adaln_proj_backward(Tensor dout, Tensor temb, Tensor a, Tensor w, int splits_dgrad, "
      "int row_chunk, bool need_temb, bool need_w, bool need_b) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) {
  m.impl("adaln_proj_forward", &rlk::adaln_forward);
  m.impl("adaln_proj_forward_wgmma", &rlk::adaln_forward_wgmma);
  m.impl("adaln_proj_backward", &rlk::adaln_backward);
  m.impl("adaln_proj_dgrad_part", &rlk::adaln_dgrad_part);
  m.impl("adaln_proj_fold_dgrad", &rlk::adaln_fold_dgrad);
}
