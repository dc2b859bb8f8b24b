// Hopper (sm_90a) BF16 GEMM for adaln_projection's forward: out = bf16(A @ W^T + bias), A (M, K)
// and W (N, K) both K-contiguous, FP32 accumulators, one rounding.
//
// Summation order (the batch-invariance contract): every output (m, n) is one chain of
// wgmma m64nNk16 instructions over ascending 16-wide k steps, accumulating into registers that
// start at +0.0f (scale-d is always 1), then the bias is added with one FP32 add and the sum is
// rounded to BF16 once. This is the order of gemm_common.cuh's fixed split-K with splits = 1 and
// of the mma.sync kernel (one MMA per 16 k, ascending, from 0). The tile shape (BM rows) and the
// order in which tiles are visited follow M, but no output's terms change order with them.
//
// Structure (variant 1; the persistent variants further down walk many tiles per CTA): one CTA
// computes a BM x 256 tile. Warpgroup 0 is the producer: one thread streams
// 64-wide k slices of A and W with the bulk tensor copy engine (TMA, 128-byte swizzle) into a
// STAGES-deep ring of shared-memory buffers, each guarded by a "full" mbarrier (transaction
// bytes) and an "empty" mbarrier (one arrival per consumer warp). Warpgroups 1..BM/64 are the
// consumers: each owns 64 rows of the tile and issues four wgmma per slice straight from shared
// memory, keeping one slice's wgmma group in flight while it releases the previous slice's buffer.
// Tiles are numbered so that groups of GROUP_M row tiles sweep all column tiles before the next
// group starts, which keeps the A rows of a group resident in L2 while W streams once per group.
#pragma once

#include "wgmma_common.cuh"

namespace rlk {
namespace wgmma_gemm {

using namespace sm90;

constexpr int BN = 256;      // output columns per tile (wgmma n)
constexpr int GROUP_M = 16;  // row tiles per L2 group

// ---- clusters (2 CTAs sharing W tiles by multicast) --------------------------------------------
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// The shared::cluster address of `local` (a shared::cta address) in the CTA of rank `rank`.
__device__ __forceinline__ uint32_t map_to_rank(uint32_t local, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(local), "r"(rank));
  return r;
}
// Arrival on a barrier of any CTA in the cluster. Default (CTA-scope) semantics suffice: what it
// publishes is that this warp's wgmma reads of the slot are complete (wgmma.wait_group), and the
// only writer waiting on it is the TMA engine.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}
// TMA copy written to the same shared-memory offset of every CTA in `cta_mask`, each CTA's
// barrier at `bar`'s offset counting the bytes it receives.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, int c_inner,
                                                      int c_outer, uint64_t* bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c_inner), "r"(c_outer), "r"(smem_u32(bar)),
      "h"(cta_mask)
      : "memory");
}

// One 64-wide k slice of a consumer warpgroup: its 64 rows of the A stage (K-major) times the
// 256 rows of the W stage (K-major), four 16-wide k steps in ascending order.
__device__ __forceinline__ void issue_slice(float (&acc)[128], const unsigned char* a_rows,
                                            const unsigned char* w_rows) {
  const uint64_t da = desc_k_major_sw128(a_rows), dw = desc_k_major_sw128(w_rows);
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) wgmma_m64n256k16<0, 0>(acc, da + 2 * kk, dw + 2 * kk);
}

// Epilogue of one consumer warpgroup: rows [row_base, row_base + 64) and columns [n0, n0 + 256)
// get bf16(acc + float(bias[n])), one FP32 add and one rounding; rows at or past M are skipped.
// Accumulator 4j + {0,1} is (row g, columns 8j + 2q + {0,1}) of the warp's 16 rows, 4j + {2,3}
// the same columns 8 rows down (g = lane / 4, q = lane % 4).
__device__ __forceinline__ void store_rows(const float (&acc)[128], bf16* __restrict__ out,
                                           const bf16* __restrict__ bias, int row_base, int n0,
                                           int M, int N) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int row0 = row_base + warp * 16 + g;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = n0 + 8 * j + 2 * q;
    const __nv_bfloat162 bb = *reinterpret_cast<const __nv_bfloat162*>(bias + col);
    const float b0 = __low2float(bb), b1 = __high2float(bb);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 8 * h;
      if (row < M) {
        const float v0 = __fadd_rn(acc[4 * j + 2 * h], b0);
        const float v1 = __fadd_rn(acc[4 * j + 2 * h + 1], b1);
        *reinterpret_cast<__nv_bfloat162*>(out + static_cast<long long>(row) * N + col) =
            __floats2bfloat162_rn(v0, v1);
      }
    }
  }
}

// ---- the kernel --------------------------------------------------------------------------------
template <int BM, int STAGES>
struct Config {
  static constexpr int CONSUMERS = BM / 64;
  static constexpr int THREADS = 128 * (CONSUMERS + 1);
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BN * BK * 2;
  // ring buffers, then 2 * STAGES mbarriers, plus slack to align the base to 1024 bytes
  static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + 2 * STAGES * 8 + 1024;
};

template <int BM, int STAGES>
__global__ void __launch_bounds__(Config<BM, STAGES>::THREADS, 1)
    wgmma_linear_bias_kernel(const __grid_constant__ CUtensorMap map_a,
                             const __grid_constant__ CUtensorMap map_w, bf16* __restrict__ out,
                             const bf16* __restrict__ bias, int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = Config<BM, STAGES>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  unsigned char* sA = base;
  unsigned char* sW = base + STAGES * C::A_BYTES;
  uint64_t* full = reinterpret_cast<uint64_t*>(sW + STAGES * C::B_BYTES);
  uint64_t* empty = full + STAGES;

  // Tile numbering: groups of GROUP_M row tiles; inside a group the row tile varies fastest.
  const int tiles_m = (M + BM - 1) / BM, tiles_n = N / BN;
  const int tile = blockIdx.x;
  const int group = tile / (GROUP_M * tiles_n);
  const int first_m = group * GROUP_M;
  const int group_rows = min(GROUP_M, tiles_m - first_m);
  const int in_group = tile - group * GROUP_M * tiles_n;
  const int m0 = (first_m + in_group % group_rows) * BM;
  const int n0 = (in_group / group_rows) * BN;
  const int nk = K / BK;

  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    tma_prefetch_map(&map_a);
    tma_prefetch_map(&map_w);
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], C::CONSUMERS * 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread keeps the ring full.
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < nk; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(&empty[s], ((kt / STAGES) & 1) ^ 1);
        mbar_arrive_expect_tx(&full[s], C::A_BYTES + C::B_BYTES);
        tma_load_2d(sA + s * C::A_BYTES, &map_a, kt * BK, m0, &full[s]);
        tma_load_2d(sW + s * C::B_BYTES, &map_w, kt * BK, n0, &full[s]);
      }
    }
    return;
  }

  // Consumer warpgroup c owns rows [m0 + 64c, m0 + 64c + 64) of the tile.
  const int c = wg - 1;
  const int lane = threadIdx.x & 31;
  uint32_t it = 0;
  float acc[128];
  accumulate_tile<STAGES>(
      acc, full, it, nk,
      [&](float (&d)[128], int slot) {
        issue_slice(d, sA + slot * C::A_BYTES + c * 64 * BK * 2, sW + slot * C::B_BYTES);
      },
      [&](int slot) {
        if (lane == 0) mbar_arrive(&empty[slot]);
      });
  store_rows(acc, out, bias, m0 + c * 64, n0, M, N);
#endif  // sm_90a only; supported() keeps other devices off this kernel
}

// Persistent variant: gridDim.x CTAs (a multiple of CM; as many as fit at once) walk the tile
// list with a stride, the producer running ahead across tile boundaries so the next tile's first
// slices load while the consumers store the last one. With CM = 2, the CTAs of a cluster take
// row tiles 2i and 2i + 1 of the same column tile: each loads its own A rows and half of the
// W slice, multicast into both CTAs, so W crosses L2 once per pair. A slot is refilled only when
// the consumers of every CTA in the cluster have released it (the "empty" barrier counts them
// all). Same tiles, same per-output chain: same bits as the kernel above.
template <int STAGES, int CM>
__global__ void __launch_bounds__(Config<128, STAGES>::THREADS, 1)
    wgmma_linear_bias_persistent_kernel(const __grid_constant__ CUtensorMap map_a,
                                        const __grid_constant__ CUtensorMap map_w,
                                        bf16* __restrict__ out, const bf16* __restrict__ bias,
                                        int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = 128;
  using C = Config<BM, STAGES>;
  constexpr int W_PART = C::B_BYTES / CM;  // bytes of W each CTA of a cluster loads per slice
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  unsigned char* sA = base;
  unsigned char* sW = base + STAGES * C::A_BYTES;
  uint64_t* full = reinterpret_cast<uint64_t*>(sW + STAGES * C::B_BYTES);
  uint64_t* empty = full + STAGES;

  const uint32_t rank = CM > 1 ? cluster_rank() : 0;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = N / BN;
  const int ctiles_m = (tiles_m + CM - 1) / CM;  // cluster rows
  constexpr int CGROUP = GROUP_M / CM;            // cluster rows per L2 group
  const int ctiles = ctiles_m * tiles_n;
  const int cluster_id = blockIdx.x / CM, clusters = gridDim.x / CM;
  const int nk = K / BK;
  auto tile_origin = [&](int ct, int& m0, int& n0) {
    const int group = ct / (CGROUP * tiles_n);
    const int first = group * CGROUP;
    const int rows = min(CGROUP, ctiles_m - first);
    const int in_group = ct - group * CGROUP * tiles_n;
    m0 = ((first + in_group % rows) * CM + static_cast<int>(rank)) * BM;
    n0 = (in_group / rows) * BN;
  };

  if (threadIdx.x == 0) {
    tma_prefetch_map(&map_a);
    tma_prefetch_map(&map_w);
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], CM * C::CONSUMERS * 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (CM > 1) {
    cluster_sync();
  } else {
    __syncthreads();
  }

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if (threadIdx.x == 0) {
      uint32_t it = 0;  // slices issued so far, over all tiles
      for (int ct = cluster_id; ct < ctiles; ct += clusters) {
        int m0, n0;
        tile_origin(ct, m0, n0);
        for (int kt = 0; kt < nk; ++kt, ++it) {
          const int s = it % STAGES;
          mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
          mbar_arrive_expect_tx(&full[s], C::A_BYTES + C::B_BYTES);
          tma_load_2d(sA + s * C::A_BYTES, &map_a, kt * BK, m0, &full[s]);
          if constexpr (CM == 1) {
            tma_load_2d(sW + s * C::B_BYTES, &map_w, kt * BK, n0, &full[s]);
          } else {
            tma_load_2d_multicast(sW + s * C::B_BYTES + rank * W_PART, &map_w, kt * BK,
                                  n0 + static_cast<int>(rank) * (BN / CM), &full[s],
                                  static_cast<uint16_t>((1u << CM) - 1));
          }
        }
      }
    }
  } else {
    const int c = wg - 1;
    const int lane = threadIdx.x & 31;
    // A consumer warp releases a slot in every CTA of the cluster (lane 0 arrives once per CTA).
    auto release = [&](int slot) {
      if (lane == 0) {
        if constexpr (CM == 1) {
          mbar_arrive(&empty[slot]);
        } else {
#pragma unroll
          for (int r = 0; r < CM; ++r) mbar_arrive_cluster(map_to_rank(smem_u32(&empty[slot]), r));
        }
      }
    };
    uint32_t it = 0;
    float acc[128];
    for (int ct = cluster_id; ct < ctiles; ct += clusters) {
      int m0, n0;
      tile_origin(ct, m0, n0);
      accumulate_tile<STAGES>(
          acc, full, it, nk,
          [&](float (&d)[128], int slot) {
            issue_slice(d, sA + slot * C::A_BYTES + c * 64 * BK * 2, sW + slot * C::B_BYTES);
          },
          release);
      store_rows(acc, out, bias, m0 + c * 64, n0, M, N);
    }
  }
  // No CTA may leave while its partner can still multicast into it or arrive on its barriers.
  if constexpr (CM > 1) cluster_sync();
#endif  // sm_90a only
}

// Few rows (M <= 8): the forward is one pass over W, so the tiles run over W's rows instead. W
// is wgmma's A operand (64 of its rows per instruction, K-major) and the a rows are its B operand
// (n = 8; rows past M are zero and are not stored): D^T (64 x 8) += W (64 x 16) * a^T (16 x 8),
// the same products summed over the same 16-wide k steps in ascending order, one FP32 chain per
// output from +0.0f, so the same bits as the kernels above. The kernel also computes
// a = bf16(silu(temb)) (silu_f32, one rounding, as silu_to_bf16_kernel does): every warp but the
// producer's writes all of it (K / 64 boxes of 8 x 64, 1 KB each, in the 128-byte swizzle TMA
// would give) into shared memory once per CTA, and CTA 0 writes it to `a_out`, while the producer
// thread already streams W: the ring carries only W, BR x 64 boxes. One CTA per SM takes
// a contiguous range of BR-row tiles back to back; each consumer warpgroup owns BR / 64 /
// CONSUMERS 64-row blocks of a tile and stores them while the next tile loads.
template <int BR, int STAGES, int CONSUMERS>
struct StreamConfig {
  static constexpr int BPC = BR / 64 / CONSUMERS;  // 64-row blocks per consumer warpgroup
  static constexpr int THREADS = 128 * (CONSUMERS + 1);
  static constexpr int STAGE = BR * BK * 2;  // one BR x 64 box of W
  static constexpr int A_BOX = 8 * BK * 2;   // one 8 x 64 box of a: 1 KB
  static_assert(BPC * CONSUMERS * 64 == BR && BR <= 256, "BR: 64..256, whole blocks per consumer");
  // the ring, then all of a, then 2 * STAGES mbarriers, plus slack to align to 1024 bytes
  static int smem(int K) { return STAGES * STAGE + (K / BK) * A_BOX + 2 * STAGES * 8 + 1024; }
};

template <int BR, int STAGES, int CONSUMERS>
__global__ void __launch_bounds__(StreamConfig<BR, STAGES, CONSUMERS>::THREADS, 1)
    wgmma_stream_w_kernel(const float* __restrict__ temb, bf16* __restrict__ a_out,
                          const __grid_constant__ CUtensorMap map_w, bf16* __restrict__ out,
                          const bf16* __restrict__ bias, int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = StreamConfig<BR, STAGES, CONSUMERS>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const int ka = K / BK;
  unsigned char* sW = base;
  unsigned char* sA = base + STAGES * C::STAGE;
  uint64_t* full = reinterpret_cast<uint64_t*>(sA + ka * C::A_BOX);
  uint64_t* empty = full + STAGES;

  const int tiles = N / BR;
  const int t_begin = static_cast<int>(static_cast<long long>(tiles) * blockIdx.x / gridDim.x);
  const int t_end = static_cast<int>(static_cast<long long>(tiles) * (blockIdx.x + 1) / gridDim.x);

  if (threadIdx.x == 0) {
    tma_prefetch_map(&map_w);
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], CONSUMERS * 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x == 0) {
    uint32_t it = 0;
    for (int tile = t_begin; tile < t_end; ++tile) {
      for (int kt = 0; kt < ka; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
        mbar_arrive_expect_tx(&full[s], C::STAGE);
        tma_load_2d(sW + s * C::STAGE, &map_w, kt * BK, tile * BR, &full[s]);
      }
    }
    return;
  }
  if (threadIdx.x < 32) return;
  // Every other warp writes a into shared memory while the ring fills: 16-byte chunks of 8 k,
  // chunk i = (row r, k0); it lands in box k0 / 64, row r, at 16-byte slot (k0 % 64) / 8 ^ r (the
  // 128-byte swizzle). Four chunks' loads are issued before the first is used.
  {
    constexpr int U = 4;
    const int tid = threadIdx.x - 32, workers = C::THREADS - 32, kc = K / 8;
    for (int i0 = 0; i0 < 8 * kc; i0 += U * workers) {
      float4 x[U][2];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = i0 + u * workers + tid, r = i / kc, k0 = (i % kc) * 8;
        if (i < 8 * kc && r < M) {
          x[u][0] = *reinterpret_cast<const float4*>(temb + static_cast<long long>(r) * K + k0);
          x[u][1] = *reinterpret_cast<const float4*>(temb + static_cast<long long>(r) * K + k0 + 4);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = i0 + u * workers + tid, r = i / kc, k0 = (i % kc) * 8;
        if (i >= 8 * kc) break;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < M) {
          const __nv_bfloat162 p[4] = {__floats2bfloat162_rn(silu_f32(x[u][0].x), silu_f32(x[u][0].y)),
                                       __floats2bfloat162_rn(silu_f32(x[u][0].z), silu_f32(x[u][0].w)),
                                       __floats2bfloat162_rn(silu_f32(x[u][1].x), silu_f32(x[u][1].y)),
                                       __floats2bfloat162_rn(silu_f32(x[u][1].z), silu_f32(x[u][1].w))};
          v = *reinterpret_cast<const uint4*>(p);
          if (blockIdx.x == 0) *reinterpret_cast<uint4*>(a_out + static_cast<long long>(r) * K + k0) = v;
        }
        *reinterpret_cast<uint4*>(sA + (k0 / BK) * C::A_BOX + r * 128 + ((((k0 % BK) / 8) ^ r) << 4)) = v;
      }
    }
    fence_proxy_async_smem();  // the wgmma (async proxy) reads these stores
    named_barrier(1, C::THREADS - 32);
  }
  const int wg = threadIdx.x / 128;
  if (wg == 0) return;

  const int c = wg - 1;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
  const int g = lane >> 2, q = lane & 3;
  uint32_t it = 0;
  float acc[4 * C::BPC];
  for (int tile = t_begin; tile < t_end; ++tile) {
    int kt = 0;  // the k slice being issued, within the tile
    accumulate_tile<STAGES>(
        acc, full, it, ka,
        [&](float (&d)[4 * C::BPC], int slot) {
          const unsigned char* w_rows = sW + slot * C::STAGE + c * C::BPC * 64 * BK * 2;
          const uint64_t da = desc_k_major_sw128(sA + kt * C::A_BOX);
#pragma unroll
          for (int kk = 0; kk < BK / 16; ++kk) {
#pragma unroll
            for (int bb = 0; bb < C::BPC; ++bb) {
              const uint64_t dw = desc_k_major_sw128(w_rows + bb * 64 * BK * 2);
              wgmma_m64n8k16<0, 0>(*reinterpret_cast<float(*)[4]>(&d[4 * bb]), dw + 2 * kk, da + 2 * kk);
            }
          }
          ++kt;
        },
        [&](int slot) {
          if (lane == 0) mbar_arrive(&empty[slot]);
        });
    // acc[4 bb + 2 h + e]: W row (output column) 16 warp + g + 8 h of block bb, a row 2 q + e.
#pragma unroll
    for (int bb = 0; bb < C::BPC; ++bb) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = tile * BR + (c * C::BPC + bb) * 64 + warp * 16 + g + 8 * h;
        const float bn = __bfloat162float(bias[n]);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int row = 2 * q + e;
          if (row < M)
            out[static_cast<long long>(row) * N + n] = __float2bfloat16_rn(__fadd_rn(acc[4 * bb + 2 * h + e], bn));
        }
      }
    }
  }
#endif  // sm_90a only
}

// ---- host side ---------------------------------------------------------------------------------
template <int BM, int STAGES>
inline void launch(const bf16* A, const bf16* W, const bf16* bias, bf16* out, int M, int N, int K,
                   cudaStream_t stream) {
  using C = Config<BM, STAGES>;
  constexpr auto kernel = wgmma_linear_bias_kernel<BM, STAGES>;
  reserve_dynamic_smem<kernel>(C::SMEM, "wgmma_gemm");
  const CUtensorMap map_a = map_2d(A, K, M, BK, BM);
  const CUtensorMap map_w = map_2d(W, K, N, BK, BN);
  const int tiles = ((M + BM - 1) / BM) * (N / BN);
  kernel<<<tiles, C::THREADS, C::SMEM, stream>>>(map_a, map_w, out, bias, M, N, K);
  check_launch("wgmma_linear_bias");
}

// Whether the wgmma path covers this problem: an sm_90 device, N a multiple of 256, K of 64,
// 16-byte aligned operands (TMA), M >= 1.
inline bool supported(int M, int N, int K, const void* A, const void* W) {
  return M >= 1 && N % BN == 0 && K % BK == 0 && sm90_aligned({A, W});
}

template <int STAGES, int CM>
inline void launch_persistent(const bf16* A, const bf16* W, const bf16* bias, bf16* out, int M,
                              int N, int K, cudaStream_t stream) {
  using C = Config<128, STAGES>;
  constexpr auto kernel = wgmma_linear_bias_persistent_kernel<STAGES, CM>;
  static int max_clusters[64] = {};  // clusters that fit at once, per device
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CM;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(C::THREADS);
  cfg.dynamicSmemBytes = C::SMEM;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int fit = device < 64 ? max_clusters[device] : 0;
  if (fit == 0) {
    reserve_dynamic_smem<kernel>(C::SMEM, "wgmma_gemm");
    const int sms = device_facts().sms;
    cfg.gridDim = dim3(sms / CM * CM);
    const cudaError_t err = cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg);
    TORCH_CHECK(err == cudaSuccess && fit > 0, "wgmma_gemm: no cluster of ", CM, " CTAs fits: ",
                cudaGetErrorString(err));
    if (device < 64) max_clusters[device] = fit;
  }
  const int tiles_m = (M + 127) / 128;
  const int ctiles = (tiles_m + CM - 1) / CM * (N / BN);
  cfg.gridDim = dim3(min(fit, ctiles) * CM);
  const CUtensorMap map_a = map_2d(A, K, M, BK, 128);
  const CUtensorMap map_w = map_2d(W, K, N, BK, BN / CM);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, map_a, map_w, out, bias, M, N, K));
}

// The W-streaming kernel's configuration: 256-row tiles (the W box of the kernels above), a
// 5-deep ring, two consumer warpgroups: the fastest of nine tile / ring / consumer geometries on
// the H200, which were within 4 % of each other. With silu inside, it reads W at 99 / 97 / 94 %
// of the copy bandwidth at T = 1 / 3 / 8, against 92 / 94 / 93 % for variant 1 (64 x 256 tiles)
// after the silu kernel (docs/evidence/h200/check_adaln_smallt.*).
using Stream = StreamConfig<256, 5, 2>;

// Whether the W-streaming kernel covers this problem: 1..8 rows, whole 256-row tiles, K a multiple
// of 64, shared memory (which grows with K: all of a stays resident) within the device's limit, an
// sm_90 device and 16-byte aligned temb and W.
inline bool stream_supported(int M, int N, int K, const void* temb, const void* W) {
  return M >= 1 && M <= 8 && N % 256 == 0 && K % BK == 0 && sm90_aligned({temb, W}) &&
         Stream::smem(K) <= device_facts().smem_optin;
}

// The tensor map of W for the streaming kernel, encoded once per weight (pointer and shape) and
// thread: the encoding is a driver call on the launch path, and the weight is the same call after
// call. A map holds nothing but the address, shape, strides and box, so a reused address with the
// same shape gets an identical map.
inline const CUtensorMap& stream_w_map(const bf16* W, int N, int K) {
  thread_local struct {
    const bf16* ptr = nullptr;
    int device = -1, n = 0, k = 0;
    CUtensorMap map;
  } cache;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  if (cache.ptr != W || cache.device != device || cache.n != N || cache.k != K) {
    cache.map = map_2d(W, K, N, BK, 256);
    cache.ptr = W, cache.device = device, cache.n = N, cache.k = K;
  }
  return cache.map;
}

// a (M, K) = bf16(silu(temb)) and out (M, N) = bf16(a @ W^T + bias) in one kernel, for M <= 8
// (stream_supported).
inline void silu_linear_bias_stream(const float* temb, bf16* a, const bf16* W, const bf16* bias,
                                    bf16* out, int M, int N, int K, cudaStream_t stream) {
  constexpr auto kernel = wgmma_stream_w_kernel<256, 5, 2>;
  const DeviceFacts& f = device_facts();
  const int smem = Stream::smem(K);
  reserve_dynamic_smem<kernel>(smem, "wgmma_gemm");
  const int grid = std::min(f.sms, N / 256);
  kernel<<<grid, Stream::THREADS, smem, stream>>>(temb, a, stream_w_map(W, N, K), out, bias, M, N, K);
  check_launch("wgmma_stream_w");
}

// out (M, N) = bf16(A (M, K) @ W (N, K)^T + bias (N)). `variant` picks the kernel (all give the
// same bits): 1 = one CTA per tile, 64-row tiles up to 64 rows (one consumer warpgroup, a deeper
// ring: W is read at memory speed there), 128 above; 2 = persistent, 128-row tiles; 3 = persistent
// with 2-CTA clusters sharing W; 0 = the default: 1 up to 64 rows, 2 above. On the H200 the
// clusters did not pay: at T = 2048 variant 3 ran at 1.19x cuBLAS against 1.02x for 2
// (docs/evidence/h200/check_adaln_wgmma_step2.log).
inline void linear_bias(const bf16* A, const bf16* W, const bf16* bias, bf16* out, int M, int N,
                        int K, int variant, cudaStream_t stream) {
  TORCH_CHECK(variant >= 0 && variant <= 3, "wgmma_gemm: variant must be 0..3, got ", variant);
  if (variant == 0) variant = M <= 64 ? 1 : 2;
  if (variant == 1) {
    if (M <= 64) {
      launch<64, 5>(A, W, bias, out, M, N, K, stream);
    } else {
      launch<128, 4>(A, W, bias, out, M, N, K, stream);
    }
  } else if (variant == 2) {
    launch_persistent<4, 1>(A, W, bias, out, M, N, K, stream);
  } else {
    launch_persistent<4, 2>(A, W, bias, out, M, N, K, stream);
  }
}

}  // namespace wgmma_gemm
}  // namespace rlk
