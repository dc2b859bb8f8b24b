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
  const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);

  auto load = [&](int k0) {
#pragma unroll
    for (int i = 0; i < LA; ++i) {
      const int f = tid + i * NT;
      ra[i] = zero4;
      if (A_F4 % NT == 0 || f < A_F4) {
        if (A_MK) {
          const int m = f / (BK / 4), gk = k0 + (f % (BK / 4)) * 4, gm = m0 + m;
          if (gm < M && gk < kend)
            ra[i] = __ldg(reinterpret_cast<const float4*>(A + static_cast<long long>(gm) * lda + gk));
        } else {
          const int gk = k0 + f / (BM / 4), gm = m0 + (f % (BM / 4)) * 4;
          if (gk < kend && gm < M)
            ra[i] = __ldg(reinterpret_cast<const float4*>(A + static_cast<long long>(gk) * lda + gm));
        }
      }
    }
#pragma unroll
    for (int i = 0; i < LB; ++i) {
      const int f = tid + i * NT;
      rb[i] = zero4;
      if (B_F4 % NT == 0 || f < B_F4) {
        if (B_NK) {
          const int n = f / (BK / 4), gk = k0 + (f % (BK / 4)) * 4, gn = n0 + n;
          if (gk < kend)
            rb[i] = __ldg(reinterpret_cast<const float4*>(B + static_cast<long long>(gn) * ldb + gk));
        } else {
          const int gk = k0 + f / (BN / 4), gn = n0 + (f % (BN / 4)) * 4;
          if (gk < kend)
            rb[i] = __ldg(reinterpret_cast<const float4*>(B + static_cast<long long>(gk) * ldb + gn));
        }
      }
    }
  };

  auto store = [&](int buf) {
#pragma unroll
    for (int i = 0; i < LA; ++i) {
      const int f = tid + i * NT;
      if (A_F4 % NT == 0 || f < A_F4) {
        if (A_MK) {
          const int m = f / (BK / 4), k = (f % (BK / 4)) * 4;
          As[buf][k + 0][m] = ra[i].x;
          As[buf][k + 1][m] = ra[i].y;
          As[buf][k + 2][m] = ra[i].z;
          As[buf][k + 3][m] = ra[i].w;
        } else {
          *reinterpret_cast<float4*>(&As[buf][f / (BM / 4)][(f % (BM / 4)) * 4]) = ra[i];
        }
      }
    }
#pragma unroll
    for (int i = 0; i < LB; ++i) {
      const int f = tid + i * NT;
      if (B_F4 % NT == 0 || f < B_F4) {
        if (B_NK) {
          const int n = f / (BK / 4), k = (f % (BK / 4)) * 4;
          Bs[buf][k + 0][n] = rb[i].x;
          Bs[buf][k + 1][n] = rb[i].y;
          Bs[buf][k + 2][n] = rb[i].z;
          Bs[buf][k + 3][n] = rb[i].w;
        } else {
          *reinterpret_cast<float4*>(&Bs[buf][f / (BN / 4)][(f % (BN / 4)) * 4]) = rb[i];
        }
      }
    }
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
#pragma unroll
      for (int r = 0; r < RM; ++r) {
        const float4 v = *reinterpret_cast<const float4*>(&As[cur][kk][r * (BM / RM) + ty * 4]);
        a[r * 4 + 0] = v.x;
        a[r * 4 + 1] = v.y;
        a[r * 4 + 2] = v.z;
        a[r * 4 + 3] = v.w;
      }
#pragma unroll
      for (int r = 0; r < RN; ++r) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][kk][r * (BN / RN) + tx * 4]);
        b[r * 4 + 0] = v.x;
        b[r * 4 + 1] = v.y;
        b[r * 4 + 2] = v.z;
        b[r * 4 + 3] = v.w;
      }
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
