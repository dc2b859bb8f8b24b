// adaln_row_gather: out[s] = table[idx[s]]; table (R, C) bf16, out (S, C) bf16.
//
// Forward: a pure copy of 16-byte vectors, one block per output row (bitwise equal to
// table.index_select(0, idx)).
// Backward: partial[tile] = sum of the upstream gradient rows of the tile's positions (sorted by
// table row, FP32, in sorted order); row_segment_fold adds the tiles of each table row in ascending
// order, and Python casts the FP32 sums to BF16 once.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "rows_common.cuh"

namespace rlk {
namespace {

constexpr int kFlatThreads = 256;
constexpr int kRowBatch = 8;

// One block per output row: the table row is found once, then its 16-byte vectors are copied
// kCopyBatch at a time per thread (loads issued together, then stores).
constexpr int kCopyBatch = 4;

__global__ void __launch_bounds__(kFlatThreads)
    row_gather_fwd_kernel(const uint4* __restrict__ table, const int64_t* __restrict__ idx, int64_t vec_per_row,
                          uint4* __restrict__ out) {
  const int64_t row = blockIdx.x;
  const uint4* src = table + idx[row] * vec_per_row;
  uint4* dst = out + row * vec_per_row;
  for (int64_t c0 = threadIdx.x; c0 < vec_per_row; c0 += kFlatThreads * kCopyBatch) {
    uint4 v[kCopyBatch];
#pragma unroll
    for (int j = 0; j < kCopyBatch; ++j) {
      const int64_t c = c0 + j * kFlatThreads;
      if (c < vec_per_row) v[j] = __ldg(src + c);
    }
#pragma unroll
    for (int j = 0; j < kCopyBatch; ++j) {
      const int64_t c = c0 + j * kFlatThreads;
      if (c < vec_per_row) __stcs(dst + c, v[j]);
    }
  }
}

__global__ void __launch_bounds__(kColThreads)
    row_gather_bwd_kernel(const uint16_t* __restrict__ grad, const int64_t* __restrict__ perm,
                          const int* __restrict__ seg_start, const int* __restrict__ tile_start, int segments,
                          int tile_rows, int64_t cols, float* __restrict__ partials) {
  __shared__ int64_t rows_s[kMaxTileRows];
  TileRange tr;
  if (!tile_range(blockIdx.x, seg_start, tile_start, segments, tile_rows, tr)) return;
  stage_tile_rows(tr, perm, rows_s);
  const int64_t v = static_cast<int64_t>(blockIdx.y) * kColThreads + threadIdx.x;
  const int64_t nvec = cols / 8;
  if (v >= nvec) return;
  float acc[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] = 0.f;
  const uint4* g4 = reinterpret_cast<const uint4*>(grad);
  const int count = tr.end - tr.begin;
  for (int j0 = 0; j0 < count; j0 += kRowBatch) {
    uint4 gv[kRowBatch];
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) {
      if (j0 + j < count) gv[j] = g4[rows_s[j0 + j] * nvec + v];
    }
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) {
      if (j0 + j < count) {
        float gf[8];
        unpack8(gv[j], gf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = __fadd_rn(acc[e], gf[e]);
      }
    }
  }
  float4* p = reinterpret_cast<float4*>(partials + static_cast<int64_t>(blockIdx.x) * cols + v * 8);
  p[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  p[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
}

at::Tensor row_gather_fwd(const at::Tensor& table, const at::Tensor& idx) {
  check_rows_tensor(table, "table", 2, at::kBFloat16);
  check_rows_tensor(idx, "idx", 1, at::kLong, false);
  TORCH_CHECK(table.size(1) % 8 == 0, "adaln_row_gather: the table width must be a multiple of 8");
  const c10::cuda::CUDAGuard guard(table.device());
  at::Tensor out = at::empty({idx.size(0), table.size(1)}, table.options());
  const int64_t vec_per_row = table.size(1) / 8;
  if (idx.size(0) == 0 || vec_per_row == 0) return out;
  TORCH_CHECK(idx.size(0) < (int64_t{1} << 31), "adaln_row_gather: too many rows");
  row_gather_fwd_kernel<<<static_cast<unsigned>(idx.size(0)), kFlatThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint4*>(table.data_ptr()), idx.data_ptr<int64_t>(), vec_per_row,
      reinterpret_cast<uint4*>(out.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor row_gather_bwd_partials(const at::Tensor& grad, const at::Tensor& perm, const at::Tensor& seg_start,
                                   const at::Tensor& tile_start, int64_t tiles, int64_t tile_rows) {
  check_rows_tensor(grad, "grad", 2, at::kBFloat16);
  TORCH_CHECK(grad.size(1) % 8 == 0, "adaln_row_gather backward: the hidden size must be a multiple of 8");
  const int64_t cols = grad.size(1);
  const dim3 grid = tile_plan_grid(perm, seg_start, tile_start, grad.size(0), seg_start.size(0) - 1, tiles,
                                   tile_rows, cols, "adaln_row_gather backward");
  const c10::cuda::CUDAGuard guard(grad.device());
  at::Tensor partials = at::empty({1, tiles, cols}, grad.options().dtype(at::kFloat));
  row_gather_bwd_kernel<<<grid, kColThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint16_t*>(grad.data_ptr()), perm.data_ptr<int64_t>(), seg_start.data_ptr<int>(),
      tile_start.data_ptr<int>(), static_cast<int>(seg_start.size(0) - 1), static_cast<int>(tile_rows), cols,
      partials.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partials;
}

}  // namespace
}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def("row_gather_fwd(Tensor table, Tensor idx) -> Tensor");
  m.def(
      "row_gather_bwd_partials(Tensor grad, Tensor perm, Tensor seg_start, Tensor tile_start, int tiles, "
      "int tile_rows) -> Tensor");
}

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) {
  m.impl("row_gather_fwd", &rlk::row_gather_fwd);
  m.impl("row_gather_bwd_partials", &rlk::row_gather_bwd_partials);
}
