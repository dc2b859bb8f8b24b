// Hopper (sm_90a) BF16 GEMMs for adaln_projection's backward, on the TMA /
// mbarrier / wgmma pieces of wgmma_common.cuh:
//   dgrad  part[s] (T, D) = dout (T, N) @ w (N, D) over k chunk s of N   (FP32 partials, split-K)
//   wgrad  dw (N, D)      = bf16(dout^T (N, T) @ a (T, D))                (one chain over all T)
// A is K-major (dout in dgrad) or MN-major (dout^T in wgrad); B is MN-major in both (w and a are
// row-major with the output column contiguous). wgmma reads MN-major operands through its
// transpose bits.
//
// Summation order: the mma.sync kernels' (gemm_common.cuh, gemm_mma_bf16.cuh). Output (m, n) of
// split s is one chain of wgmma m64nNk16 over the split's 16-wide k steps in ascending order,
// accumulating into registers that start at +0.0f; dgrad's splits are then folded in ascending
// order by fold_splits, as after the mma.sync kernels; wgrad is one chain over all T rows, ascending, rounded
// to BF16 once. k past the end (T not a multiple of 64 in wgrad) reads as zero through TMA's
// out-of-bounds fill: extra all-zero 16-wide steps add +0 to the chain. The tile shape chosen
// for T and the order tiles are visited in change no output's terms: rows of d_temb are
// batch-invariant and every result is deterministic, with no atomics.
//
// Structure: persistent CTAs (as many as fit) walk the tile list with a stride. Warpgroup 0's
// first thread is the producer: it streams 64-wide k slices of both operands with TMA (128-byte
// swizzle; MN-major operands as 64-element-wide boxes of 64 k rows, one per 64 columns) into a
// STAGES-deep ring guarded by full/empty mbarriers, running ahead across tile boundaries.
// Warpgroups 1..BM/64 are consumers, each owning 64 rows of the BM x BN tile. dgrad's FP32
// partials are stored from registers; wgrad's BF16 tile goes through shared memory and a TMA
// store, so the consumers start the next tile while it drains.
#pragma once

#include <algorithm>
#include <initializer_list>

#include "wgmma_common.cuh"

namespace rlk {
namespace wgmma_bwd {

using namespace sm90;

template <int BN, int TA>
__device__ __forceinline__ void wgmma_step(float (&d)[BN / 2], uint64_t da, uint64_t db) {
  if constexpr (BN == 64) {
    wgmma_m64n64k16<TA, 1>(d, da, db);
  } else if constexpr (BN == 128) {
    wgmma_m64n128k16<TA, 1>(d, da, db);
  } else {
    static_assert(BN == 192, "BN must be 64, 128 or 192");
    wgmma_m64n192k16<TA, 1>(d, da, db);
  }
}

enum BwdEpi : int {
  BWD_F32 = 0,   // FP32 partials stored from registers
  BWD_BF16 = 1   // BF16, staged in shared memory and stored by TMA
};

template <int BM, int BN, int STAGES, int EPI>
struct BwdConfig {
  static constexpr int CONSUMERS = BM / 64;
  static constexpr int THREADS = 128 * (CONSUMERS + 1);
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BN * BK * 2;
  // BF16 epilogue: each consumer warpgroup stages its 64 x BN block as BN / 64 swizzled boxes.
  static constexpr int OUT_BYTES = EPI == BWD_BF16 ? BM * BN * 2 : 0;
  // ring, staging, then 2 * STAGES mbarriers, plus slack to align the base to 1024 bytes
  static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + OUT_BYTES + 2 * STAGES * 8 + 1024;
};

// C (M, N) [+ split s * split_stride] = A (M, K) @ B (K, N) over the k slices of split s.
// map_a: K-major (A_MN = false; box 64 k x BM rows) or MN-major (box 64 m x 64 k); map_b:
// MN-major (box 64 n x 64 k); map_c: C in 64 x 64 boxes (BF16 epilogue only; the FP32 one stores
// from registers and ignores it). Each split covers kslices 64-wide slices; tiles are numbered
// split-major, then row tiles fastest (n_fastest = false: CTAs running together share B) or
// column tiles fastest (true: they share A); the launcher picks the order (tile_order).
//
// BF16 epilogue: a consumer warpgroup rounds its accumulators into its staging boxes (the 128-byte
// swizzle, so the 32 lanes of a store hit 32 banks), and one thread hands them to TMA and moves
// on to the next tile while the copy drains; before writing the boxes again it waits until that
// copy has read them. The values are the same roundings the direct stores made.
template <int BM, int BN, int STAGES, bool A_MN, int EPI, int MINB>
__global__ void __launch_bounds__(BwdConfig<BM, BN, STAGES, EPI>::THREADS, MINB)
    wgmma_bwd_gemm_kernel(const __grid_constant__ CUtensorMap map_a,
                          const __grid_constant__ CUtensorMap map_b,
                          const __grid_constant__ CUtensorMap map_c, void* __restrict__ C, int M,
                          int N, int kslices, int splits, int ldc, long long split_stride,
                          bool n_fastest) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = BwdConfig<BM, BN, STAGES, EPI>;
  constexpr int TA = A_MN ? 1 : 0;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  unsigned char* sA = base;
  unsigned char* sB = base + STAGES * Cfg::A_BYTES;
  unsigned char* sOut = sB + STAGES * Cfg::B_BYTES;
  uint64_t* full = reinterpret_cast<uint64_t*>(sOut + Cfg::OUT_BYTES);
  uint64_t* empty = full + STAGES;

  const int tiles_m = (M + BM - 1) / BM, tiles_n = N / BN;
  const int per_split = tiles_m * tiles_n;
  const int tiles = per_split * splits;
  auto tile_origin = [&](int t, int& s, int& m0, int& n0) {
    s = t / per_split;
    const int r = t - s * per_split;
    if (n_fastest) {
      m0 = (r / tiles_n) * BM;
      n0 = (r % tiles_n) * BN;
    } else {
      n0 = (r / tiles_m) * BN;
      m0 = (r % tiles_m) * BM;
    }
  };

  if (threadIdx.x == 0) {
    tma_prefetch_map(&map_a);
    tma_prefetch_map(&map_b);
    if constexpr (EPI == BWD_BF16) tma_prefetch_map(&map_c);
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], Cfg::CONSUMERS * 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if (threadIdx.x == 0) {
      uint32_t it = 0;  // slices issued so far, over all tiles
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int s, m0, n0;
        tile_origin(t, s, m0, n0);
        for (int kt = 0; kt < kslices; ++kt, ++it) {
          const int st = it % STAGES;
          const int k0 = (s * kslices + kt) * BK;
          mbar_wait(&empty[st], ((it / STAGES) & 1) ^ 1);
          mbar_arrive_expect_tx(&full[st], Cfg::A_BYTES + Cfg::B_BYTES);
          unsigned char* a_dst = sA + st * Cfg::A_BYTES;
          if constexpr (A_MN) {
#pragma unroll
            for (int i = 0; i < BM / BOX; ++i)
              tma_load_2d(a_dst + i * BOX_BYTES, &map_a, m0 + i * BOX, k0, &full[st]);
          } else {
            tma_load_2d(a_dst, &map_a, k0, m0, &full[st]);
          }
          unsigned char* b_dst = sB + st * Cfg::B_BYTES;
#pragma unroll
          for (int j = 0; j < BN / BOX; ++j)
            tma_load_2d(b_dst + j * BOX_BYTES, &map_b, n0 + j * BOX, k0, &full[st]);
        }
      }
    }
  } else {
    // Consumer warpgroup c owns rows [m0 + 64c, m0 + 64c + 64): the c-th 8 KB block of the A
    // stage in either layout (64 K-major rows of 128 bytes, or the c-th 64-wide MN block).
    const int c = wg - 1;
    const bool leader = (threadIdx.x & 127) == 0;
    const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
    const int g = lane >> 2, q = lane & 3;
    unsigned char* stage = sOut + c * (BN / BOX) * BOX_BYTES;
    uint32_t it = 0;
    float acc[BN / 2];
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int s, m0, n0;
      tile_origin(t, s, m0, n0);
      accumulate_tile<STAGES>(
          acc, full, it, kslices,
          [&](float (&d)[BN / 2], int slot) {
            const unsigned char* a_tile = sA + slot * Cfg::A_BYTES + c * BOX_BYTES;
            const uint64_t da = A_MN ? desc_mn_major_sw128(a_tile) : desc_k_major_sw128(a_tile);
            const uint64_t db = desc_mn_major_sw128(sB + slot * Cfg::B_BYTES);
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk)
              wgmma_step<BN, TA>(d, da + (A_MN ? 128 : 2) * kk, db + 128 * kk);
          },
          [&](int slot) {
            if (lane == 0) mbar_arrive(&empty[slot]);
          });

      // Accumulator 4j + {0,1} is (row g, columns 8j + 2q + {0,1}) of the warp's 16 rows,
      // 4j + {2,3} the same columns 8 rows down.
      if constexpr (EPI == BWD_F32) {
        float* out = reinterpret_cast<float*>(C) + s * split_stride;
        const int row0 = m0 + c * 64 + warp * 16 + g;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = n0 + 8 * j + 2 * q;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h;
            if (row < M)
              *reinterpret_cast<float2*>(out + static_cast<long long>(row) * ldc + col) =
                  make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
          }
        }
      } else {
        if (leader) tma_store_wait_read<0>();  // the previous tile's copy has read the boxes
        named_barrier(1 + c, 128);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = 8 * j + 2 * q;  // in the tile
          unsigned char* box = stage + (col / BOX) * BOX_BYTES;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = warp * 16 + g + 8 * h;  // in the warpgroup's 64 rows
            *reinterpret_cast<__nv_bfloat162*>(box + sw128_offset(row, col % BOX)) =
                __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
          }
        }
        fence_proxy_async_smem();
        named_barrier(1 + c, 128);
        if (leader) {
#pragma unroll
          for (int b = 0; b < BN / BOX; ++b)
            tma_store_2d(&map_c, stage + b * BOX_BYTES, n0 + b * BOX, m0 + c * 64);
          tma_store_commit();
        }
      }
    }
    if constexpr (EPI == BWD_BF16) {
      if (leader) tma_store_wait_all();
    }
  }
#endif  // sm_90a only; the host code keeps other devices off this kernel
}

// ---- host side ---------------------------------------------------------------------------------
// The tile order for `ctas` resident CTAs: column tiles fastest (true) where the first wave of
// tiles then spans fewer rows of A plus columns of B, the operand bytes per k slice that the
// CTAs running together read, else row tiles fastest. With D = 2688 this keeps row tiles fastest
// for dgrad up to T = 2048 and turns to column tiles fastest at T = 8192 (64 row tiles: one wave
// of row tiles fastest spans all of dout's rows for only 2-3 column tiles of w), and column tiles
// fastest for wgrad (756 row tiles of dw). The order of the tiles changes no output's chain.
inline bool tile_order(int tiles_m, int tiles_n, int BM, int BN, int ctas) {
  const auto span = [&](int fast, int slow, int fast_size, int slow_size) {
    return static_cast<long long>(std::min(fast, ctas)) * fast_size +
           static_cast<long long>(std::min(slow, (ctas + fast - 1) / fast)) * slow_size;
  };
  return span(tiles_n, tiles_m, BN, BM) < span(tiles_m, tiles_n, BM, BN);
}

template <int BM, int BN, int STAGES, bool A_MN, int EPI, int MINB>
inline void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c,
                   void* C, int M, int N, int kslices, int splits, int ldc, cudaStream_t stream) {
  using Cfg = BwdConfig<BM, BN, STAGES, EPI>;
  constexpr auto kernel = wgmma_bwd_gemm_kernel<BM, BN, STAGES, A_MN, EPI, MINB>;
  static int resident[64] = {};  // CTAs that fit at once, per device
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  int fit = device < 64 ? resident[device] : 0;
  if (fit == 0) {
    reserve_dynamic_smem<kernel>(Cfg::SMEM, "wgmma_bwd");
    int per_sm = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Cfg::THREADS, Cfg::SMEM));
    TORCH_CHECK(per_sm > 0, "wgmma_bwd: the kernel does not fit on a multiprocessor");
    fit = device_facts().sms * per_sm;
    if (device < 64) resident[device] = fit;
  }
  const int tiles_m = (M + BM - 1) / BM, tiles_n = N / BN;
  const long long tiles = static_cast<long long>(tiles_m) * tiles_n * splits;
  const int grid = static_cast<int>(std::min<long long>(tiles, fit));
  kernel<<<grid, Cfg::THREADS, Cfg::SMEM, stream>>>(map_a, map_b, map_c, C, M, N, kslices, splits,
                                                    ldc, static_cast<long long>(M) * ldc,
                                                    tile_order(tiles_m, tiles_n, BM, BN, grid));
  check_launch("wgmma_bwd_gemm");
}

// Whether the wgmma backward covers this problem: an sm_90 device, D a multiple of 128, N of
// 64 * splits (whole k slices per split), 16-byte aligned operands.
inline bool supported(int T, int N, int D, int splits, std::initializer_list<const void*> ptrs) {
  return T >= 1 && splits >= 1 && D % 128 == 0 && N % (64 * splits) == 0 && sm90_aligned(ptrs);
}

// part[s] (T, D) = dout (T, N) @ w (N, D) over k chunk s of N (FP32, `splits` chunks). `variant`
// 0 picks the tile by T; 1..3 force (64 x 64, 2 CTAs/SM), (64 x 128, 2/SM), (128 x 192, 1/SM).
// The FP32 epilogue stores from registers, so map_b stands in for the unused output map.
inline void dgrad(const bf16* dout, const bf16* w, float* part, int T, int N, int D, int splits,
                  int variant, cudaStream_t stream) {
  const int kslices = N / splits / BK;
  if (variant == 0) variant = T <= 64 ? 1 : (T <= 256 ? 2 : 3);
  if (variant == 3 && D % 192 != 0) variant = 2;
  const CUtensorMap map_b = map_2d(w, D, N, BOX, BK);
  if (variant == 1) {
    const CUtensorMap map_a = map_2d(dout, N, T, BK, 64);
    launch<64, 64, 6, false, BWD_F32, 2>(map_a, map_b, map_b, part, T, D, kslices, splits, D, stream);
  } else if (variant == 2) {
    const CUtensorMap map_a = map_2d(dout, N, T, BK, 64);
    launch<64, 128, 4, false, BWD_F32, 2>(map_a, map_b, map_b, part, T, D, kslices, splits, D, stream);
  } else {
    const CUtensorMap map_a = map_2d(dout, N, T, BK, 128);
    launch<128, 192, 5, false, BWD_F32, 1>(map_a, map_b, map_b, part, T, D, kslices, splits, D, stream);
  }
}

// dw (N, D) = bf16(dout^T (N, T) @ a (T, D)): one chain over all T rows, stored through TMA. The
// staging boxes take 32-48 KB of shared memory, so the ring is one stage shorter than before.
inline void wgrad(const bf16* dout, const bf16* a, bf16* dw, int T, int N, int D,
                  cudaStream_t stream) {
  const int kslices = (T + BK - 1) / BK;
  const CUtensorMap map_a = map_2d(dout, N, T, BOX, BK);
  const CUtensorMap map_b = map_2d(a, D, T, BOX, BK);
  const CUtensorMap map_c = map_2d(dw, D, N, BOX, BOX);
  if (D % 192 == 0) {
    launch<128, 192, 4, true, BWD_BF16, 1>(map_a, map_b, map_c, dw, N, D, kslices, 1, D, stream);
  } else {
    launch<128, 128, 5, true, BWD_BF16, 1>(map_a, map_b, map_c, dw, N, D, kslices, 1, D, stream);
  }
}

}  // namespace wgmma_bwd
}  // namespace rlk
