// BF16 tensor-core GEMM (mma.sync m16n8k16, FP32 accumulators) with the fixed split-K order of
// gemm_common.cuh: chunk s of output (m, n) is one chain of MMAs over ascending 16-wide k steps,
// starting from 0. A(m, k) is A[m*lda + k] when A_MK else A[k*lda + m]; B(k, n) is B[n*ldb + k]
// when B_NK else B[k*ldb + n]. Tiles of BK = 32 move with cp.async into a STAGES-deep ring of
// XOR-swizzled shared-memory buffers and are read with ldmatrix (.trans for M/N-contiguous
// operands). Rows beyond M and k beyond the chunk end read as zero; N must be a multiple of BN.
//
// Epilogues: EPI_F32 writes the FP32 chunk sums to C[s][m][n]; EPI_BF16 writes
// bf16(total + float(bias[n])) (bias optional), one rounding.
#pragma once

#include "gemm_common.cuh"

namespace rlk {

enum MmaEpi : int { EPI_F32 = 0, EPI_BF16 = 1 };

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

constexpr int MMA_BK = 32;

// Offsets (in elements) inside one stage's tile.
// K-contiguous tile [rows][32]: four 16-byte chunks per row, chunk c stored at c ^ ((row>>1)&3).
__device__ __forceinline__ int off_kmajor(int row, int c) {
  return row * MMA_BK + ((c ^ ((row >> 1) & 3)) << 3);
}
// Row-contiguous tile [32][W] (W >= 64): chunk c of k-row k stored at c ^ (k & 7).
template <int W>
__device__ __forceinline__ int off_rowmajor(int k, int c) {
  return k * W + ((c ^ (k & 7)) << 3);
}

// One stage's copy of an operand tile of ROWS rows (M or N) by MMA_BK k, stored k-contiguous in
// global memory (element (r, k) at src[r * ld + k]); NT threads issue 16-byte cp.async copies, and
// rows at or past `rows` or k at or past `kend` read as zero.
template <int ROWS, int NT>
__device__ __forceinline__ void load_tile_kmajor(bf16* dst, const bf16* src, int ld, int r0, int rows, int k0,
                                                 int kend) {
  for (int id = threadIdx.x; id < ROWS * (MMA_BK / 8); id += NT) {
    const int row = id / (MMA_BK / 8), c = id % (MMA_BK / 8);
    const int gr = r0 + row, gk = k0 + c * 8;
    const bool v = gr < rows && gk < kend;
    cp_async16(smem_u32(dst + off_kmajor(row, c)), v ? src + static_cast<long long>(gr) * ld + gk : src, v);
  }
}

// The same tile stored row-contiguous in global memory (element (r, k) at src[k * ld + r]).
template <int ROWS, int NT>
__device__ __forceinline__ void load_tile_rowmajor(bf16* dst, const bf16* src, int ld, int r0, int rows, int k0,
                                                   int kend) {
  constexpr int CPR = ROWS / 8;  // 16-byte chunks per k-row
  for (int id = threadIdx.x; id < MMA_BK * CPR; id += NT) {
    const int k = id / CPR, c = id % CPR;
    const int gk = k0 + k, gr = r0 + c * 8;
    const bool v = gk < kend && gr < rows;
    cp_async16(smem_u32(dst + off_rowmajor<ROWS>(k, c)), v ? src + static_cast<long long>(gk) * ld + gr : src, v);
  }
}

template <int BM, int BN, int WM, int WN, int STAGES, bool A_MK, bool B_NK, int EPI>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
    mma_gemm_kernel(const bf16* __restrict__ A, const bf16* __restrict__ B, void* __restrict__ C,
                    const bf16* __restrict__ bias, int M, int N, int K, int kchunk, int lda,
                    int ldb, int ldc, long long c_split_stride) {
  constexpr int BK = MMA_BK;
  constexpr int WARPS_N = BN / WN;
  constexpr int NT = (BM / WM) * WARPS_N * 32;
  constexpr int MI = WM / 16, NI = WN / 8;
  constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK;
  static_assert(NI % 2 == 0, "B fragments load in pairs of n8 tiles");
  static_assert(A_MK || BM >= 64, "row-major A tile needs BM >= 64 for the swizzle");
  static_assert(B_NK || BN >= 64, "row-major B tile needs BN >= 64 for the swizzle");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* sA = reinterpret_cast<bf16*>(smem_raw);
  bf16* sB = sA + STAGES * A_ELEMS;

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int kbeg = blockIdx.z * kchunk;
  const int kend = min(K, kbeg + kchunk);
  const int nk = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;

  auto load_stage = [&](int stage, int k0) {
    bf16* a_dst = sA + stage * A_ELEMS;
    bf16* b_dst = sB + stage * B_ELEMS;
    if constexpr (A_MK) load_tile_kmajor<BM, NT>(a_dst, A, lda, m0, M, k0, kend);
    else load_tile_rowmajor<BM, NT>(a_dst, A, lda, m0, M, k0, kend);
    if constexpr (B_NK) load_tile_kmajor<BN, NT>(b_dst, B, ldb, n0, N, k0, kend);
    else load_tile_rowmajor<BN, NT>(b_dst, B, ldb, n0, N, k0, kend);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) load_stage(s, kbeg + s * BK);
    cp_async_commit();
  }

  const int q = lane >> 3, r8 = lane & 7;
  for (int kt = 0; kt < nk; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      const int nx = kt + STAGES - 1;
      if (nx < nk) load_stage(nx % STAGES, kbeg + nx * BK);
      cp_async_commit();
    }
    const bf16* a_st = sA + (kt % STAGES) * A_ELEMS;
    const bf16* b_st = sB + (kt % STAGES) * B_ELEMS;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[MI][4];
      uint32_t bfr[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        if (A_MK) {
          const int row = wm0 + mi * 16 + (lane & 15);
          const int c = (kk >> 3) + (lane >> 4);
          ldmatrix_x4(af[mi], smem_u32(a_st + off_kmajor(row, c)));
        } else {
          const int k = kk + r8 + ((q >> 1) << 3);
          const int c = (wm0 + mi * 16 + ((q & 1) << 3)) >> 3;
          ldmatrix_x4_trans(af[mi], smem_u32(a_st + off_rowmajor<BM>(k, c)));
        }
      }
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        uint32_t t4[4];
        if (B_NK) {
          const int n = wn0 + nj * 16 + r8 + ((lane >> 4) << 3);
          const int c = (kk >> 3) + ((lane >> 3) & 1);
          ldmatrix_x4(t4, smem_u32(b_st + off_kmajor(n, c)));
        } else {
          const int k = kk + r8 + ((q & 1) << 3);
          const int c = (wn0 + nj * 16 + ((q >> 1) << 3)) >> 3;
          ldmatrix_x4_trans(t4, smem_u32(b_st + off_rowmajor<BN>(k, c)));
        }
        bfr[2 * nj][0] = t4[0];
        bfr[2 * nj][1] = t4[1];
        bfr[2 * nj + 1][0] = t4[2];
        bfr[2 * nj + 1][1] = t4[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_bf16_16816(acc[mi][ni], af[mi], bfr[ni][0], bfr[ni][1]);
    }
  }
  cp_async_wait<0>();

  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int col = n0 + wn0 + ni * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm0 + mi * 16 + g + 8 * h;
        if (row >= M) continue;
        float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
        if (EPI == EPI_F32) {
          float* out = reinterpret_cast<float*>(C) + blockIdx.z * c_split_stride;
          *reinterpret_cast<float2*>(out + static_cast<long long>(row) * ldc + col) =
              make_float2(v0, v1);
        } else {
          if (bias != nullptr) {
            v0 = __fadd_rn(v0, __bfloat162float(bias[col]));
            v1 = __fadd_rn(v1, __bfloat162float(bias[col + 1]));
          }
          bf16* out = reinterpret_cast<bf16*>(C);
          *reinterpret_cast<__nv_bfloat162*>(out + static_cast<long long>(row) * ldc + col) =
              __floats2bfloat162_rn(v0, v1);
        }
      }
    }
}

template <int BM, int BN, int WM, int WN, int STAGES, bool A_MK, bool B_NK, int EPI>
inline void mma_gemm_launch(const bf16* A, const bf16* B, void* C, const bf16* bias, int M, int N,
                            int K, int splits, int lda, int ldb, int ldc, cudaStream_t stream) {
  TORCH_CHECK(N % BN == 0, "mma_gemm: N=", N, " is not a multiple of the tile width ", BN);
  TORCH_CHECK(splits == 1 || K % (splits * MMA_BK) == 0, "mma_gemm: K=", K,
              " does not split in ", splits, " chunks of whole 32-wide tiles");
  constexpr auto kernel = mma_gemm_kernel<BM, BN, WM, WN, STAGES, A_MK, B_NK, EPI>;
  constexpr int smem = STAGES * (BM + BN) * MMA_BK * static_cast<int>(sizeof(bf16));
  reserve_dynamic_smem<kernel>(smem, "mma_gemm");
  const int kchunk = splits == 1 ? K : K / splits;
  dim3 grid(N / BN, ceil_div(M, BM), splits);
  kernel<<<grid, (BM / WM) * (BN / WN) * 32, smem, stream>>>(
      A, B, C, bias, M, N, K, kchunk, lda, ldb, ldc, static_cast<long long>(M) * ldc);
  check_launch("mma_gemm");
}

// Tile configuration by row count (M); every configuration gives the same bits.
template <bool A_MK, bool B_NK, int EPI>
inline void mma_gemm_by_rows(const bf16* A, const bf16* B, void* C, const bf16* bias, int M, int N,
                             int K, int splits, int lda, int ldb, int ldc, cudaStream_t stream) {
  if (M <= 16) {
    mma_gemm_launch<16, 128, 16, 32, 6, A_MK, B_NK, EPI>(A, B, C, bias, M, N, K, splits, lda, ldb,
                                                         ldc, stream);
  } else if (M <= 128) {
    mma_gemm_launch<64, 128, 32, 64, 4, A_MK, B_NK, EPI>(A, B, C, bias, M, N, K, splits, lda, ldb,
                                                         ldc, stream);
  } else {
    mma_gemm_launch<128, 128, 64, 64, 4, A_MK, B_NK, EPI>(A, B, C, bias, M, N, K, splits, lda,
                                                          ldb, ldc, stream);
  }
}

}  // namespace rlk
