// gate_residual: out = res + gate[idx] * y; res, y (S, H) bf16, gate (R, H) bf16.
//
// Forward, elementwise: out = bf16(res + bf16(gate[i] * y)) — the eager BF16 expression
// res + gate.index_select(0, idx) * y, bitwise (each eager op computes in FP32 and rounds once;
// the product of two BF16 values is exact in FP32, so it is rounded only to BF16).
// Backward (d_res is the upstream gradient itself and never reaches this file), one kernel over the
// tiles of positions stably sorted by table row (row_segments.cu):
//   - d_y = bf16(g * gate[i]) — eager autograd's MulBackward, bitwise;
//   - partial[tile] = sum of g * y (exact FP32 products) over the tile's positions in sorted order;
//     row_segment_fold then gives d_gate in FP32, cast once in Python.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "rows_common.cuh"

namespace rlk {
namespace {

constexpr int kFlatThreads = 256;
constexpr int kRowBatch = 4;

__global__ void __launch_bounds__(kFlatThreads)
    gate_residual_fwd_kernel(const uint4* __restrict__ res, const uint4* __restrict__ y,
                             const uint4* __restrict__ gate, const int64_t* __restrict__ idx,
                             int64_t vec_per_row, int64_t total, uint4* __restrict__ out) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * kFlatThreads + threadIdx.x;
  if (v >= total) return;
  const int64_t row = v / vec_per_row;
  const int64_t col = v - row * vec_per_row;
  float rf[8], yf[8], gf[8], o[8];
  unpack8(res[v], rf);
  unpack8(y[v], yf);
  unpack8(__ldg(gate + idx[row] * vec_per_row + col), gf);
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = __fadd_rn(rf[e], round_bf16(__fmul_rn(gf[e], yf[e])));
  out[v] = pack8(o);
}

__global__ void __launch_bounds__(kColThreads)
    gate_residual_bwd_kernel(const uint16_t* __restrict__ grad, const uint16_t* __restrict__ y,
                             const uint16_t* __restrict__ gate, const int64_t* __restrict__ perm,
                             const int* __restrict__ seg_start, const int* __restrict__ tile_start,
                             int segments, int tile_rows, int64_t cols, uint16_t* __restrict__ dy,
                             float* __restrict__ partials) {
  __shared__ int64_t rows_s[kMaxTileRows];
  TileRange tr;
  if (!tile_range(blockIdx.x, seg_start, tile_start, segments, tile_rows, tr)) return;
  stage_tile_rows(tr, perm, rows_s);
  const int64_t v = static_cast<int64_t>(blockIdx.y) * kColThreads + threadIdx.x;
  const int64_t nvec = cols / 8;
  if (v >= nvec) return;
  float gate_f[8], acc[8];
  unpack8(__ldg(reinterpret_cast<const uint4*>(gate + tr.segment * cols) + v), gate_f);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] = 0.f;
  const uint4* g4 = reinterpret_cast<const uint4*>(grad);
  const uint4* y4 = reinterpret_cast<const uint4*>(y);
  uint4* dy4 = reinterpret_cast<uint4*>(dy);
  const int count = tr.end - tr.begin;
  for (int j0 = 0; j0 < count; j0 += kRowBatch) {
    uint4 gv[kRowBatch], yv[kRowBatch];
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) {
      if (j0 + j < count) {
        gv[j] = g4[rows_s[j0 + j] * nvec + v];
        yv[j] = y4[rows_s[j0 + j] * nvec + v];
      }
    }
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) {
      if (j0 + j < count) {
        float gf[8], yf[8], d[8];
        unpack8(gv[j], gf);
        unpack8(yv[j], yf);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          d[e] = __fmul_rn(gf[e], gate_f[e]);
          acc[e] = __fadd_rn(acc[e], __fmul_rn(gf[e], yf[e]));
        }
        dy4[rows_s[j0 + j] * nvec + v] = pack8(d);
      }
    }
  }
  float4* p = reinterpret_cast<float4*>(partials + static_cast<int64_t>(blockIdx.x) * cols + v * 8);
  p[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  p[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
}

void check_pair(const at::Tensor& a, const at::Tensor& gate) {
  check_rows_tensor(a, "row tensor", 2, at::kBFloat16);
  check_rows_tensor(gate, "gate", 2, at::kBFloat16);
  TORCH_CHECK(a.size(1) % 8 == 0 && gate.size(1) == a.size(1), "gate_residual: H must be a multiple of 8");
}

at::Tensor gate_residual_fwd(const at::Tensor& res, const at::Tensor& y, const at::Tensor& gate,
                             const at::Tensor& idx) {
  check_pair(res, gate);
  check_pair(y, gate);
  check_rows_tensor(idx, "idx", 1, at::kLong, false);
  TORCH_CHECK(res.sizes() == y.sizes() && idx.size(0) == res.size(0), "gate_residual: shape mismatch");
  const c10::cuda::CUDAGuard guard(res.device());
  at::Tensor out = at::empty_like(res);
  const int64_t vec_per_row = res.size(1) / 8;
  const int64_t total = res.size(0) * vec_per_row;
  if (total == 0) return out;
  gate_residual_fwd_kernel<<<static_cast<unsigned>((total + kFlatThreads - 1) / kFlatThreads), kFlatThreads, 0,
                             c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint4*>(res.data_ptr()), reinterpret_cast<const uint4*>(y.data_ptr()),
      reinterpret_cast<const uint4*>(gate.data_ptr()), idx.data_ptr<int64_t>(), vec_per_row, total,
      reinterpret_cast<uint4*>(out.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::tuple<at::Tensor, at::Tensor> gate_residual_bwd(const at::Tensor& grad, const at::Tensor& y,
                                                     const at::Tensor& gate, const at::Tensor& perm,
                                                     const at::Tensor& seg_start, const at::Tensor& tile_start,
                                                     int64_t tiles, int64_t tile_rows) {
  check_pair(grad, gate);
  check_pair(y, gate);
  TORCH_CHECK(grad.sizes() == y.sizes(), "gate_residual backward: shape mismatch");
  const int64_t cols = y.size(1);
  const dim3 grid = tile_plan_grid(perm, seg_start, tile_start, y.size(0), gate.size(0), tiles, tile_rows, cols,
                                   "gate_residual backward");
  const c10::cuda::CUDAGuard guard(y.device());
  at::Tensor dy = at::empty_like(y);
  at::Tensor partials = at::empty({1, tiles, cols}, y.options().dtype(at::kFloat));
  gate_residual_bwd_kernel<<<grid, kColThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint16_t*>(grad.data_ptr()), reinterpret_cast<const uint16_t*>(y.data_ptr()),
      reinterpret_cast<const uint16_t*>(gate.data_ptr()), perm.data_ptr<int64_t>(), seg_start.data_ptr<int>(),
      tile_start.data_ptr<int>(), static_cast<int>(gate.size(0)), static_cast<int>(tile_rows), cols,
      reinterpret_cast<uint16_t*>(dy.data_ptr()), partials.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {dy, partials};
}

}  // namespace
}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def("gate_residual_fwd(Tensor res, Tensor y, Tensor gate, Tensor idx) -> Tensor");
  m.def(
      "gate_residual_bwd(Tensor grad, Tensor y, Tensor gate, Tensor perm, Tensor seg_start, Tensor tile_start, "
      "int tiles, int tile_rows) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) {
  m.impl("gate_residual_fwd", &rlk::gate_residual_fwd);
  m.impl("gate_residual_bwd", &rlk::gate_residual_bwd);
}
