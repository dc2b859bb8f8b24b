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

#include <cuda.h>
#include <cudaTypedefs.h>

#include "gemm_common.cuh"

namespace rlk {
namespace wgmma_gemm {

constexpr int BN = 256;      // output columns per tile (wgmma n)
constexpr int BK = 64;       // k per pipeline slice: one 128-byte swizzle row of BF16
constexpr int GROUP_M = 16;  // row tiles per L2 group

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers -------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// Spin until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "RLK_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra RLK_MBAR_WAIT;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// ---- TMA ---------------------------------------------------------------------------------------
// Copy the box at (c_inner = k, c_outer = row) of `map` into shared memory at dst; completion is
// counted in bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c_inner,
                                            int c_outer, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c_inner), "r"(c_outer), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

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

// ---- wgmma -------------------------------------------------------------------------------------
// Shared-memory matrix descriptor of a K-major tile written by TMA with the 128-byte swizzle:
// rows of 128 bytes, groups of 8 rows 1024 bytes apart (stride byte offset), the leading byte
// offset unused for this layout (1), layout type 1 = 128-byte swizzle. The tile base must be
// 1024-byte aligned; a 16-wide k step inside the 64-wide slice advances the start by 32 bytes.
__device__ __forceinline__ uint64_t desc_k_major_sw128(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
__device__ __forceinline__ void fence_regs(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D(64 x 256, FP32, registers) += A(64 x 16, smem) * B(256 x 16, smem)^T, both K-major.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
      "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
      "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
      "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
      "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(1));
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

#ifndef RLK_WGMMA_PRIMITIVES_ONLY  // the forward's kernels (a TU that wants only the primitives skips them)
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
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % STAGES;
    mbar_wait(&full[s], (kt / STAGES) & 1);
    const uint64_t da = desc_k_major_sw128(sA + s * C::A_BYTES + c * 64 * BK * 2);
    const uint64_t dw = desc_k_major_sw128(sW + s * C::B_BYTES);
    fence_regs(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) wgmma_m64n256k16(acc, da + 2 * kk, dw + 2 * kk);
    wgmma_commit();
    fence_regs(acc);
    // The previous slice's wgmma group is complete once at most this one is pending.
    wgmma_wait<1>();
    fence_regs(acc);
    if (kt > 0 && lane == 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
  }
  wgmma_wait<0>();
  fence_regs(acc);

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
    auto release = [&](uint32_t slice) {
      if (lane == 0) {
        const uint32_t local = smem_u32(&empty[slice % STAGES]);
        if constexpr (CM == 1) {
          asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(local) : "memory");
        } else {
#pragma unroll
          for (int r = 0; r < CM; ++r) mbar_arrive_cluster(map_to_rank(local, r));
        }
      }
    };
    uint32_t it = 0;
    float acc[128];
    for (int ct = cluster_id; ct < ctiles; ct += clusters) {
      int m0, n0;
      tile_origin(ct, m0, n0);
#pragma unroll
      for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
      for (int kt = 0; kt < nk; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&full[s], (it / STAGES) & 1);
        const uint64_t da = desc_k_major_sw128(sA + s * C::A_BYTES + c * 64 * BK * 2);
        const uint64_t dw = desc_k_major_sw128(sW + s * C::B_BYTES);
        fence_regs(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) wgmma_m64n256k16(acc, da + 2 * kk, dw + 2 * kk);
        wgmma_commit();
        fence_regs(acc);
        wgmma_wait<1>();
        fence_regs(acc);
        if (kt > 0) release(it - 1);
      }
      wgmma_wait<0>();
      fence_regs(acc);
      release(it - 1);
      store_rows(acc, out, bias, m0 + c * 64, n0, M, N);
    }
  }
  // No CTA may leave while its partner can still multicast into it or arrive on its barriers.
  if constexpr (CM > 1) cluster_sync();
#endif  // sm_90a only
}

#endif  // RLK_WGMMA_PRIMITIVES_ONLY

// ---- host side ---------------------------------------------------------------------------------
// cuTensorMapEncodeTiled is a driver call: it needs the device's primary context current on the
// calling thread. The runtime makes it current only at the thread's first runtime call that needs
// a context, which on a fresh thread (autograd's backward worker) may not have happened yet, so
// the encoder is only handed out after cudaSetDevice, which makes it current (CUDA >= 12).
inline PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaSetDevice(device));
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status;
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status);
    TORCH_CHECK(err == cudaSuccess && status == cudaDriverEntryPointSuccess && p != nullptr,
                "wgmma_gemm: cuTensorMapEncodeTiled is not available from the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// Tensor map of a row-major (rows, K) BF16 matrix read in boxes of box_rows x BK, 128-byte
// swizzle; rows past the end read as zero.
inline CUtensorMap k_major_map(const bf16* ptr, int rows, int K, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(K) * sizeof(bf16)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(BK), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(ptr),
                                 dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "wgmma_gemm: cuTensorMapEncodeTiled failed with ", static_cast<int>(r));
  return map;
}

#ifndef RLK_WGMMA_PRIMITIVES_ONLY
template <int BM, int STAGES>
inline void launch(const bf16* A, const bf16* W, const bf16* bias, bf16* out, int M, int N, int K,
                   cudaStream_t stream) {
  using C = Config<BM, STAGES>;
  auto kernel = wgmma_linear_bias_kernel<BM, STAGES>;
  static bool configured[64] = {};  // one attribute call per instantiation and device
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= 64 || !configured[device]) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
    TORCH_CHECK(err == cudaSuccess, "wgmma_gemm: cannot reserve ", C::SMEM,
                " bytes of shared memory: ", cudaGetErrorString(err));
    if (device < 64) configured[device] = true;
  }
  const CUtensorMap map_a = k_major_map(A, M, K, BM);
  const CUtensorMap map_w = k_major_map(W, N, K, BN);
  const int tiles = ((M + BM - 1) / BM) * (N / BN);
  kernel<<<tiles, C::THREADS, C::SMEM, stream>>>(map_a, map_w, out, bias, M, N, K);
  check_launch("wgmma_linear_bias");
}

// Whether the wgmma path covers this problem: an sm_90 device, N a multiple of 256, K of 64,
// 16-byte aligned operands (TMA), M >= 1.
inline bool supported(int M, int N, int K, const void* A, const void* W) {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0 && M >= 1 && N % BN == 0 && K % BK == 0 &&
         reinterpret_cast<uintptr_t>(A) % 16 == 0 && reinterpret_cast<uintptr_t>(W) % 16 == 0;
}

template <int STAGES, int CM>
inline void launch_persistent(const bf16* A, const bf16* W, const bf16* bias, bf16* out, int M,
                              int N, int K, cudaStream_t stream) {
  using C = Config<128, STAGES>;
  auto kernel = wgmma_linear_bias_persistent_kernel<STAGES, CM>;
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
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
    TORCH_CHECK(err == cudaSuccess, "wgmma_gemm: cannot reserve ", C::SMEM,
                " bytes of shared memory: ", cudaGetErrorString(err));
    int sms = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    cfg.gridDim = dim3(sms / CM * CM);
    err = cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg);
    TORCH_CHECK(err == cudaSuccess && fit > 0, "wgmma_gemm: no cluster of ", CM, " CTAs fits: ",
                cudaGetErrorString(err));
    if (device < 64) max_clusters[device] = fit;
  }
  const int tiles_m = (M + 127) / 128;
  const int ctiles = (tiles_m + CM - 1) / CM * (N / BN);
  cfg.gridDim = dim3(min(fit, ctiles) * CM);
  const CUtensorMap map_a = k_major_map(A, M, K, 128);
  const CUtensorMap map_w = k_major_map(W, N, K, BN / CM);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, map_a, map_w, out, bias, M, N, K));
}

// out (M, N) = bf16(A (M, K) @ W (N, K)^T + bias (N)). `variant` picks the kernel (all give the
// same bits): 1 = one CTA per tile, 64-row tiles up to 64 rows (one consumer warpgroup, a deeper
// ring: W is read at memory speed there), 128 above; 2 = persistent, 128-row tiles; 3 = persistent
// with 2-CTA clusters sharing W; 0 = the default: 1 up to 64 rows, 2 above. On the H200 (issue 13
// step 2) the clusters did not pay: at T = 2048 variant 3 ran at 1.19x cuBLAS against 1.02x for 2.
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

#endif  // RLK_WGMMA_PRIMITIVES_ONLY

}  // namespace wgmma_gemm
}  // namespace rlk
