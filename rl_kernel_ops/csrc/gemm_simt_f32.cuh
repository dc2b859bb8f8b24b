// FP32 SIMT GEMM (no TF32, no tensor cores) with the fixed split-K order of gemm_common.cuh:
//   part[s][m][n] = sum_{k in chunk s, ascending} A(m, k) * B(k, n)   (one fmaf per k, from 0)
// A(m, k) is A[m*lda + k] when A_MK (K contiguous) else A[k*lda + m];
// B(k, n) is B[n*ldb + k] when B_NK (K contiguous) else B[k*ldb + n].
// Shared-memory tiles As[k][m], Bs[k][n] (double buffered, register prefetch of the next tile);
// each thread owns a TM x TN block made of 4x4 pieces spread over the tile (conflict-free float4
// reads). Rows beyond M and k beyond the chunk end read as zero; N must be a multiple of BN.
#pragma once

#include "gemm_common.cuh"

namespace rlk {

// This thread's share of one operand tile of ROWS rows (M or N) by BK k, read from global memory
// into L float4 registers (NT threads): element (r, k) is src[r * ld + k] when K_CONTIG, else
// src[k * ld + r]. Rows at or past `rows` and k at or past `kend` read as zero.
template <int ROWS, int BK, int NT, int L, bool K_CONTIG>
__device__ __forceinline__ void simt_load_tile(float4 (&reg)[L], const float* __restrict__ src, int ld, int r0,
                                               int rows, int k0, int kend) {
  constexpr int F4 = ROWS * BK / 4;
#pragma unroll
  for (int i = 0; i < L; ++i) {
    const int f = threadIdx.x + i * NT;
    reg[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (F4 % NT == 0 || f < F4) {
      if constexpr (K_CONTIG) {
        const int gr = r0 + f / (BK / 4), gk = k0 + (f % (BK / 4)) * 4;
        if (gr < rows && gk < kend)
          reg[i] = __ldg(reinterpret_cast<const float4*>(src + static_cast<long long>(gr) * ld + gk));
      } else {
        const int gk = k0 + f / (ROWS / 4), gr = r0 + (f % (ROWS / 4)) * 4;
        if (gk < kend && gr < rows)
          reg[i] = __ldg(reinterpret_cast<const float4*>(src + static_cast<long long>(gk) * ld + gr));
      }
    }
  }
}

// Those registers into the shared tile s[k][r] (rows padded to W).
template <int ROWS, int BK, int NT, int L, int W, bool K_CONTIG>
__device__ __forceinline__ void simt_store_tile(float (&s)[BK][W], const float4 (&reg)[L]) {
  constexpr int F4 = ROWS * BK / 4;
#pragma unroll
  for (int i = 0; i < L; ++i) {
    const int f = threadIdx.x + i * NT;
    if (F4 % NT == 0 || f < F4) {
      if constexpr (K_CONTIG) {
        const int r = f / (BK / 4), k = (f % (BK / 4)) * 4;
        s[k + 0][r] = reg[i].x;
        s[k + 1][r] = reg[i].y;
        s[k + 2][r] = reg[i].z;
        s[k + 3][r] = reg[i].w;
      } else {
        *reinterpret_cast<float4*>(&s[f / (ROWS / 4)][(f % (ROWS / 4)) * 4]) = reg[i];
      }
    }
  }
}

// The R 4-wide pieces this thread owns in one k-row of a shared tile: piece p starts at row
// p * (ROWS / R) + lane * 4.
template <int R, int ROWS, int W>
__device__ __forceinline__ void simt_fragment(float (&out)[4 * R], const float (&row)[W], int lane) {
#pragma unroll
  for (int p = 0; p < R; ++p) {
    const float4 v = *reinterpret_cast<const float4*>(&row[p * (ROWS / R) + lane * 4]);
    out[p * 4 + 0] = v.x;
    out[p * 4 + 1] = v.y;
    out[p * 4 + 2] = v.z;
    out[p * 4 + 3] = v.w;
  }
}

template <int BM, int BN, int BK, int TM, int TN, bool A_MK, bool B_NK>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), (BM / TM) * (BN / TN) >= 256 ? 2 : 1)
    simt_gemm_kernel(const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C, int M, int N, int K, int kchunk, int lda, int ldb,
                     long long c_split_stride) {
  constexpr int NT = (BM / TM) * (BN / TN);
  constexpr int TX = BN / TN;
  constexpr int RM = TM / 4, RN = TN / 4;
  constexpr int AS = BM + 4, BS = BN + 4;
  constexpr int A_F4 = BM * BK / 4, B_F4 = BN * BK / 4;
  constexpr int LA = (A_F4 + NT - 1) / NT, LB = (B_F4 + NT - 1) / NT;
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "4-wide pieces");

  __shared__ __align__(16) float As[2][BK][AS];
  __shared__ __align__(16) float Bs[2][BK][BS];

  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int kbeg = blockIdx.z * kchunk;
  const int kend = min(K, kbeg + kchunk);
  const int nk = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;

  float4 ra[LA], rb[LB];
  auto load = [&](int k0) {
    simt_load_tile<BM, BK, NT, LA, A_MK>(ra, A, lda, m0, M, k0, kend);
    simt_load_tile<BN, BK, NT, LB, B_NK>(rb, B, ldb, n0, N, k0, kend);
  };
  auto store = [&](int buf) {
    simt_store_tile<BM, BK, NT, LA, AS, A_MK>(As[buf], ra);
    simt_store_tile<BN, BK, NT, LB, BS, B_NK>(Bs[buf], rb);
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  if (nk > 0) {
    load(kbeg);
    store(0);
  }
  __syncthreads();
  for (int kt = 0; kt < nk; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < nk;
    if (more) load(kbeg + (kt + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
      simt_fragment<RM, BM>(a, As[cur][kk], ty);
      simt_fragment<RN, BN>(b, Bs[cur][kk], tx);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
    if (more) store(cur ^ 1);
    __syncthreads();
  }

  float* out = C + blockIdx.z * c_split_stride;
#pragma unroll
  for (int r = 0; r < RM; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int gm = m0 + r * (BM / RM) + ty * 4 + i;
      if (gm >= M) continue;
#pragma unroll
      for (int c = 0; c < RN; ++c) {
        const int gn = n0 + c * (BN / RN) + tx * 4;
        const float* s = &acc[r * 4 + i][c * 4];
        *reinterpret_cast<float4*>(out + static_cast<long long>(gm) * N + gn) =
            make_float4(s[0], s[1], s[2], s[3]);
      }
    }
}

// Launch one configuration: grid (N/BN, ceil(M/BM), ceil(K/kchunk)). C is [splits][M][N].
template <int BM, int BN, int BK, int TM, int TN, bool A_MK, bool B_NK>
inline void simt_gemm_launch(const float* A, const float* B, float* C, int M, int N, int K,
                             int kchunk, int lda, int ldb, cudaStream_t stream) {
  TORCH_CHECK(N % BN == 0, "simt_gemm: N=", N, " is not a multiple of the tile width ", BN);
  TORCH_CHECK(kchunk > 0 && ((A_MK || B_NK) ? kchunk % 4 == 0 : true), "simt_gemm: bad K chunk ",
              kchunk);
  dim3 grid(N / BN, ceil_div(M, BM), ceil_div(K, kchunk));
  simt_gemm_kernel<BM, BN, BK, TM, TN, A_MK, B_NK><<<grid, (BM / TM) * (BN / TN), 0, stream>>>(
      A, B, C, M, N, K, kchunk, lda, ldb, static_cast<long long>(M) * N);
  check_launch("simt_gemm");
}

// Tile configuration by row count; every configuration gives the same bits (see the header).
// K is cut into chunks of kchunk (the last one may be shorter); C holds one M x N plane per chunk.
template <bool A_MK, bool B_NK>
inline void simt_gemm(const float* A, const float* B, float* C, int M, int N, int K, int kchunk,
                      int lda, int ldb, cudaStream_t stream) {
  if (M <= 16) {
    simt_gemm_launch<16, 128, 32, 4, 4, A_MK, B_NK>(A, B, C, M, N, K, kchunk, lda, ldb, stream);
  } else if (M <= 256) {
    simt_gemm_launch<32, 128, 16, 4, 8, A_MK, B_NK>(A, B, C, M, N, K, kchunk, lda, ldb, stream);
  } else {
    simt_gemm_launch<128, 128, 8, 8, 8, A_MK, B_NK>(A, B, C, M, N, K, kchunk, lda, ldb, stream);
  }
}

}  // namespace rlk
