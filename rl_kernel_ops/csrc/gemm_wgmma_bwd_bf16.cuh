// Hopper (sm_90a) BF16 GEMMs for adaln_projection's backward (issue 13 step 3), on the TMA /
// mbarrier / wgmma machinery of gemm_wgmma_bf16.cuh:
//   dgrad  part[s] (T, D) = dout (T, N) @ w (N, D) over k chunk s of N   (FP32 partials, split-K)
//   wgrad  dw (N, D)      = bf16(dout^T (N, T) @ a (T, D))                (one chain over all T)
// A is K-major (dout in dgrad) or MN-major (dout^T in wgrad); B is MN-major in both (w and a are
// row-major with the output column contiguous). wgmma reads MN-major operands through its
// transpose bits.
//
// Summation order: the mma.sync kernels' (gemm_common.cuh, gemm_mma_bf16.cuh). Output (m, n) of
// split s is one chain of wgmma m64nNk16 over the split's 16-wide k steps in ascending order,
// accumulating into registers that start at +0.0f; dgrad's splits are then folded in ascending
// order by fold_splits, exactly as before; wgrad is one chain over all T rows, ascending, rounded
// to BF16 once. k past the end (T not a multiple of 64 in wgrad) reads as zero through TMA's
// out-of-bounds fill: extra all-zero 16-wide steps add +0 to the chain. The tile shape chosen
// for T and the order tiles are visited in change no output's terms: rows of d_temb are
// batch-invariant and every result is deterministic, with no atomics.
//
// Structure: persistent CTAs (as many as fit) walk the tile list with a stride. Warpgroup 0's
// first thread is the producer: it streams 64-wide k slices of both operands with TMA (128-byte
// swizzle; MN-major operands as 64-element-wide boxes of 64 k rows, one per 64 columns) into a
// STAGES-deep ring guarded by full/empty mbarriers, running ahead across tile boundaries.
// Warpgroups 1..BM/64 are consumers, each owning 64 rows of the BM x BN tile.
#pragma once

#include <algorithm>
#include <initializer_list>

// Only the primitives (barriers, TMA, descriptors, tensor maps) of the forward's header.
#define RLK_WGMMA_PRIMITIVES_ONLY
#include "gemm_wgmma_bf16.cuh"

namespace rlk {
namespace wgmma_bwd {

using wgmma_gemm::BK;
using wgmma_gemm::mbar_arrive;
using wgmma_gemm::mbar_arrive_expect_tx;
using wgmma_gemm::mbar_init;
using wgmma_gemm::mbar_wait;
using wgmma_gemm::smem_u32;
using wgmma_gemm::tma_load_2d;
using wgmma_gemm::tma_prefetch_map;
using wgmma_gemm::wgmma_commit;
using wgmma_gemm::wgmma_fence;
using wgmma_gemm::wgmma_wait;

constexpr int MN_BLOCK = 64;                       // MN-major box width: one 128-byte swizzle row
constexpr int BLOCK_BYTES = MN_BLOCK * BK * 2;     // one 64 x 64 BF16 box: 8 KB

// Shared-memory descriptor of an MN-major tile written by TMA with the 128-byte swizzle: 64
// elements of M (or N) per 128-byte row, one row per k; groups of 8 k rows 1024 bytes apart
// (stride byte offset), 64-element column blocks BLOCK_BYTES apart (leading byte offset); layout
// type 1 = 128-byte swizzle. A 16-wide k step advances the start by 16 rows = 2048 bytes.
// (CUTLASS's make_gmma_desc<Major::MN> convention; on the H200 it gives mma.sync's bits, while the
// two offsets exchanged fault.)
__device__ __forceinline__ uint64_t desc_mn_major_sw128(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  constexpr uint64_t lbo = BLOCK_BYTES, sbo = 1024;
  return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (1ull << 62);
}

template <int R>
__device__ __forceinline__ void fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D(64 x 64, FP32) += A(64 x 16) * B(16 x 64); TA / TB: 1 = the operand is MN-major in shared memory.
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
      "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TA), "n"(TB));
}

// D(64 x 128, FP32) += A(64 x 16) * B(16 x 128); TA / TB: 1 = the operand is MN-major in shared memory.
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
      "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TA), "n"(TB));
}

// D(64 x 192, FP32) += A(64 x 16) * B(16 x 192); TA / TB: 1 = the operand is MN-major in shared memory.
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
      "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
      "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
      "}, %96, %97, p, 1, 1, %99, %100;\n}\n"
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
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TA), "n"(TB));
}

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

enum BwdEpi : int { BWD_F32 = 0, BWD_BF16 = 1 };

template <int BM, int BN, int STAGES>
struct BwdConfig {
  static constexpr int CONSUMERS = BM / 64;
  static constexpr int THREADS = 128 * (CONSUMERS + 1);
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BN * BK * 2;
  static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + 2 * STAGES * 8 + 1024;
};

// C (M, N) [+ split s * split_stride] = A (M, K) @ B (K, N) over the k slices of split s.
// map_a: K-major (A_MN = false; box 64 k x BM rows) or MN-major (box 64 m x 64 k); map_b:
// MN-major (box 64 n x 64 k). Each split covers kslices 64-wide slices; tiles are numbered
// split-major, then row tiles fastest (N_FASTEST = false: CTAs running together share B) or
// column tiles fastest (true: they share A).
template <int BM, int BN, int STAGES, bool A_MN, int EPI, bool N_FASTEST, int MINB>
__global__ void __launch_bounds__(BwdConfig<BM, BN, STAGES>::THREADS, MINB)
    wgmma_bwd_gemm_kernel(const __grid_constant__ CUtensorMap map_a,
                          const __grid_constant__ CUtensorMap map_b, void* __restrict__ C, int M,
                          int N, int kslices, int splits, int ldc, long long split_stride) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = BwdConfig<BM, BN, STAGES>;
  constexpr int TA = A_MN ? 1 : 0;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  unsigned char* sA = base;
  unsigned char* sB = base + STAGES * Cfg::A_BYTES;
  uint64_t* full = reinterpret_cast<uint64_t*>(sB + STAGES * Cfg::B_BYTES);
  uint64_t* empty = full + STAGES;

  const int tiles_m = (M + BM - 1) / BM, tiles_n = N / BN;
  const int per_split = tiles_m * tiles_n;
  const int tiles = per_split * splits;
  auto tile_origin = [&](int t, int& s, int& m0, int& n0) {
    s = t / per_split;
    const int r = t - s * per_split;
    if constexpr (N_FASTEST) {
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
            for (int i = 0; i < BM / MN_BLOCK; ++i)
              tma_load_2d(a_dst + i * BLOCK_BYTES, &map_a, m0 + i * MN_BLOCK, k0, &full[st]);
          } else {
            tma_load_2d(a_dst, &map_a, k0, m0, &full[st]);
          }
          unsigned char* b_dst = sB + st * Cfg::B_BYTES;
#pragma unroll
          for (int j = 0; j < BN / MN_BLOCK; ++j)
            tma_load_2d(b_dst + j * BLOCK_BYTES, &map_b, n0 + j * MN_BLOCK, k0, &full[st]);
        }
      }
    }
  } else {
    // Consumer warpgroup c owns rows [m0 + 64c, m0 + 64c + 64): the c-th 8 KB block of the A
    // stage in either layout (64 K-major rows of 128 bytes, or the c-th 64-wide MN block).
    const int c = wg - 1;
    const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
    const int g = lane >> 2, q = lane & 3;
    uint32_t it = 0;
    float acc[BN / 2];
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int s, m0, n0;
      tile_origin(t, s, m0, n0);
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
      for (int kt = 0; kt < kslices; ++kt, ++it) {
        const int st = it % STAGES;
        mbar_wait(&full[st], (it / STAGES) & 1);
        const unsigned char* a_tile = sA + st * Cfg::A_BYTES + c * BLOCK_BYTES;
        const uint64_t da = A_MN ? desc_mn_major_sw128(a_tile) : wgmma_gemm::desc_k_major_sw128(a_tile);
        const uint64_t db = desc_mn_major_sw128(sB + st * Cfg::B_BYTES);
        fence_acc(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          wgmma_step<BN, TA>(acc, da + (A_MN ? 128 : 2) * kk, db + 128 * kk);
        wgmma_commit();
        fence_acc(acc);
        // The previous slice's group is complete once at most this one is pending.
        wgmma_wait<1>();
        fence_acc(acc);
        if (kt > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);
      }
      wgmma_wait<0>();
      fence_acc(acc);
      if (lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);

      // Epilogue. Accumulator 4j + {0,1} is (row g, columns 8j + 2q + {0,1}) of the warp's 16
      // rows, 4j + {2,3} the same columns 8 rows down.
      const int row0 = m0 + c * 64 + warp * 16 + g;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = n0 + 8 * j + 2 * q;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + 8 * h;
          if (row < M) {
            const long long off = static_cast<long long>(row) * ldc + col;
            if constexpr (EPI == BWD_F32) {
              float* out = reinterpret_cast<float*>(C) + s * split_stride;
              *reinterpret_cast<float2*>(out + off) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            } else {
              *reinterpret_cast<__nv_bfloat162*>(reinterpret_cast<bf16*>(C) + off) =
                  __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            }
          }
        }
      }
    }
  }
#endif  // sm_90a only; the host code keeps other devices off this kernel
}

// ---- host side ---------------------------------------------------------------------------------
// Tensor map of a row-major (outer, inner) BF16 matrix read in boxes of box_inner x box_outer,
// 128-byte swizzle (box_inner = 64); out-of-bounds elements read as zero.
inline CUtensorMap map_2d(const bf16* ptr, int inner, int outer, int box_inner, int box_outer) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(inner) * sizeof(bf16)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_inner), static_cast<cuuint32_t>(box_outer)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = wgmma_gemm::encode_fn()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(ptr), dims, strides, box,
      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "wgmma_bwd: cuTensorMapEncodeTiled failed with ", static_cast<int>(r));
  return map;
}

template <int BM, int BN, int STAGES, bool A_MN, int EPI, bool N_FASTEST, int MINB>
inline void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, void* C, int M, int N,
                   int kslices, int splits, int ldc, cudaStream_t stream) {
  using Cfg = BwdConfig<BM, BN, STAGES>;
  auto kernel = wgmma_bwd_gemm_kernel<BM, BN, STAGES, A_MN, EPI, N_FASTEST, MINB>;
  static int resident[64] = {};  // CTAs that fit at once, per device
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  int fit = device < 64 ? resident[device] : 0;
  if (fit == 0) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM);
    TORCH_CHECK(err == cudaSuccess, "wgmma_bwd: cannot reserve ", Cfg::SMEM,
                " bytes of shared memory: ", cudaGetErrorString(err));
    int sms = 0, per_sm = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Cfg::THREADS, Cfg::SMEM));
    TORCH_CHECK(per_sm > 0, "wgmma_bwd: the kernel does not fit on a multiprocessor");
    fit = sms * per_sm;
    if (device < 64) resident[device] = fit;
  }
  const long long tiles = static_cast<long long>((M + BM - 1) / BM) * (N / BN) * splits;
  const int grid = static_cast<int>(std::min<long long>(tiles, fit));
  kernel<<<grid, Cfg::THREADS, Cfg::SMEM, stream>>>(map_a, map_b, C, M, N, kslices, splits, ldc,
                                                    static_cast<long long>(M) * ldc);
  check_launch("wgmma_bwd_gemm");
}

// Whether the wgmma backward covers this problem: an sm_90 device, D a multiple of 128, N of
// 64 * splits (whole k slices per split), 16-byte aligned operands.
inline bool supported(int T, int N, int D, int splits, std::initializer_list<const void*> ptrs) {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  bool ok = major == 9 && minor == 0 && T >= 1 && splits >= 1 && D % 128 == 0 && N % (64 * splits) == 0;
  for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  return ok;
}

// part[s] (T, D) = dout (T, N) @ w (N, D) over k chunk s of N (FP32, `splits` chunks). `variant`
// 0 picks the tile by T; 1..3 force (64 x 64, 2 CTAs/SM), (64 x 128, 2/SM), (128 x 192, 1/SM).
inline void dgrad(const bf16* dout, const bf16* w, float* part, int T, int N, int D, int splits,
                  int variant, cudaStream_t stream) {
  const int kslices = N / splits / BK;
  if (variant == 0) variant = T <= 64 ? 1 : (T <= 256 ? 2 : 3);
  if (variant == 3 && D % 192 != 0) variant = 2;
  const CUtensorMap map_b = map_2d(w, D, N, MN_BLOCK, BK);
  if (variant == 1) {
    const CUtensorMap map_a = map_2d(dout, N, T, BK, 64);
    launch<64, 64, 6, false, BWD_F32, false, 2>(map_a, map_b, part, T, D, kslices, splits, D, stream);
  } else if (variant == 2) {
    const CUtensorMap map_a = map_2d(dout, N, T, BK, 64);
    launch<64, 128, 4, false, BWD_F32, false, 2>(map_a, map_b, part, T, D, kslices, splits, D, stream);
  } else {
    const CUtensorMap map_a = map_2d(dout, N, T, BK, 128);
    launch<128, 192, 5, false, BWD_F32, false, 1>(map_a, map_b, part, T, D, kslices, splits, D, stream);
  }
}

// dw (N, D) = bf16(dout^T (N, T) @ a (T, D)): one chain over all T rows.
inline void wgrad(const bf16* dout, const bf16* a, bf16* dw, int T, int N, int D,
                  cudaStream_t stream) {
  const int kslices = (T + BK - 1) / BK;
  const CUtensorMap map_a = map_2d(dout, N, T, MN_BLOCK, BK);
  const CUtensorMap map_b = map_2d(a, D, T, MN_BLOCK, BK);
  if (D % 192 == 0) {
    launch<128, 192, 5, true, BWD_BF16, true, 1>(map_a, map_b, dw, N, D, kslices, 1, D, stream);
  } else {
    launch<128, 128, 6, true, BWD_BF16, true, 1>(map_a, map_b, dw, N, D, kslices, 1, D, stream);
  }
}

}  // namespace wgmma_bwd
}  // namespace rlk
