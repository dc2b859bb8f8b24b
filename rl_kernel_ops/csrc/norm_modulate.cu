// norm_modulate: out = rms_norm(x, w, eps) * (1 + scale[idx]) + shift[idx], x (S, H) bf16.
//
// Forward (one block of 128 threads per row, bitwise equal to the eager BF16 expression
// F.rms_norm(x, (H,), w, eps) * (1.0 + scale.index_select(0, idx)) + shift.index_select(0, idx)):
//   - sum of squares in torch's vectorized CUDA RMSNorm order: thread t takes 4-element vectors
//     t, t + 128, ... and adds their squares in order, then block_sum_torch_order; mean = sum / H;
//     rstd = rsqrtf(mean + eps) (torch: c10::cuda::compat::rsqrt, i.e. rsqrtf);
//   - n = bf16(w * (rstd * x)) in FP32 (torch's kernel writes gamma * (rstd * x) rounded once);
//   - p = bf16(1 + scale[i]), computed per element by one bf16x2 add, the bits of eager's add over
//     the table (FP32 sum, rounded to nearest even; one_plus_pair gives the argument);
//     m = bf16(n * p) by one bf16x2 multiply, the bits of eager's FP32 product rounded to BF16: n
//     and p are BF16, so that product is exact, except below 2^-126, where its rounding to FP32
//     never lands on a BF16 tie the exact product is not on (that needs 17 significant bits, or
//     (2^16 - 1) * 2^-150, whose factor 257 no 8-bit significand has); out = bf16(m + shift[i]) by
//     one bf16x2 add, as p — one rounding per eager op.
// The per-row rstd (FP32) is returned for the backward.
// norm_modulate_fwd_plan's launch has one block more, which sorts the backward's plan of idx
// (row_sort.cuh) while the others normalize rows: the backward then starts with it.
//
// Backward, with a = w * (g * p) (exact in FP32: a product of three BF16 values) and
// xhat = rstd * x:
//   - dx (row-local, one block per row): s = sum(a * x) with the statistic's thread/tree order but
//     8-element vectors; c = ((rstd * rstd) * rstd * s) / H; dx = bf16(rstd * a - x * c);
//   - partials (sorted tiles, see row_segments.cu): per tile and column, in sorted position order,
//     q0: sum g (-> d_shift), q1: sum g * n (-> d_scale), q2: sum (g * p) * xhat (-> dw).
// norm_modulate_bwd computes both in one launch: from one read of grad and x where the plan's
// tiles fill the device (the fused kernel, H <= 6144; the split kernels past it), else with
// partial blocks and dx blocks side by side (the overlapped kernel, the split kernels' code). The
// split kernels remain for a backward that needs only one side. All give the same bits: the same
// products summed in the same order.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "row_sort.cuh"
#include "rows_common.cuh"
#include "wgmma_common.cuh"

namespace rlk {
namespace {

// Rounds two FP32 values to BF16 and widens them back with one conversion instruction: the bits
// of round_bf16 on each.
__device__ __forceinline__ void round_bf16_pair(float& a, float& b) {
  widen_pair(pack2(a, b), a, b);
}

// bf16(1 + scale) of a pair of scale values (raw BF16 bits, packed), by one add.rn.bf16x2: it rounds
// the exact sum once, eager rounds it to FP32 and then to BF16, and for two BF16 operands these
// agree: the exact sum fits FP32's 24 bits unless the exponents differ by 16 or more, and then the
// smaller operand is far below half a BF16 step of the larger, so both roundings give the larger
// (an exhaustive check of every BF16 pair on the H200, docs/evidence/h200/rows_bf16x2/).
__device__ __forceinline__ __nv_bfloat162 one_plus_pair(uint32_t scale2) {
  return __hadd2_rn(__float2bfloat162_rn(1.f), as_bf16x2(scale2));
}

// p = bf16(1 + scale) for the 8 values of one 16-byte vector of a scale row, widened to FP32.
__device__ __forceinline__ void one_plus8(uint4 scale8, float p[8]) {
  const uint32_t u[4] = {scale8.x, scale8.y, scale8.z, scale8.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) widen_pair(bf16x2_bits(one_plus_pair(u[e])), p[2 * e], p[2 * e + 1]);
}

// bf16(bf16(n * p) + shift) for a pair of columns, with p = bf16(1 + scale): eager's three BF16 ops,
// each rounded once by a bf16x2 instruction (see one_plus_pair for the add, the file's header for
// the product); scale2 and shift2 are raw BF16 pairs, n is rounded to BF16 here.
__device__ __forceinline__ uint32_t modulate_pair(float n0, float n1, uint32_t scale2, uint32_t shift2) {
  const __nv_bfloat162 m = __hmul2_rn(__floats2bfloat162_rn(n0, n1), one_plus_pair(scale2));
  return bf16x2_bits(__hadd2_rn(m, as_bf16x2(shift2)));
}

// The backward's plan (row_sort.cuh) where the forward's launch sorts it: up to kFwdPlanMaxRows
// positions, their keys staged as bytes in the launch's dynamic shared memory (at most 8 KB per
// block beside the row blocks' own, so they keep their occupancy), so that the sort reads idx once
// and stays shorter than the rows' work (docs/evidence/h200/rows_fwd_plan/).
constexpr int kFwdPlanMaxRows = 8192;
struct FwdPlan {
  int64_t* perm = nullptr;  // null: no plan
  int* seg_start = nullptr;
  int* tile_start = nullptr;
  int segments = 0, tile_rows = 0;
};

// NV = most 4-element vectors one thread keeps in registers (H <= NV * 128 * 4). With Plan, block
// 0 sorts the backward's plan of idx (S bytes of dynamic shared memory), while blocks 1 ... S
// normalize rows 0 ... S - 1.
template <int NV, bool Plan>
__global__ void __launch_bounds__(kRowThreads)
    norm_modulate_fwd_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
                             const uint16_t* __restrict__ shift, const uint16_t* __restrict__ scale,
                             const int64_t* __restrict__ idx, int64_t cols, float eps,
                             uint16_t* __restrict__ out, float* __restrict__ rstd_out, FwdPlan plan) {
  if constexpr (Plan) {
    if (blockIdx.x == 0) {
      __shared__ int next[kRowThreads / 32][kSortMaxKeys];
      __shared__ int first[kSortMaxKeys];
      extern __shared__ uint8_t keys[];
      const int rows = static_cast<int>(gridDim.x) - 1;
      sort_positions<kRowThreads / 32>(idx, rows, plan.segments, plan.tile_rows, 0, rows, nullptr, 1, plan.perm,
                                       plan.seg_start, plan.tile_start, next, first, keys);
      return;
    }
  }
  __shared__ float red[4];
  const int64_t row = blockIdx.x - (Plan ? 1 : 0);
  const int nvec = static_cast<int>(cols / 4);
  const uint2* xr = reinterpret_cast<const uint2*>(x + row * cols);
  const int64_t t = idx[row];  // read with the row, not after the statistic's barrier
  uint2 xv[NV];
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int i = threadIdx.x + k * kRowThreads;
    if (i < nvec) {
      xv[k] = xr[i];
      float f[4];
      unpack4(xv[k], f);
#pragma unroll
      for (int e = 0; e < 4; ++e) acc = __fadd_rn(acc, __fmul_rn(f[e], f[e]));
    }
  }
  const float sum_sq = block_sum_torch_order(acc, red);
  const float r = rsqrtf(__fadd_rn(__fdiv_rn(sum_sq, static_cast<float>(cols)), eps));
  if (threadIdx.x == 0) rstd_out[row] = r;

  const uint2* wv = reinterpret_cast<const uint2*>(w);
  const uint2* sh = reinterpret_cast<const uint2*>(shift + t * cols);
  const uint2* sc = reinterpret_cast<const uint2*>(scale + t * cols);
  uint2* o = reinterpret_cast<uint2*>(out + row * cols);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int i = threadIdx.x + k * kRowThreads;
    if (i < nvec) {
      float xf[4], wf[4], n[4];
      unpack4(xv[k], xf);
      unpack4(__ldg(wv + i), wf);
      const uint2 shv = __ldg(sh + i), scv = __ldg(sc + i);
#pragma unroll
      for (int e = 0; e < 4; ++e) n[e] = __fmul_rn(wf[e], __fmul_rn(r, xf[e]));
      o[i] = make_uint2(modulate_pair(n[0], n[1], scv.x, shv.x), modulate_pair(n[2], n[3], scv.y, shv.y));
    }
  }
}

// a = w * (g * bf16(1 + scale)) for the 8 columns of one 16-byte vector, each product rounded to
// FP32 as eager's separate ops do; `w8` and `scale8` point at that vector of w and the scale row.
__device__ __forceinline__ void modulated_grad8(uint4 g, const uint4* w8, const uint4* scale8, float a[8]) {
  float gf[8], wf[8], p[8];
  unpack8(g, gf);
  unpack8(__ldg(w8), wf);
  one_plus8(__ldg(scale8), p);
#pragma unroll
  for (int e = 0; e < 8; ++e) a[e] = __fmul_rn(wf[e], __fmul_rn(gf[e], p[e]));
}

// dx of one row by a block of kRowThreads threads. NV = most 8-element (16-byte) vectors one
// thread keeps in registers (H <= NV * 128 * 8). The sum uses the same tree as the statistic but
// over 8-element vectors (thread t takes vectors t, t + 128, ...); reference_rows.replay_row_sum(...,
// vec=8) replays it. `table_row` is the row's idx; `red` 4 floats of shared memory. Between the two
// passes each thread needs the a of its own vectors: with KeepA it keeps them in `a_s` (H floats of
// shared memory); without, it computes them again from the g it holds in registers and w and the
// scale row read again (the same FP32 operations on the same values, so the same a). Both forms
// give the same bits; the second is faster where its launch has no shared memory to reserve for
// other blocks (docs/evidence/h200/rows_dx_regs/).
template <int NV, bool KeepA>
__device__ __forceinline__ void dx_row(const uint16_t* __restrict__ grad, const uint16_t* __restrict__ x,
                                       const float* __restrict__ rstd, const uint16_t* __restrict__ w,
                                       const uint16_t* __restrict__ scale, int64_t table_row, int64_t row,
                                       int64_t cols, uint16_t* __restrict__ dx, float* red, float4* a_s) {
  const int nvec = static_cast<int>(cols / 8);
  const uint4* gr = reinterpret_cast<const uint4*>(grad + row * cols);
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * cols);
  uint4 gv[NV], xv[NV];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int i = threadIdx.x + k * kRowThreads;
    if (i < nvec) {
      gv[k] = gr[i];
      xv[k] = xr[i];
    }
  }
  const float r = rstd[row];
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  const uint4* sc = reinterpret_cast<const uint4*>(scale + table_row * cols);
  float4* a_lo = a_s;          // elements 0-3 of vector i at a_lo[i], 4-7 at a_hi[i]
  float4* a_hi = a_s + nvec;
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int i = threadIdx.x + k * kRowThreads;
    if (i < nvec) {
      float a[8], xf[8];
      modulated_grad8(gv[k], wv + i, sc + i, a);
      unpack8(xv[k], xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc = __fadd_rn(acc, __fmul_rn(a[e], xf[e]));
      if constexpr (KeepA) {
        a_lo[i] = make_float4(a[0], a[1], a[2], a[3]);
        a_hi[i] = make_float4(a[4], a[5], a[6], a[7]);
      }
    }
  }
  const float s = block_sum_torch_order(acc, red);
  const float c = __fdiv_rn(__fmul_rn(__fmul_rn(__fmul_rn(r, r), r), s), static_cast<float>(cols));
  uint4* o = reinterpret_cast<uint4*>(dx + row * cols);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int i = threadIdx.x + k * kRowThreads;
    if (i < nvec) {
      float a[8], xf[8], d[8];
      if constexpr (KeepA) {
        const float4 lo = a_lo[i], hi = a_hi[i];
        a[0] = lo.x, a[1] = lo.y, a[2] = lo.z, a[3] = lo.w, a[4] = hi.x, a[5] = hi.y, a[6] = hi.z, a[7] = hi.w;
      } else {
        modulated_grad8(gv[k], wv + i, sc + i, a);
      }
      unpack8(xv[k], xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) d[e] = __fsub_rn(__fmul_rn(r, a[e]), __fmul_rn(xf[e], c));
      o[i] = pack8(d);
    }
  }
}

template <int NV>
__global__ void __launch_bounds__(kRowThreads, NV <= 6 ? 6 : 1)
    norm_modulate_bwd_dx_kernel(const uint16_t* __restrict__ grad, const uint16_t* __restrict__ x,
                                const float* __restrict__ rstd, const uint16_t* __restrict__ w,
                                const uint16_t* __restrict__ scale, const int64_t* __restrict__ idx,
                                int64_t cols, uint16_t* __restrict__ dx) {
  __shared__ float red[4];
  dx_row<NV, false>(grad, x, rstd, w, scale, idx[blockIdx.x], blockIdx.x, cols, dx, red, nullptr);
}

// One row's terms added, in order, to the three partial sums of one 8-column vector; wf and p
// are that vector's w and bf16(1 + scale) of the tile's table row.
__device__ __forceinline__ void add_row_partials8(uint4 g, uint4 x, float r, const float wf[8], const float p[8],
                                                  float s_shift[8], float s_scale[8], float s_w[8]) {
  float gf[8], xf[8], xhat[8], n[8];
  unpack8(g, gf);
  unpack8(x, xf);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    xhat[e] = __fmul_rn(r, xf[e]);
    n[e] = __fmul_rn(wf[e], xhat[e]);
  }
#pragma unroll
  for (int e = 0; e < 8; e += 2) round_bf16_pair(n[e], n[e + 1]);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    s_shift[e] = __fadd_rn(s_shift[e], gf[e]);
    s_scale[e] = __fadd_rn(s_scale[e], __fmul_rn(gf[e], n[e]));
    s_w[e] = __fadd_rn(s_w[e], __fmul_rn(__fmul_rn(gf[e], p[e]), xhat[e]));
  }
}

// Tile `tile`'s three sums of 8-column vector v into partials (3, tiles, cols).
__device__ __forceinline__ void store_partials8(float* __restrict__ partials, int64_t tiles, int64_t cols,
                                                int64_t tile, int64_t v, const float s_shift[8],
                                                const float s_scale[8], const float s_w[8]) {
  const auto store8 = [&](int64_t plane, const float s[8]) {
    float4* out = reinterpret_cast<float4*>(partials + plane * tiles * cols + tile * cols + v * 8);
    out[0] = make_float4(s[0], s[1], s[2], s[3]);
    out[1] = make_float4(s[4], s[5], s[6], s[7]);
  };
  store8(0, s_shift);
  store8(1, s_scale);
  store8(2, s_w);
}

// The tile's original rows and their rstd into shared memory. Every thread of the block calls it
// (it synchronizes).
__device__ __forceinline__ void stage_tile(const TileRange& tr, const int64_t* __restrict__ perm,
                                           const float* __restrict__ rstd, int64_t* rows_s, float* rstd_s) {
  stage_tile_rows(tr, perm, rows_s);
  for (int j = threadIdx.x; j < tr.end - tr.begin; j += blockDim.x) rstd_s[j] = rstd[rows_s[j]];
  __syncthreads();
}

constexpr int kRowBatch = 4;  // rows whose loads are issued together in the tile kernels
constexpr int kRingRows = 5;  // rows in flight per thread when a tile's rows stream through a ring

// Shared memory of the ring of tile_partials8<true> for blocks of `threads` threads.
constexpr int ring_bytes(int threads) { return kRingRows * 2 * threads * 16; }

// The three partial sums of 8-column vector v over tile `tile` (rows staged by stage_tile), in
// sorted position order, into partials (3, tiles, cols). The rows' vectors come in batches of
// kRowBatch loads into registers, or with Ring through `ring` (ring_bytes(blockDim.x) of shared
// memory, each thread its own slots): cp.async keeps the next kRingRows rows in flight without
// registers. The same terms are added in the same order either way.
template <bool Ring>
__device__ __forceinline__ void tile_partials8(const uint16_t* __restrict__ grad, const uint16_t* __restrict__ x,
                                               const uint16_t* __restrict__ w, const uint16_t* __restrict__ scale,
                                               const TileRange& tr, const int64_t* rows_s, const float* rstd_s,
                                               int64_t v, int64_t tiles, int64_t tile, int64_t cols,
                                               float* __restrict__ partials, uint4* ring = nullptr) {
  const int64_t nvec = cols / 8;
  float wf[8], p[8];
  unpack8(__ldg(reinterpret_cast<const uint4*>(w) + v), wf);
  one_plus8(__ldg(reinterpret_cast<const uint4*>(scale + tr.segment * cols) + v), p);
  float s_shift[8], s_scale[8], s_w[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) s_shift[e] = s_scale[e] = s_w[e] = 0.f;
  const uint4* g4 = reinterpret_cast<const uint4*>(grad);
  const uint4* x4 = reinterpret_cast<const uint4*>(x);
  const int count = tr.end - tr.begin;
  if constexpr (Ring) {
    const int t = threadIdx.x, threads = blockDim.x;
    const auto slot = [&](int j, int which) { return ring + ((j % kRingRows) * 2 + which) * threads + t; };
    const auto fetch = [&](int j) {  // row j's vectors into its slot, as one group (empty past the tile)
      if (j < count) {
        cp_async16(smem_u32(slot(j, 0)), g4 + rows_s[j] * nvec + v);
        cp_async16(smem_u32(slot(j, 1)), x4 + rows_s[j] * nvec + v);
      }
      cp_async_commit();
    };
#pragma unroll
    for (int j = 0; j < kRingRows; ++j) fetch(j);
    for (int j = 0; j < count; ++j) {
      cp_async_wait<kRingRows - 1>();  // row j's group is complete
      add_row_partials8(*slot(j, 0), *slot(j, 1), rstd_s[j], wf, p, s_shift, s_scale, s_w);
      fetch(j + kRingRows);  // into the slot just read: its values are already in use
    }
  } else {
    for (int j0 = 0; j0 < count; j0 += kRowBatch) {
      uint4 gv[kRowBatch], xv[kRowBatch];
#pragma unroll
      for (int j = 0; j < kRowBatch; ++j) {
        if (j0 + j < count) {
          gv[j] = g4[rows_s[j0 + j] * nvec + v];
          xv[j] = x4[rows_s[j0 + j] * nvec + v];
        }
      }
#pragma unroll
      for (int j = 0; j < kRowBatch; ++j) {
        if (j0 + j < count) add_row_partials8(gv[j], xv[j], rstd_s[j0 + j], wf, p, s_shift, s_scale, s_w);
      }
    }
  }
  store_partials8(partials, tiles, cols, tile, v, s_shift, s_scale, s_w);
}

__global__ void __launch_bounds__(kColThreads)
    norm_modulate_bwd_partials_kernel(const uint16_t* __restrict__ grad, const uint16_t* __restrict__ x,
                                      const float* __restrict__ rstd, const uint16_t* __restrict__ w,
                                      const uint16_t* __restrict__ scale, const int64_t* __restrict__ perm,
                                      const int* __restrict__ seg_start, const int* __restrict__ tile_start,
                                      int segments, int tile_rows, int64_t tiles, int64_t cols,
                                      float* __restrict__ partials) {
  __shared__ int64_t rows_s[kMaxTileRows];
  __shared__ float rstd_s[kMaxTileRows];
  TileRange tr;
  if (!tile_range(blockIdx.x, seg_start, tile_start, segments, tile_rows, tr)) return;
  stage_tile(tr, perm, rstd, rows_s, rstd_s);
  const int64_t v = static_cast<int64_t>(blockIdx.y) * kColThreads + threadIdx.x;  // 8-column vector
  if (v < cols / 8)
    tile_partials8<false>(grad, x, w, scale, tr, rows_s, rstd_s, v, tiles, blockIdx.x, cols, partials);
}

// ---- overlapped backward -----------------------------------------------------------------------
// One launch of two kinds of kRowThreads-thread blocks, for rows too few to fill the GPU with the
// fused kernel's one block per tile. The first tiles * col_blocks blocks compute the tile partials
// (tile_partials8, the row's vectors spread evenly, at most 128 per block); the rest compute dx,
// one row each (dx_row). The dx blocks take the rows by position within the tile first (block b:
// row b / tiles of tile b % tiles), the order in which the partial blocks walk their tiles, so a
// row's two reads come close together. With `ring`, the partial blocks stream their rows through
// tile_partials8's shared-memory ring, which shortens their chains of row loads where few of them
// share the device with the dx blocks (overlap_ring); the dx blocks then keep a in that memory
// (KeepA: the launch reserves the larger of the two), else they reserve none. Each output has the
// bits of the split kernels: the same per-thread code.
template <int NV, bool KeepA>
__global__ void __launch_bounds__(kRowThreads, NV <= 6 ? 6 : 1)
    norm_modulate_bwd_overlap_kernel(const uint16_t* __restrict__ grad, const uint16_t* __restrict__ x,
                                     const float* __restrict__ rstd, const uint16_t* __restrict__ w,
                                     const uint16_t* __restrict__ scale, const int64_t* __restrict__ perm,
                                     const int* __restrict__ seg_start, const int* __restrict__ tile_start,
                                     int segments, int tile_rows, int64_t tiles, int64_t cols, int col_blocks,
                                     bool ring, uint16_t* __restrict__ dx, float* __restrict__ partials) {
  __shared__ int64_t rows_s[kMaxTileRows];
  __shared__ float rstd_s[kMaxTileRows];
  __shared__ float red[4];
  extern __shared__ float4 a_s[];  // a partial block's ring, or with KeepA a dx block's a
  const int64_t tile_blocks = tiles * col_blocks;
  TileRange tr;
  if (blockIdx.x < tile_blocks) {
    const int tile = static_cast<int>(blockIdx.x / col_blocks);
    if (!tile_range(tile, seg_start, tile_start, segments, tile_rows, tr)) return;
    stage_tile(tr, perm, rstd, rows_s, rstd_s);
    const int per_block = static_cast<int>((cols / 8 + col_blocks - 1) / col_blocks);
    const int64_t v = static_cast<int64_t>(blockIdx.x % col_blocks) * per_block + threadIdx.x;
    if (threadIdx.x < per_block && v < cols / 8) {
      if (ring)
        tile_partials8<true>(grad, x, w, scale, tr, rows_s, rstd_s, v, tiles, tile, cols, partials,
                             reinterpret_cast<uint4*>(a_s));
      else
        tile_partials8<false>(grad, x, w, scale, tr, rows_s, rstd_s, v, tiles, tile, cols, partials);
    }
    return;
  }
  const int64_t b = blockIdx.x - tile_blocks;
  if (!tile_range(static_cast<int>(b % tiles), seg_start, tile_start, segments, tile_rows, tr)) return;
  const int j = static_cast<int>(b / tiles);
  if (tr.begin + j >= tr.end) return;
  dx_row<NV, KeepA>(grad, x, rstd, w, scale, tr.segment, perm[tr.begin + j], cols, dx, red, a_s);
}

// ---- fused backward ----------------------------------------------------------------------------
// One block per tile of the plan and one thread per 8-column vector (blockDim = the row's vectors
// rounded up to whole warps, at least 128). The tile's rows stream, in sorted order, through a ring
// of `depth` shared-memory slots (a grad row, then an x row), each filled by two bulk copies and
// guarded by a "full" mbarrier (bytes) and an "empty" one (one arrival per warp). For every row:
//   - every thread adds the row's terms to its vector's three partial sums (add_row_partials8, the
//     order of norm_modulate_bwd_partials_kernel);
//   - quad j % quads (warps 4u .. 4u + 3; a warp past the last whole quad only adds partials)
//     computes the row's dx: its warp q plays the split kernel's warp q, lane l the thread 32q + l
//     with its FP32 chain over vectors 32q + l + 128k, ascending, then the warp tree; the 4 warp
//     sums meet in shared memory behind the quad's named barrier and add as (w0 + w2) + (w1 + w3),
//     block_sum_torch_order's tree; so dx has the split kernel's bits without a block-wide barrier;
//   - after its arrival on "empty", the quad's warp 0 refills the slot with row j + depth.
constexpr int kFusedMaxThreads = 768;         // H <= 6144: one 8-column vector per thread
constexpr int kFusedMaxDepth = 8;
constexpr int kFusedSmemLimit = 227 * 1024;   // sm_90's opt-in shared memory per block

constexpr int kFusedMaxQuads = kFusedMaxThreads / 128;

// Shared memory of the fused kernel: the ring, w and p rows, the tile's rows and rstd, mbarriers,
// and two sets of 4 warp sums per quad.
inline int64_t fused_smem_bytes(int64_t cols, int depth) {
  return (depth + 1) * 4 * cols + kMaxTileRows * (8 + 4) + 2 * depth * 8 + kFusedMaxQuads * 2 * 4 * 4;
}

// Ring depth for rows of `cols` columns: the most slots (at most kFusedMaxDepth) that fit; 0 where
// the fused kernel does not apply (more vectors than threads, or fewer than 2 slots).
inline int fused_depth(int64_t cols) {
  if (cols / 8 > kFusedMaxThreads) return 0;
  int depth = kFusedMaxDepth;
  while (depth >= 2 && fused_smem_bytes(cols, depth) > kFusedSmemLimit) --depth;
  return depth >= 2 ? depth : 0;
}

// dx of one row by the 4 warps of a quad (see above): warp q keeps the chain of the split kernel's
// threads 32q + lane, over vectors 32q + lane + 128k, ascending, and its warp tree; `sums` (4 floats
// of shared memory) gathers the four warp sums behind named barrier `bar` of the quad's 128 threads.
// Rows in shared memory, w and p as BF16 vectors.
__device__ __forceinline__ void dx_row_by_quad(const uint4* g_row, const uint4* x_row, const uint4* w_s,
                                               const uint4* p_s, int nvec, int64_t cols, float r, int q, int lane,
                                               float* sums, int bar, uint4* __restrict__ out) {
  const auto unpack_terms = [&](int i, float gf[8], float xf[8], float wf[8], float pf[8]) {
    unpack8(g_row[i], gf);
    unpack8(x_row[i], xf);
    unpack8(w_s[i], wf);
    unpack8(p_s[i], pf);
  };
  float acc = 0.f;
  for (int i = 32 * q + lane; i < nvec; i += 128) {
    float gf[8], xf[8], wf[8], pf[8];
    unpack_terms(i, gf, xf, wf, pf);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(wf[e], __fmul_rn(gf[e], pf[e])), xf[e]));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) acc = __fadd_rn(acc, __shfl_down_sync(0xffffffffu, acc, offset));
  if (lane == 0) sums[q] = acc;
  sm90::named_barrier(bar, 128);
  const float s = __fadd_rn(__fadd_rn(sums[0], sums[2]), __fadd_rn(sums[1], sums[3]));
  const float c = __fdiv_rn(__fmul_rn(__fmul_rn(__fmul_rn(r, r), r), s), static_cast<float>(cols));
  for (int i = 32 * q + lane; i < nvec; i += 128) {
    float gf[8], xf[8], wf[8], pf[8], d[8];
    unpack_terms(i, gf, xf, wf, pf);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float a = __fmul_rn(wf[e], __fmul_rn(gf[e], pf[e]));
      d[e] = __fsub_rn(__fmul_rn(r, a), __fmul_rn(xf[e], c));
    }
    out[i] = pack8(d);
  }
}

__global__ void __launch_bounds__(kFusedMaxThreads, 1)
    norm_modulate_bwd_kernel(const uint16_t* __restrict__ grad, const uint16_t* __restrict__ x,
                             const float* __restrict__ rstd, const uint16_t* __restrict__ w,
                             const uint16_t* __restrict__ scale, const int64_t* __restrict__ perm,
                             const int* __restrict__ seg_start, const int* __restrict__ tile_start,
                             int segments, int tile_rows, int64_t tiles, int64_t cols, int depth,
                             uint16_t* __restrict__ dx, float* __restrict__ partials) {
  TileRange tr;
  if (!tile_range(blockIdx.x, seg_start, tile_start, segments, tile_rows, tr)) return;
  extern __shared__ __align__(16) uint8_t smem[];
  const int64_t row_bytes = 2 * cols;
  const int nvec = static_cast<int>(cols / 8);
  uint8_t* ring = smem;
  uint4* w_s = reinterpret_cast<uint4*>(smem + depth * 2 * row_bytes);
  uint4* p_s = w_s + nvec;
  int64_t* rows_s = reinterpret_cast<int64_t*>(p_s + nvec);
  float* rstd_s = reinterpret_cast<float*>(rows_s + kMaxTileRows);
  uint64_t* full = reinterpret_cast<uint64_t*>(rstd_s + kMaxTileRows);
  uint64_t* empty = full + depth;
  float* quad_sums = reinterpret_cast<float*>(empty + depth);  // [quad][2][4]
  const int count = tr.end - tr.begin;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quads = warps / 4, quad = warp / 4, q = warp % 4;
  const auto load_row = [&](int64_t r, int slot) {  // original row r into ring slot `slot`
    uint8_t* dst = ring + slot * 2 * row_bytes;
    uint64_t* bar = &full[slot];
    sm90::mbar_arrive_expect_tx(bar, static_cast<uint32_t>(2 * row_bytes));
    sm90::bulk_load_1d(dst, grad + r * cols, static_cast<uint32_t>(row_bytes), bar);
    sm90::bulk_load_1d(dst + row_bytes, x + r * cols, static_cast<uint32_t>(row_bytes), bar);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < depth; ++s) {
      sm90::mbar_init(&full[s], 1);
      sm90::mbar_init(&empty[s], warps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int j = 0; j < min(depth, count); ++j) load_row(perm[tr.begin + j], j);
  }
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t r = perm[tr.begin + j];
    rows_s[j] = r;
    rstd_s[j] = rstd[r];
  }
  const int v = threadIdx.x;  // this thread's 8-column vector of the partial sums
  float wf[8], p[8];
  if (v < nvec) {
    const uint4 wv = __ldg(reinterpret_cast<const uint4*>(w) + v);
    unpack8(wv, wf);
    one_plus8(__ldg(reinterpret_cast<const uint4*>(scale + tr.segment * cols) + v), p);
    w_s[v] = wv;
    p_s[v] = pack8(p);
  }
  __syncthreads();
  float s_shift[8], s_scale[8], s_w[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) s_shift[e] = s_scale[e] = s_w[e] = 0.f;
  // Row j sits in slot j % depth, in the slot's (j / depth)-th use (parity), and its dx belongs to
  // quad j % quads; all three are kept as counters (no division per row). A quad's dx rows use its
  // two sets of warp sums in turn (`sums_set`): a warp writes a set again only after the quad's
  // next barrier, which its partners reach after reading that set.
  int slot = 0, dx_quad_of_row = 0, sums_set = 0;
  uint32_t parity = 0;
  for (int j = 0; j < count; ++j) {
    sm90::mbar_wait(&full[slot], parity);
    const uint4* g_row = reinterpret_cast<const uint4*>(ring + slot * 2 * row_bytes);
    const uint4* x_row = reinterpret_cast<const uint4*>(ring + slot * 2 * row_bytes + row_bytes);
    if (v < nvec) add_row_partials8(g_row[v], x_row[v], rstd_s[j], wf, p, s_shift, s_scale, s_w);
    const bool dx_quad = dx_quad_of_row == quad;
    if (dx_quad) {
      dx_row_by_quad(g_row, x_row, w_s, p_s, nvec, cols, rstd_s[j], q, lane, quad_sums + (quad * 2 + sums_set) * 4,
                     1 + quad, reinterpret_cast<uint4*>(dx + rows_s[j] * cols));
      sums_set ^= 1;
    }
    __syncwarp();
    if (lane == 0) {
      sm90::mbar_arrive(&empty[slot]);
      if (dx_quad && q == 0 && j + depth < count) {
        sm90::mbar_wait(&empty[slot], parity);
        load_row(rows_s[j + depth], slot);
      }
    }
    if (++slot == depth) {
      slot = 0;
      parity ^= 1;
    }
    if (++dx_quad_of_row == quads) dx_quad_of_row = 0;
  }
  if (v < nvec) store_partials8(partials, tiles, cols, blockIdx.x, v, s_shift, s_scale, s_w);
}

// Launches kernel<NV> for the smallest instantiated NV that holds a row of `cols` columns as
// `vec`-element vectors spread over kRowThreads threads. Three sizes keep the build short:
// H <= 2048, H <= 6144 (MiniMax-H3's 5376), H <= 16384.
template <template <int> class Launch, int kVec, typename... Args>
void dispatch_nv(int64_t cols, Args&&... args) {
  constexpr int kSmall = 2048 / (kRowThreads * kVec), kMid = 6144 / (kRowThreads * kVec),
                kLarge = 16384 / (kRowThreads * kVec);
  const int64_t per_thread = (cols / kVec + kRowThreads - 1) / kRowThreads;
  if (per_thread <= kSmall) Launch<kSmall>::run(args...);
  else if (per_thread <= kMid) Launch<kMid>::run(args...);
  else if (per_thread <= kLarge) Launch<kLarge>::run(args...);
  else TORCH_CHECK(false, "norm_modulate: H = ", cols, " exceeds the supported maximum of 16384");
}

template <int NV>
struct FwdLaunch {
  static void run(int64_t rows, const at::Tensor& x, const at::Tensor& w, const at::Tensor& shift,
                  const at::Tensor& scale, const at::Tensor& idx, float eps, at::Tensor& out, at::Tensor& rstd,
                  const FwdPlan& plan) {
    const bool sorts = plan.perm != nullptr;
    const auto kernel = sorts ? norm_modulate_fwd_kernel<NV, true> : norm_modulate_fwd_kernel<NV, false>;
    const int keys_bytes = sorts ? static_cast<int>((rows + 15) / 16 * 16) : 0;
    kernel<<<static_cast<unsigned>(rows + (sorts ? 1 : 0)), kRowThreads, keys_bytes,
             c10::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const uint16_t*>(x.data_ptr()), reinterpret_cast<const uint16_t*>(w.data_ptr()),
        reinterpret_cast<const uint16_t*>(shift.data_ptr()), reinterpret_cast<const uint16_t*>(scale.data_ptr()),
        idx.data_ptr<int64_t>(), x.size(1), eps, reinterpret_cast<uint16_t*>(out.data_ptr()),
        rstd.data_ptr<float>(), plan);
  }
};

template <int NV>
struct DxLaunch {
  static void run(int64_t rows, const at::Tensor& grad, const at::Tensor& x, const at::Tensor& rstd,
                  const at::Tensor& w, const at::Tensor& scale, const at::Tensor& idx, at::Tensor& dx) {
    norm_modulate_bwd_dx_kernel<NV><<<static_cast<unsigned>(rows), kRowThreads, 0,
                                      c10::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const uint16_t*>(grad.data_ptr()), reinterpret_cast<const uint16_t*>(x.data_ptr()),
        rstd.data_ptr<float>(), reinterpret_cast<const uint16_t*>(w.data_ptr()),
        reinterpret_cast<const uint16_t*>(scale.data_ptr()), idx.data_ptr<int64_t>(), x.size(1),
        reinterpret_cast<uint16_t*>(dx.data_ptr()));
  }
};

// Partial blocks per tile in the overlapped kernel: the row's 8-column vectors, at most kRowThreads
// per block.
inline int overlap_col_blocks(int64_t cols) { return static_cast<int>((cols / 8 + kRowThreads - 1) / kRowThreads); }

template <int NV>
struct OverlapLaunch {
  static void run(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& rstd, const at::Tensor& w,
                  const at::Tensor& scale, const at::Tensor& perm, const at::Tensor& seg_start,
                  const at::Tensor& tile_start, int64_t tiles, int64_t tile_rows, bool ring, at::Tensor& dx,
                  at::Tensor& partials) {
    const int64_t cols = x.size(1);
    const int col_blocks = overlap_col_blocks(cols);
    const int64_t blocks = tiles * col_blocks + tiles * tile_rows;
    // With the ring the dx blocks keep a in the shared memory the launch reserves anyway.
    const auto kernel = ring ? norm_modulate_bwd_overlap_kernel<NV, true> : norm_modulate_bwd_overlap_kernel<NV, false>;
    const int smem = ring ? std::max(static_cast<int>(cols) * 4, ring_bytes(kRowThreads)) : 0;
    if (ring) reserve_dynamic_smem<norm_modulate_bwd_overlap_kernel<NV, true>>(smem, "norm_modulate backward");
    kernel<<<static_cast<unsigned>(blocks), kRowThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const uint16_t*>(grad.data_ptr()), reinterpret_cast<const uint16_t*>(x.data_ptr()),
        rstd.data_ptr<float>(), reinterpret_cast<const uint16_t*>(w.data_ptr()),
        reinterpret_cast<const uint16_t*>(scale.data_ptr()), perm.data_ptr<int64_t>(), seg_start.data_ptr<int>(),
        tile_start.data_ptr<int>(), static_cast<int>(scale.size(0)), static_cast<int>(tile_rows), tiles, cols,
        col_blocks, ring, reinterpret_cast<uint16_t*>(dx.data_ptr()), partials.data_ptr<float>());
  }
};

// Which kernel computes dx and the partials (`variant` 1: the fused kernel, the split pair past
// H = 6144; 2: the overlapped kernel; 3: the overlapped kernel with its partial blocks' ring; 0:
// chosen here). All give the same bits. The overlapped kernel serves plans whose tiles (`tiles`,
// an upper bound) are too few for the fused kernel's one block per tile to fill the device: fewer
// than three quarters of its multiprocessors (measured on the H200: docs/evidence/h200/rows_overlap/).
inline bool overlap_backward(int64_t tiles, int64_t variant) {
  TORCH_CHECK(variant >= 0 && variant <= 3, "norm_modulate backward: variant must be 0, 1, 2 or 3");
  if (variant != 0) return variant >= 2;
  return tiles * 4 < int64_t{device_facts().sms} * 3;
}

// Whether the overlapped kernel's partial blocks use the ring: where the plan's tile slots (`tiles`,
// an upper bound) make at most two partial blocks per multiprocessor. On the H200 at H = 5376 the
// ring took 1024 and 2048 rows (19 and 36 tiles, up to 216 partial blocks) from 26.0 to 22.5 and
// from 36.8 to 31.9 us, and 3000 to 4097 rows (53 to 68 tiles) from 40.3 to 45.2 and from 56.2 to
// 64.2 us (docs/evidence/h200/rows_partials/).
inline bool overlap_ring(int64_t tiles, int64_t cols, int64_t variant) {
  if (variant != 0) return variant == 3;
  return tiles * overlap_col_blocks(cols) <= 2 * int64_t{device_facts().sms};
}

void check_common(const at::Tensor& x, const at::Tensor& w, const at::Tensor& scale) {
  check_rows_tensor(x, "x", 2, at::kBFloat16);
  check_rows_tensor(w, "w", 1, at::kBFloat16);
  check_rows_tensor(scale, "scale", 2, at::kBFloat16);
  TORCH_CHECK(x.size(1) % 8 == 0 && w.size(0) == x.size(1) && scale.size(1) == x.size(1),
              "norm_modulate: H must be a multiple of 8 and match w and the tables");
  TORCH_CHECK(x.size(0) < (int64_t{1} << 31), "norm_modulate: too many rows");
}

void check_forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& shift, const at::Tensor& scale,
                   const at::Tensor& idx) {
  check_common(x, w, scale);
  check_rows_tensor(shift, "shift", 2, at::kBFloat16);
  check_rows_tensor(idx, "idx", 1, at::kLong, false);
  TORCH_CHECK(shift.sizes() == scale.sizes() && idx.size(0) == x.size(0), "norm_modulate: shape mismatch");
}

// out and rstd; with plan.perm, the same launch also sorts the plan.
std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& shift,
                                           const at::Tensor& scale, const at::Tensor& idx, double eps,
                                           const FwdPlan& plan) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t rows = x.size(0);
  at::Tensor out = at::empty_like(x);
  at::Tensor rstd = at::empty({rows}, x.options().dtype(at::kFloat));
  if (rows == 0) return {out, rstd};
  dispatch_nv<FwdLaunch, 4>(x.size(1), rows, x, w, shift, scale, idx, static_cast<float>(eps), out, rstd, plan);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, rstd};
}

std::tuple<at::Tensor, at::Tensor> norm_modulate_fwd(const at::Tensor& x, const at::Tensor& w,
                                                     const at::Tensor& shift, const at::Tensor& scale,
                                                     const at::Tensor& idx, double eps) {
  check_forward(x, w, shift, scale, idx);
  return forward(x, w, shift, scale, idx, eps, FwdPlan{});
}

// norm_modulate_fwd's out and rstd (the same bits) and row_sort_plan(idx, R, tile_rows)'s plan (the
// same permutation and starts), from one launch: 1 <= S <= kFwdPlanMaxRows, R <= 256.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> norm_modulate_fwd_plan(
    const at::Tensor& x, const at::Tensor& w, const at::Tensor& shift, const at::Tensor& scale,
    const at::Tensor& idx, double eps, int64_t tile_rows) {
  check_forward(x, w, shift, scale, idx);
  const int64_t rows = x.size(0), most = kFwdPlanMaxRows;
  TORCH_CHECK(rows >= 1 && rows <= most, "norm_modulate_fwd_plan: 1 to ", most, " rows, not ", rows);
  check_sort_plan(rows, scale.size(0), tile_rows, "norm_modulate_fwd_plan");
  at::Tensor perm = at::empty_like(idx);
  at::Tensor seg_start = at::empty({scale.size(0) + 1}, idx.options().dtype(at::kInt));
  at::Tensor tile_start = at::empty_like(seg_start);
  FwdPlan plan;
  plan.perm = perm.data_ptr<int64_t>();
  plan.seg_start = seg_start.data_ptr<int>();
  plan.tile_start = tile_start.data_ptr<int>();
  plan.segments = static_cast<int>(scale.size(0));
  plan.tile_rows = static_cast<int>(tile_rows);
  auto [out, rstd] = forward(x, w, shift, scale, idx, eps, plan);
  return {out, rstd, perm, seg_start, tile_start};
}

at::Tensor norm_modulate_bwd_dx(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& rstd,
                                const at::Tensor& w, const at::Tensor& scale, const at::Tensor& idx) {
  check_common(x, w, scale);
  check_rows_tensor(grad, "grad", 2, at::kBFloat16);
  check_rows_tensor(rstd, "rstd", 1, at::kFloat, false);
  check_rows_tensor(idx, "idx", 1, at::kLong, false);
  TORCH_CHECK(grad.sizes() == x.sizes() && rstd.size(0) == x.size(0) && idx.size(0) == x.size(0),
              "norm_modulate backward: shape mismatch");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t rows = x.size(0);
  at::Tensor dx = at::empty_like(x);
  if (rows == 0) return dx;
  dispatch_nv<DxLaunch, 8>(x.size(1), rows, grad, x, rstd, w, scale, idx, dx);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dx;
}

// The checks of a backward that reads the tile plan (the partials kernel and the fused one), and
// the partials kernel's grid (tile_plan_grid).
dim3 check_tile_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& rstd, const at::Tensor& w,
                         const at::Tensor& scale, const at::Tensor& perm, const at::Tensor& seg_start,
                         const at::Tensor& tile_start, int64_t tiles, int64_t tile_rows) {
  check_common(x, w, scale);
  check_rows_tensor(grad, "grad", 2, at::kBFloat16);
  check_rows_tensor(rstd, "rstd", 1, at::kFloat, false);
  TORCH_CHECK(grad.sizes() == x.sizes() && rstd.size(0) == x.size(0), "norm_modulate backward: shape mismatch");
  return tile_plan_grid(perm, seg_start, tile_start, x.size(0), scale.size(0), tiles, tile_rows, x.size(1),
                        "norm_modulate backward");
}

at::Tensor norm_modulate_bwd_partials(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& rstd,
                                      const at::Tensor& w, const at::Tensor& scale, const at::Tensor& perm,
                                      const at::Tensor& seg_start, const at::Tensor& tile_start, int64_t tiles,
                                      int64_t tile_rows) {
  const dim3 grid = check_tile_backward(grad, x, rstd, w, scale, perm, seg_start, tile_start, tiles, tile_rows);
  const int64_t cols = x.size(1);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor partials = at::empty({3, tiles, cols}, x.options().dtype(at::kFloat));
  norm_modulate_bwd_partials_kernel<<<grid, kColThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint16_t*>(grad.data_ptr()), reinterpret_cast<const uint16_t*>(x.data_ptr()),
      rstd.data_ptr<float>(), reinterpret_cast<const uint16_t*>(w.data_ptr()),
      reinterpret_cast<const uint16_t*>(scale.data_ptr()), perm.data_ptr<int64_t>(), seg_start.data_ptr<int>(),
      tile_start.data_ptr<int>(), static_cast<int>(scale.size(0)), static_cast<int>(tile_rows), tiles, cols,
      partials.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partials;
}

std::tuple<at::Tensor, at::Tensor> norm_modulate_bwd(const at::Tensor& grad, const at::Tensor& x,
                                                     const at::Tensor& rstd, const at::Tensor& w,
                                                     const at::Tensor& scale, const at::Tensor& idx,
                                                     const at::Tensor& perm, const at::Tensor& seg_start,
                                                     const at::Tensor& tile_start, int64_t tiles, int64_t tile_rows,
                                                     int64_t variant) {
  const int64_t cols = x.size(1);
  const int depth = fused_depth(cols);
  const bool overlap = overlap_backward(tiles, variant);
  if (!overlap && depth == 0) {
    return {norm_modulate_bwd_dx(grad, x, rstd, w, scale, idx),
            norm_modulate_bwd_partials(grad, x, rstd, w, scale, perm, seg_start, tile_start, tiles, tile_rows)};
  }
  const dim3 grid = check_tile_backward(grad, x, rstd, w, scale, perm, seg_start, tile_start, tiles, tile_rows);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor dx = at::empty_like(x);
  at::Tensor partials = at::empty({3, tiles, cols}, x.options().dtype(at::kFloat));
  if (overlap) {
    dispatch_nv<OverlapLaunch, 8>(cols, grad, x, rstd, w, scale, perm, seg_start, tile_start, tiles, tile_rows,
                                  overlap_ring(tiles, cols, variant), dx, partials);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {dx, partials};
  }
  const int64_t smem = fused_smem_bytes(cols, depth);
  reserve_dynamic_smem<norm_modulate_bwd_kernel>(kFusedSmemLimit, "norm_modulate backward");
  const int threads = std::max(128, (static_cast<int>(cols / 8) + 31) / 32 * 32);
  norm_modulate_bwd_kernel<<<grid.x, threads, smem, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint16_t*>(grad.data_ptr()), reinterpret_cast<const uint16_t*>(x.data_ptr()),
      rstd.data_ptr<float>(), reinterpret_cast<const uint16_t*>(w.data_ptr()),
      reinterpret_cast<const uint16_t*>(scale.data_ptr()), perm.data_ptr<int64_t>(), seg_start.data_ptr<int>(),
      tile_start.data_ptr<int>(), static_cast<int>(scale.size(0)), static_cast<int>(tile_rows), tiles, cols, depth,
      reinterpret_cast<uint16_t*>(dx.data_ptr()), partials.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {dx, partials};
}

}  // namespace
}  // namespace rlk

TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m) {
  m.def("norm_modulate_fwd(Tensor x, Tensor w, Tensor shift, Tensor scale, Tensor idx, float eps) -> (Tensor, Tensor)");
  m.def(
      "norm_modulate_fwd_plan(Tensor x, Tensor w, Tensor shift, Tensor scale, Tensor idx, float eps, int tile_rows) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("norm_modulate_bwd_dx(Tensor grad, Tensor x, Tensor rstd, Tensor w, Tensor scale, Tensor idx) -> Tensor");
  m.def(
      "norm_modulate_bwd_partials(Tensor grad, Tensor x, Tensor rstd, Tensor w, Tensor scale, Tensor perm, "
      "Tensor seg_start, Tensor tile_start, int tiles, int tile_rows) -> Tensor");
  m.def(
      "norm_modulate_bwd(Tensor grad, Tensor x, Tensor rstd, Tensor w, Tensor scale, Tensor idx, Tensor perm, "
      "Tensor seg_start, Tensor tile_start, int tiles, int tile_rows, int variant=0) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(rl_kernel_ops, CUDA, m) {
  m.impl("norm_modulate_fwd", &rlk::norm_modulate_fwd);
  m.impl("norm_modulate_fwd_plan", &rlk::norm_modulate_fwd_plan);
  m.impl("norm_modulate_bwd_dx", &rlk::norm_modulate_bwd_dx);
  m.impl("norm_modulate_bwd_partials", &rlk::norm_modulate_bwd_partials);
  m.impl("norm_modulate_bwd", &rlk::norm_modulate_bwd);
}
