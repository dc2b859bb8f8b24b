// timestep_sinusoid: out[r, j] = cos(t[r] * f_j) and out[r, half + j] = sin(t[r] * f_j), with
// f_j = exp((c * j) * inv_half), c = float(-ln(max_period)), inv_half = 1 / half, all in FP32.
//
// This is diffusers' get_timestep_embedding (flip_sin_to_cos, shift 0, scale 1) as eager torch runs
// it on a GPU, operation for operation: the float32 products c * j, the division by half that torch
// computes as a product with the FP32 reciprocal (a CPU-scalar divisor), and the CUDA math library's
// expf, cosf and sinf that torch's eager exp, cos and sin call. Every product is rounded on its own
// (__fmul_rn: no contraction into an FMA), so the output is bitwise eager's on the same GPU. One
// thread per output element, each from its own timestep only: deterministic and batch-invariant.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

namespace rlk {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    timestep_sinusoid_kernel(const float* __restrict__ t, int64_t total, int half, float c, float inv_half,
                             float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= total) return;
  const int64_t row = i / (2 * half);
  const int k = static_cast<int>(i - row * 2 * half);
  const int j = k < half ? k : k - half;
  const float freq = expf(__fmul_rn(__fmul_rn(c, static_cast<float>(j)), inv_half));
  const float angle = __fmul_rn(t[row], freq);
  out[i] = k < half ? cosf(angle) : sinf(angle);
}

}  // namespace

at::Tensor timestep_sinusoid(const at::Tensor& t, int64_t dim, double c) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == at::kFloat && t.dim() == 1 && t.is_contiguous(),
              "timestep_sinusoid: t must be a contiguous 1-D float32 CUDA tensor");
  TORCH_CHECK(dim > 0 && dim % 2 == 0, "timestep_sinusoid: dim must be positive and even");
  const c10::cuda::CUDAGuard guard(t.device());
  auto out = at::empty({t.size(0), dim}, t.options());
  const int64_t total = out.numel();
  if (total == 0) return out;
  const int half = static_cast<int>(dim / 2);
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  timestep_sinusoid_kernel<<<blocks, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      t.data_ptr<float>(), total, half, static_cast<float>(c), 1.0f / static_cast<float>(half),
      out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) { m.def("timestep_sinusoid(Tensor t, int dim, float c) -> Tensor"); }

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) { m.impl("timestep_sinusoid", &rlk::timestep_sinusoid); }
