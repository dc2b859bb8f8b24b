// Shared device helpers of the row ops (norm_modulate, gate_residual, adaln_row_gather).
//
// Rounding is always explicit: every FP32 product and sum goes through __fmul_rn / __fadd_rn /
// __fsub_rn / __fdiv_rn, so nvcc cannot contract a multiply and an add into one FMA and the
// PyTorch reference (reference_rows.py) can replay each step with separately rounded tensor ops.
// BF16 values travel as raw uint16_t bit patterns; widening to FP32 is exact (a 16-bit shift) and
// narrowing is round-to-nearest-even (__float2bfloat16_rn), which is what torch's casts do.
#pragma once

#include <ATen/ATen.h>
#include <cuda_bf16.h>

#include <cstdint>

namespace rlk {

// Threads per row block in the row kernels. With 4-element (8-byte) vectors assigned round-robin
// to threads, this is the layout of torch's vectorized CUDA RMSNorm kernel (blocks of 32 x 4).
constexpr int kRowThreads = 128;
// Threads per block in the column (segmented-sum) kernels; each thread owns 8 columns.
constexpr int kColThreads = 256;

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits16) {
  return __uint_as_float(bits16 << 16);
}

__device__ __forceinline__ uint32_t float_to_bf16_bits(float f) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(f)));
}

// Round an FP32 value to the nearest BF16 and widen it back: one eager BF16 op's rounding.
__device__ __forceinline__ float round_bf16(float f) {
  return bf16_bits_to_float(float_to_bf16_bits(f));
}

// A BF16 pair (raw bits, the low element in the low half) widened to two FP32 values, exactly.
__device__ __forceinline__ void widen_pair(uint32_t u, float& lo, float& hi) {
  lo = __uint_as_float(u << 16);
  hi = __uint_as_float(u & 0xffff0000u);
}

// 4 BF16 values in 8 bytes (element 0 in the low half of .x).
__device__ __forceinline__ void unpack4(uint2 u, float f[4]) {
  widen_pair(u.x, f[0], f[1]);
  widen_pair(u.y, f[2], f[3]);
}

// A BF16 pair as its 32 raw bits (the low element in the low half), and back.
__device__ __forceinline__ uint32_t bf16x2_bits(__nv_bfloat162 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ __nv_bfloat162 as_bf16x2(uint32_t u) {
  return *reinterpret_cast<const __nv_bfloat162*>(&u);
}

// Two FP32 values rounded to BF16 by one paired conversion (element a in the low half): the bits
// of float_to_bf16_bits on each, NaN included (docs/evidence/h200/rows_bf16x2/).
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  return bf16x2_bits(__floats2bfloat162_rn(a, b));
}

__device__ __forceinline__ uint2 pack4(const float f[4]) {
  return make_uint2(pack2(f[0], f[1]), pack2(f[2], f[3]));
}

// 8 BF16 values in 16 bytes.
__device__ __forceinline__ void unpack8(uint4 u, float f[8]) {
  unpack4(make_uint2(u.x, u.y), f);
  unpack4(make_uint2(u.z, u.w), f + 4);
}

__device__ __forceinline__ uint4 pack8(const float f[8]) {
  const uint2 lo = pack4(f);
  const uint2 hi = pack4(f + 4);
  return make_uint4(lo.x, lo.y, hi.x, hi.y);
}

// Sum of one value per thread over a block of kRowThreads (= 4 warps) threads, in the order of
// torch's vectorized RMSNorm statistic: a shuffle-down tree within each warp (offsets 16..1, lane 0
// keeps the warp's sum), then warps 2 and 3 fold into warps 0 and 1, then warp 1 into warp 0:
// total = (w0 + w2) + (w1 + w3). Every thread gets the total. `smem` holds 4 floats and must not
// be reused by the caller before a __syncthreads().
__device__ __forceinline__ float block_sum_torch_order(float v, float* smem) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  return __fadd_rn(__fadd_rn(smem[0], smem[2]), __fadd_rn(smem[1], smem[3]));
}

// Positions [begin, end) of the stably sorted order that make up one tile of a segmented sum.
struct TileRange {
  int segment;
  int begin;
  int end;
};

// Tile `tile` of the plan made by row_segment_plan: segment k owns tiles
// [tile_start[k], tile_start[k+1]) and sorted positions [seg_start[k], seg_start[k+1]); its j-th
// tile covers tile_rows positions from seg_start[k] + j * tile_rows (the last one fewer).
// Returns false for a tile slot past the last tile (the grid is sized by an upper bound).
__device__ __forceinline__ bool tile_range(int tile, const int* __restrict__ seg_start,
                                           const int* __restrict__ tile_start, int segments,
                                           int tile_rows, TileRange& out) {
  if (tile >= tile_start[segments]) return false;
  int lo = 0, hi = segments - 1;  // find the last k with tile_start[k] <= tile
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (tile_start[mid] <= tile) lo = mid; else hi = mid - 1;
  }
  out.segment = lo;
  out.begin = seg_start[lo] + (tile - tile_start[lo]) * tile_rows;
  out.end = min(out.begin + tile_rows, seg_start[lo + 1]);
  return true;
}

// Host-side guard for the kernels' assumptions. The Python wrappers (cuda_rows.py) validate first
// and raise TypeError/ValueError; these checks only stop a direct torch.ops call from launching on
// inputs the kernels cannot read safely.
inline void check_rows_tensor(const at::Tensor& t, const char* name, int64_t dims, at::ScalarType dtype,
                              bool vector_access = true) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == dtype, name, " has the wrong dtype");
  TORCH_CHECK(t.dim() == dims, name, " has the wrong number of dimensions");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
  TORCH_CHECK(!vector_access || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, name,
              " must be 16-byte aligned");
}

// Most positions in one tile (the Python side uses TILE_ROWS = 64).
constexpr int kMaxTileRows = 64;

// Host-side check of a tile plan (cuda_rows._plan: perm, seg_start, tile_start) over `rows`
// positions and `segments` table rows, and the grid of the tile kernels that read it: one block
// per tile slot (`tiles`, an upper bound) and per kColThreads 8-column vectors of `cols`.
inline dim3 tile_plan_grid(const at::Tensor& perm, const at::Tensor& seg_start, const at::Tensor& tile_start,
                           int64_t rows, int64_t segments, int64_t tiles, int64_t tile_rows, int64_t cols,
                           const char* what) {
  check_rows_tensor(perm, "perm", 1, at::kLong, false);
  check_rows_tensor(seg_start, "seg_start", 1, at::kInt, false);
  check_rows_tensor(tile_start, "tile_start", 1, at::kInt, false);
  TORCH_CHECK(segments >= 1 && perm.size(0) == rows && seg_start.size(0) == segments + 1 &&
                  tile_start.size(0) == segments + 1,
              what, ": tile plan shape mismatch");
  TORCH_CHECK(tiles >= 1 && tiles < (int64_t{1} << 31) && tile_rows >= 1 && tile_rows <= kMaxTileRows,
              what, ": bad tiles");
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>((cols / 8 + kColThreads - 1) / kColThreads));
}

// Copies a tile's original row numbers into shared memory, so the column loop of a tile kernel
// issues only independent loads. Every thread of the block must call it (it synchronizes).
__device__ __forceinline__ void stage_tile_rows(const TileRange& tr, const int64_t* __restrict__ perm,
                                                int64_t* rows_s) {
  for (int j = threadIdx.x; j < tr.end - tr.begin; j += blockDim.x) rows_s[j] = perm[tr.begin + j];
  __syncthreads();
}

}  // namespace rlk
