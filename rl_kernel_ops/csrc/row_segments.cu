// Segmented sums of the row ops' table and parameter gradients, without atomics.
//
// Positions are stably sorted by table row (torch.sort(idx, stable=True) in Python). Segment k is
// the run of sorted positions whose table row is k; it is cut into tiles of `tile_rows` positions.
// An op's tile kernel writes one FP32 partial row per tile (positions summed in sorted order), and
// row_segment_fold adds a segment's partials in ascending tile order. Every sum has a fixed order
// that depends only on idx, so the result is the same bits on every run.
//
// Ops:
//   row_sort_plan(idx int64 (S,), segments, tile_rows) -> (perm int64 (S,), seg_start, tile_start)
//       the stable sort's permutation (torch.sort(idx, stable=True).indices) and the plan below,
//       by a counting sort (segments <= 256, S <= 65536): up to 8192 positions, one block in one
//       launch; beyond, blocks of 4096 positions in two launches, one counting each block's keys,
//       one scattering.
//   row_segment_plan(sorted_idx int64 (S,), segments, tile_rows) -> (seg_start, tile_start)
//       both int32 (segments + 1,): segment k = sorted positions [seg_start[k], seg_start[k+1]),
//       tiles [tile_start[k], tile_start[k+1]).
//   row_segment_fold(partials fp32 (Q, T, H), tile_start int32 (R + 1,)?) -> (fp32, bf16) (Q, R, H)
//       out[q, k] = (((0 + p[q, t0]) + p[q, t0 + 1]) + ...) over k's tiles; without tile_start,
//       one segment made of all T tiles (R = 1). The BF16 copy is the FP32 sum rounded to nearest
//       even, the bits of .to(torch.bfloat16), written by the same launch.
//   row_segment_fold_total(partials, tile_start?) -> (fp32, bf16) (Q, R, H), bf16 (H,)
//       row_segment_fold's two, and the last plane's sums folded over the segments in order,
//       ((0 + out[Q-1, 0]) + out[Q-1, 1]) + ..., rounded to BF16: the bits of
//       row_segment_fold(out[Q-1:Q], None)[1][0, 0], from the same launch.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "row_sort.cuh"
#include "rows_common.cuh"

namespace rlk {
namespace {

__global__ void segment_plan_kernel(const int64_t* __restrict__ sorted, int64_t n, int segments,
                                    int tile_rows, int* __restrict__ seg_start,
                                    int* __restrict__ tile_start) {
  // seg_start[k] = first sorted position whose key is >= k (binary search).
  for (int k = threadIdx.x; k <= segments; k += blockDim.x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) >> 1;
      if (sorted[mid] < k) lo = mid + 1; else hi = mid;
    }
    seg_start[k] = static_cast<int>(lo);
  }
  __syncthreads();
  if (threadIdx.x == 0) write_tile_starts(seg_start, segments, tile_rows, tile_start);
}

// ---- row_sort_plan ---------------------------------------------------------------------------
constexpr int kSortThreads = 1024, kSortWarps = kSortThreads / 32;
constexpr int kSortBlockRows = 4096;     // positions per block; kSortMaxRows makes at most 16 blocks
constexpr int kSortOneBlockRows = 8192;  // up to this many positions, one block sorts them all, in one launch

// Block b counts the keys of positions [b * kSortBlockRows, (b + 1) * kSortBlockRows):
// block_counts[b * segments + k].
__global__ void __launch_bounds__(kSortThreads)
    sort_count_kernel(const int64_t* __restrict__ idx, int n, int segments, int* __restrict__ block_counts) {
  __shared__ int next[kSortWarps][kSortMaxKeys];
  const int begin = blockIdx.x * kSortBlockRows, end = min(n, begin + kSortBlockRows);
  count_keys_by_warp<kSortWarps>(idx, begin, end, next, nullptr);  // counts only: no keys staged
  for (int k = threadIdx.x; k < segments; k += kSortThreads) {
    int sum = 0;
    for (int w = 0; w < kSortWarps; ++w) sum += next[w][k];
    block_counts[blockIdx.x * segments + k] = sum;
  }
}

// The scatter of block b over sort_count_kernel's block b's positions (row_sort.cuh), or of the
// only block (block_counts null, block_rows >= n), with the keys staged in shared memory.
__global__ void __launch_bounds__(kSortThreads)
    sort_scatter_kernel(const int64_t* __restrict__ idx, int n, int segments, int tile_rows, int block_rows,
                        const int* __restrict__ block_counts, int blocks, int64_t* __restrict__ perm,
                        int* __restrict__ seg_start, int* __restrict__ tile_start) {
  __shared__ int next[kSortWarps][kSortMaxKeys];  // counts, then each warp's next slot per key
  __shared__ int first[kSortMaxKeys];             // key k's total, then this block's first slot for k
  __shared__ uint8_t keys[kSortOneBlockRows];
  sort_positions<kSortWarps>(idx, n, segments, tile_rows, blockIdx.x, block_rows, block_counts, blocks, perm,
                             seg_start, tile_start, next, first, keys);
}

constexpr int kFoldBatch = 16;  // loads issued together; the adds stay in ascending order
constexpr int kFoldCols = 32;   // columns per block: a warp's 32 threads, one column each
constexpr int kFoldLanes = 16;  // most segment lanes (warps) per block

// ((0 + src[0]) + src[stride]) + ... over n terms, in FP32. Every batch, the last one too, issues
// all its loads before its adds (a term past n loads the last one again and is not added), so a
// thread waits for memory once per batch. `src` may have been written by this block before a
// __syncthreads, so it is read through L2 (ld.global.cg), not the read-only path.
__device__ __forceinline__ float fold_column(const float* src, int64_t stride, int n) {
  float acc = 0.f;
  for (int t = 0; t < n; t += kFoldBatch) {
    float v[kFoldBatch];
#pragma unroll
    for (int j = 0; j < kFoldBatch; ++j) v[j] = __ldcg(src + static_cast<int64_t>(min(t + j, n - 1)) * stride);
#pragma unroll
    for (int j = 0; j < kFoldBatch; ++j) {
      if (t + j < n) acc = __fadd_rn(acc, v[j]);
    }
  }
  return acc;
}

// Block (x, q): columns [32 x, 32 x + 32) of plane q, thread (c, lane) column c of the segments
// lane, lane + blockDim.y, ... With `total` (non-null), the blocks of the last plane then fold that
// plane's segment sums once more, in segment order from 0, from what the block wrote (visible after
// the __syncthreads): the bits of row_segment_fold(out[Q - 1 : Q], None), in the same launch.
__global__ void segment_fold_kernel(const float* __restrict__ partials, int64_t tiles,
                                    const int* __restrict__ tile_start, int segments, int64_t cols,
                                    float* __restrict__ out, uint16_t* __restrict__ out_bf16,
                                    uint16_t* __restrict__ total) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kFoldCols + threadIdx.x;
  const int q = blockIdx.y;
  if (col < cols) {
    for (int k = threadIdx.y; k < segments; k += blockDim.y) {
      const int t0 = tile_start == nullptr ? 0 : tile_start[k];
      const int t1 = tile_start == nullptr ? static_cast<int>(tiles) : tile_start[k + 1];
      const float acc = fold_column(partials + (q * tiles + t0) * cols + col, cols, t1 - t0);
      const int64_t at = (static_cast<int64_t>(q) * segments + k) * cols + col;
      out[at] = acc;
      out_bf16[at] = static_cast<uint16_t>(float_to_bf16_bits(acc));
    }
  }
  if (total == nullptr || q != static_cast<int>(gridDim.y) - 1) return;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    const float sum = fold_column(out + static_cast<int64_t>(q) * segments * cols + col, cols, segments);
    total[col] = static_cast<uint16_t>(float_to_bf16_bits(sum));
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> row_sort_plan(const at::Tensor& idx, int64_t segments,
                                                             int64_t tile_rows) {
  TORCH_CHECK(idx.is_cuda() && idx.scalar_type() == at::kLong && idx.dim() == 1 && idx.is_contiguous(),
              "row_sort_plan: idx must be a contiguous 1-D int64 CUDA tensor");
  check_sort_plan(idx.numel(), segments, tile_rows, "row_sort_plan");
  const c10::cuda::CUDAGuard guard(idx.device());
  at::Tensor perm = at::empty_like(idx);
  auto opts = idx.options().dtype(at::kInt);
  at::Tensor seg_start = at::empty({segments + 1}, opts);
  at::Tensor tile_start = at::empty({segments + 1}, opts);
  const int n = static_cast<int>(idx.numel());
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const bool one_block = n <= kSortOneBlockRows;
  const int blocks = one_block ? 1 : (n + kSortBlockRows - 1) / kSortBlockRows;
  at::Tensor block_counts;
  if (!one_block) {
    block_counts = at::empty({blocks, segments}, opts);
    sort_count_kernel<<<blocks, kSortThreads, 0, stream>>>(idx.data_ptr<int64_t>(), n, static_cast<int>(segments),
                                                           block_counts.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  sort_scatter_kernel<<<blocks, kSortThreads, 0, stream>>>(
      idx.data_ptr<int64_t>(), n, static_cast<int>(segments), static_cast<int>(tile_rows),
      one_block ? kSortOneBlockRows : kSortBlockRows, one_block ? nullptr : block_counts.data_ptr<int>(), blocks,
      perm.data_ptr<int64_t>(), seg_start.data_ptr<int>(), tile_start.data_ptr<int>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {perm, seg_start, tile_start};
}

std::tuple<at::Tensor, at::Tensor> row_segment_plan(const at::Tensor& sorted_idx, int64_t segments,
                                                    int64_t tile_rows) {
  TORCH_CHECK(sorted_idx.is_cuda() && sorted_idx.scalar_type() == at::kLong && sorted_idx.dim() == 1 &&
                  sorted_idx.is_contiguous(),
              "row_segment_plan: sorted_idx must be a contiguous 1-D int64 CUDA tensor");
  TORCH_CHECK(segments >= 1 && segments < (1 << 16), "row_segment_plan: segments out of range");
  TORCH_CHECK(tile_rows >= 1 && sorted_idx.numel() < (int64_t{1} << 31), "row_segment_plan: bad sizes");
  const c10::cuda::CUDAGuard guard(sorted_idx.device());
  auto opts = sorted_idx.options().dtype(at::kInt);
  at::Tensor seg_start = at::empty({segments + 1}, opts);
  at::Tensor tile_start = at::empty({segments + 1}, opts);
  segment_plan_kernel<<<1, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      sorted_idx.data_ptr<int64_t>(), sorted_idx.numel(), static_cast<int>(segments),
      static_cast<int>(tile_rows), seg_start.data_ptr<int>(), tile_start.data_ptr<int>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {seg_start, tile_start};
}

// row_segment_fold, and with `with_total` also the last plane's segment sums folded over the
// segments (row_segment_fold_total): one launch either way.
std::tuple<at::Tensor, at::Tensor, at::Tensor> segment_fold(const at::Tensor& partials,
                                                            const std::optional<at::Tensor>& tile_start,
                                                            bool with_total, const char* name) {
  TORCH_CHECK(partials.is_cuda() && partials.scalar_type() == at::kFloat && partials.dim() == 3 &&
                  partials.is_contiguous(),
              name, ": partials must be a contiguous (Q, T, H) float32 CUDA tensor");
  const int64_t q = partials.size(0), tiles = partials.size(1), cols = partials.size(2);
  int64_t segments = 1;
  const int* starts = nullptr;
  if (tile_start.has_value()) {
    TORCH_CHECK(tile_start->is_cuda() && tile_start->scalar_type() == at::kInt && tile_start->dim() == 1 &&
                    tile_start->numel() >= 2 && tile_start->is_contiguous(),
                name, ": tile_start must be a contiguous int32 CUDA tensor of R + 1 entries");
    segments = tile_start->numel() - 1;
    starts = tile_start->data_ptr<int>();
  }
  TORCH_CHECK(q >= 1 && q < 65536 && segments < 65536 && tiles < (int64_t{1} << 31),
              name, ": sizes out of range");
  const c10::cuda::CUDAGuard guard(partials.device());
  at::Tensor out = at::empty({q, segments, cols}, partials.options());
  at::Tensor out_bf16 = at::empty({q, segments, cols}, partials.options().dtype(at::kBFloat16));
  at::Tensor total = at::empty({with_total ? cols : 0}, partials.options().dtype(at::kBFloat16));
  if (cols == 0) return {out, out_bf16, total};
  const dim3 grid(static_cast<unsigned>((cols + kFoldCols - 1) / kFoldCols), static_cast<unsigned>(q));
  const dim3 block(kFoldCols, static_cast<unsigned>(std::min<int64_t>(segments, kFoldLanes)));
  segment_fold_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      partials.data_ptr<float>(), tiles, starts, static_cast<int>(segments), cols, out.data_ptr<float>(),
      reinterpret_cast<uint16_t*>(out_bf16.data_ptr()),
      with_total ? reinterpret_cast<uint16_t*>(total.data_ptr()) : nullptr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, out_bf16, total};
}

std::tuple<at::Tensor, at::Tensor> row_segment_fold(const at::Tensor& partials,
                                                    const std::optional<at::Tensor>& tile_start) {
  const auto folded = segment_fold(partials, tile_start, false, "row_segment_fold");
  return {std::get<0>(folded), std::get<1>(folded)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> row_segment_fold_total(const at::Tensor& partials,
                                                                      const std::optional<at::Tensor>& tile_start) {
  return segment_fold(partials, tile_start, true, "row_segment_fold_total");
}

}  // namespace
}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def("row_sort_plan(Tensor idx, int segments, int tile_rows) -> (Tensor, Tensor, Tensor)");
  m.def("row_segment_plan(Tensor sorted_idx, int segments, int tile_rows) -> (Tensor, Tensor)");
  m.def("row_segment_fold(Tensor partials, Tensor? tile_start) -> (Tensor, Tensor)");
  m.def("row_segment_fold_total(Tensor partials, Tensor? tile_start) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) {
  m.impl("row_sort_plan", &rlk::row_sort_plan);
  m.impl("row_segment_plan", &rlk::row_segment_plan);
  m.impl("row_segment_fold", &rlk::row_segment_fold);
  m.impl("row_segment_fold_total", &rlk::row_segment_fold_total);
}
