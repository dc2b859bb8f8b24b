// Shared pieces of the GEMM ops (timestep_mlp.cu, adaln_projection.cu); reserve_dynamic_smem and
// device_facts serve the row ops too.
//
// The canonical summation order of every batch-invariant GEMM here ("fixed split-K"):
//   K is cut into `splits` equal chunks (a constant of the op, never a function of the row count);
//   chunk s of output (m, n) is accumulated from 0 in ascending k (one FMA per k for FP32, one
//   m16n8k16 MMA per 16 k for BF16); the partials are then folded in ascending s with FP32 adds:
//   total = p0 + p1 + ... ; the epilogue (bias, activation, rounding) comes last.
// Tile shapes only decide which thread owns which output, never the order of its terms, so any
// tile configuration gives the same bits; the host code picks one by the row count.
//
// Column sums (bias gradients) use a fixed row chunk: rows [c*rc, (c+1)*rc) summed in ascending
// order from 0, chunk partials folded pairwise (colsum_fold_kernel). Same bits for the same T.
// timestep_mlp's weight gradients (reductions over T) use fixed row chunks too, folded in order.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <torch/library.h>

#include <cstdint>

namespace rlk {

using bf16 = __nv_bfloat16;

inline void check_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, what, ": CUDA launch failed: ", cudaGetErrorString(err));
}

inline int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

// Allows `kernel` `bytes` of dynamic shared memory on the current device. The attribute belongs to
// the kernel and the device, so it is set once per kernel and device (again only for more bytes).
template <auto kernel>
inline void reserve_dynamic_smem(int bytes, const char* what) {
  static int reserved[64] = {};
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 64 && reserved[device] >= bytes) return;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  TORCH_CHECK(err == cudaSuccess, what, ": cannot reserve ", bytes, " bytes of shared memory: ",
              cudaGetErrorString(err));
  if (device < 64) reserved[device] = bytes;
}

// Per-device facts the launchers need on every call, read once: SM count and opt-in shared memory.
struct DeviceFacts {
  int sms = 0, smem_optin = 0;
};
inline const DeviceFacts& device_facts() {
  static DeviceFacts facts[64];
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  TORCH_CHECK(device < 64, "rl_kernel_ops: device index ", device, " >= 64");
  DeviceFacts& f = facts[device];
  if (f.sms == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&f.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device));
  }
  return f;
}

// The shared-state-space address of a pointer into shared memory.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async (sm_80+): 16 bytes from global to shared memory (`dst` a smem_u32 address) without a
// register, in the calling thread's current group; with `valid` false it writes 16 zero bytes and
// reads nothing. cp_async_commit closes the group; cp_async_wait<N> returns once at most N of the
// thread's groups are in flight, after which the thread sees the data it copied. The "memory"
// clobbers keep the compiler from moving shared-memory reads across them.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid = true) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Activation formulas, written as ATen's CUDA kernels write them (opmath float, expf, IEEE div).
__device__ __forceinline__ float silu_f32(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float silu_grad_f32(float dy, float x) {
  const float sig = 1.0f / (1.0f + expf(-x));
  return dy * sig * (1.0f + x * (1.0f - sig));
}

// ---------------------------------------------------------------------------------------------
// Fold of split-K partials + epilogue. part: [splits][M][N] FP32. One thread per 4 columns.
enum FoldEpi : int {
  FOLD_PLAIN = 0,          // out0 = total
  FOLD_BIAS = 1,           // out0 = total + bias[n]
  FOLD_BIAS_SILU = 2,      // out0 = h = total + bias[n]; out1 = silu(h)
  FOLD_SILU_GRAD = 3,      // out0 = silu'(aux[m][n]) * total            (aux = pre-activation)
  FOLD_BF16_SILU_GRAD = 4  // out0 = silu'(aux) * float(bf16(total))     (grad through .to(bf16))
};

template <int EPI>
__global__ void fold_splits_kernel(const float* __restrict__ part, int splits, int M, int N,
                                   const float* __restrict__ bias, const float* __restrict__ aux,
                                   float* __restrict__ out0, float* __restrict__ out1) {
  const long long quads = static_cast<long long>(M) * (N / 4);
  const long long q = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q >= quads) return;
  const long long off = q * 4;
  const long long plane = static_cast<long long>(M) * N;
  float4 t = *reinterpret_cast<const float4*>(part + off);
  for (int s = 1; s < splits; ++s) {
    const float4 p = *reinterpret_cast<const float4*>(part + s * plane + off);
    t.x = __fadd_rn(t.x, p.x);
    t.y = __fadd_rn(t.y, p.y);
    t.z = __fadd_rn(t.z, p.z);
    t.w = __fadd_rn(t.w, p.w);
  }
  float v[4] = {t.x, t.y, t.z, t.w};
  const int n = static_cast<int>(off % N);
  if (EPI == FOLD_BIAS || EPI == FOLD_BIAS_SILU) {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = __fadd_rn(v[j], bias[n + j]);
  }
  if (EPI == FOLD_SILU_GRAD || EPI == FOLD_BF16_SILU_GRAD) {
    const float4 h = *reinterpret_cast<const float4*>(aux + off);
    const float hx[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float g = EPI == FOLD_BF16_SILU_GRAD ? __bfloat162float(__float2bfloat16_rn(v[j])) : v[j];
      v[j] = silu_grad_f32(g, hx[j]);
    }
  }
  *reinterpret_cast<float4*>(out0 + off) = make_float4(v[0], v[1], v[2], v[3]);
  if (EPI == FOLD_BIAS_SILU) {
    *reinterpret_cast<float4*>(out1 + off) =
        make_float4(silu_f32(v[0]), silu_f32(v[1]), silu_f32(v[2]), silu_f32(v[3]));
  }
}

template <int EPI>
inline void fold_splits(const at::Tensor& part, int splits, int M, int N, const float* bias,
                        const float* aux, float* out0, float* out1, cudaStream_t stream) {
  const long long quads = static_cast<long long>(M) * (N / 4);
  if (quads == 0) return;
  fold_splits_kernel<EPI><<<ceil_div(quads, 256), 256, 0, stream>>>(
      part.data_ptr<float>(), splits, M, N, bias, aux, out0, out1);
  check_launch("fold_splits");
}

// ---------------------------------------------------------------------------------------------
// Column sums: out[n] = pairwise_fold_c ( sum_{r in chunk c} x[r][n] ), FP32, cast once to OutT.
template <typename InT>
__device__ __forceinline__ float to_f32(InT v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f32<bf16>(bf16 v) { return __bfloat162float(v); }

template <typename InT>
__global__ void colsum_partial_kernel(const InT* __restrict__ x, float* __restrict__ part, int T,
                                      int N, int rc) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const int r0 = blockIdx.y * rc;
  const int r1 = min(T, r0 + rc);
  float acc = 0.0f;
  const InT* p = x + static_cast<long long>(r0) * N + n;
  for (int r = r0; r < r1; ++r, p += N) acc = __fadd_rn(acc, to_f32(*p));
  part[static_cast<long long>(blockIdx.y) * N + n] = acc;
}

// Pairwise fold of the chunk partials: a binary counter over the chunks (after chunk c, merge
// while c + 1 is even), then the stack folded from the top. Error grows with log2(chunks).
template <typename OutT>
__global__ void colsum_fold_kernel(const float* __restrict__ part, int chunks, int N,
                                   OutT* __restrict__ out) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float stack[32];
  int sp = 0;
  for (int c = 0; c < chunks; ++c) {
    float v = part[static_cast<long long>(c) * N + n];
    for (int k = c + 1; k % 2 == 0; k /= 2) v = __fadd_rn(stack[--sp], v);
    stack[sp++] = v;
  }
  float t = stack[--sp];
  while (sp > 0) t = __fadd_rn(stack[--sp], t);
  if constexpr (std::is_same<OutT, float>::value) {
    out[n] = t;
  } else {
    out[n] = __float2bfloat16_rn(t);
  }
}

// x: (T, N) contiguous; out: (N,) of OutT. T >= 1.
template <typename InT, typename OutT>
inline void column_sum(const at::Tensor& x, int rc, at::Tensor& out, cudaStream_t stream) {
  const int T = static_cast<int>(x.size(0));
  const int N = static_cast<int>(x.size(1));
  const int chunks = ceil_div(T, rc);
  at::Tensor part = at::empty({chunks, N}, x.options().dtype(at::kFloat));
  dim3 grid(ceil_div(N, 256), chunks);
  colsum_partial_kernel<InT><<<grid, 256, 0, stream>>>(
      reinterpret_cast<const InT*>(x.data_ptr()), part.data_ptr<float>(), T, N, rc);
  check_launch("colsum_partial");
  colsum_fold_kernel<OutT><<<ceil_div(N, 256), 256, 0, stream>>>(
      part.data_ptr<float>(), chunks, N, reinterpret_cast<OutT*>(out.data_ptr()));
  check_launch("colsum_fold");
}

}  // namespace rlk
