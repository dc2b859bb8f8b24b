// Hopper (sm_90a) building blocks of the wgmma GEMMs (gemm_wgmma_bf16.cuh: forward;
// gemm_wgmma_bwd_bf16.cuh: dgrad and wgrad): mbarriers, TMA loads and stores, shared-memory
// matrix descriptors for the 128-byte swizzle, the wgmma instructions, the tensor maps, and the
// consumer's k loop (accumulate_tile), which fixes the summation order every kernel shares: one
// FP32 chain per output over the tile's 16-wide k steps, ascending, from +0.0f.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <initializer_list>

#include "gemm_common.cuh"

namespace rlk {
namespace sm90 {

constexpr int BK = 64;                          // k per pipeline slice: one 128-byte swizzle row of BF16
constexpr int BOX = 64;                         // a 64 x 64 BF16 box: 64 rows of 128 bytes
constexpr int BOX_BYTES = BOX * BOX * 2;        // 8 KB

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
// Barrier `id` (1..15; 0 is __syncthreads) over `count` threads: one warpgroup syncs alone.
__device__ __forceinline__ void named_barrier(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// ---- TMA ---------------------------------------------------------------------------------------
// Copy the box at (c_inner, c_outer) of `map` into shared memory at dst; completion is counted in
// bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c_inner,
                                            int c_outer, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c_inner), "r"(c_outer), "r"(smem_u32(bar))
      : "memory");
}
// Copy `bytes` (a multiple of 16; both addresses 16-byte aligned) of contiguous global memory at
// src into shared memory at dst; completion is counted in bytes on `bar`.
__device__ __forceinline__ void bulk_load_1d(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
// Copy shared memory at src to the box at (c_inner, c_outer) of `map`; elements outside the
// tensor are not written. Tracked by bulk groups (tma_store_commit / tma_store_wait_read).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c_inner,
                                             int c_outer) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c_inner), "r"(c_outer), "r"(smem_u32(src))
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Wait until at most N committed store groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Wait until every committed store group has completed (its writes are done).
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Orders this thread's ordinary shared-memory writes before later TMA (async proxy) reads of them.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- shared-memory matrix descriptors (128-byte swizzle, layout type 1) -----------------------
// K-major tile written by TMA: rows of 128 bytes (64 k), groups of 8 rows 1024 bytes apart (stride
// byte offset), leading byte offset unused (1). The tile base must be 1024-byte aligned; a 16-wide
// k step advances the start by 32 bytes (+2 in the descriptor).
__device__ __forceinline__ uint64_t desc_k_major_sw128(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
// MN-major tile written by TMA as 64 x 64 boxes: 64 elements of M (or N) per 128-byte row, one
// row per k; groups of 8 k rows 1024 bytes apart (stride byte offset), 64-wide column blocks
// BOX_BYTES apart (leading byte offset). A 16-wide k step advances the start by 16 rows = 2048
// bytes (+128). (CUTLASS's make_gmma_desc<Major::MN> convention; on the H200 it gives mma.sync's
// bits, while the two offsets exchanged fault.)
__device__ __forceinline__ uint64_t desc_mn_major_sw128(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  constexpr uint64_t lbo = BOX_BYTES, sbo = 1024;
  return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (1ull << 62);
}
// Byte offset of element (row, col) of a 64 x 64 BF16 box in the 128-byte swizzle TMA uses: the
// 16-byte chunk index inside the 128-byte row is XORed with row % 8 (box base 1024-byte aligned).
__device__ __forceinline__ int sw128_offset(int row, int col) {
  return row * 128 + ((((col * 2) >> 4) ^ (row & 7)) << 4) + ((col * 2) & 15);
}

// ---- wgmma -------------------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
template <int R>
__device__ __forceinline__ void fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma_m64n{8,64,128,192,256}k16<TA, TB>(d, desc_a, desc_b): D (64 x N, FP32, N / 2 registers per
// thread) += A (64 x 16) * B (16 x N), both from shared memory; TA / TB = 1: that operand is
// MN-major (transposed), 0: K-major. scale-d is always 1: the chain continues from d.
#define RLK_WGMMA_REGS_4 "%0,%1,%2,%3"
#define RLK_WGMMA_REGS_32 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define RLK_WGMMA_REGS_64 RLK_WGMMA_REGS_32 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define RLK_WGMMA_REGS_96 RLK_WGMMA_REGS_64 ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79," \
  "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
#define RLK_WGMMA_REGS_128 RLK_WGMMA_REGS_96 ",%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108," \
  "%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
#define RLK_ACC4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define RLK_ACC32(i) RLK_ACC4(i), RLK_ACC4(i + 4), RLK_ACC4(i + 8), RLK_ACC4(i + 12), \
  RLK_ACC4(i + 16), RLK_ACC4(i + 20), RLK_ACC4(i + 24), RLK_ACC4(i + 28)
#define RLK_ACC_4 RLK_ACC4(0)
#define RLK_ACC_32 RLK_ACC32(0)
#define RLK_ACC_64 RLK_ACC_32, RLK_ACC32(32)
#define RLK_ACC_96 RLK_ACC_64, RLK_ACC32(64)
#define RLK_ACC_128 RLK_ACC_96, RLK_ACC32(96)
// R accumulators are operands %0..%R-1; then desc_a, desc_b, scale-d, TA, TB are %R..%R+4.
#define RLK_DEFINE_WGMMA(N, R, R1, R2, R3, R4)                                                    \
  template <int TA, int TB>                                                                     \
  __device__ __forceinline__ void wgmma_m64n##N##k16(float (&d)[R], uint64_t desc_a, uint64_t desc_b) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #R2 ", 0;\n"                                \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" RLK_WGMMA_REGS_##R  \
                 "}, %" #R ", %" #R1 ", p, 1, 1, %" #R3 ", %" #R4 ";\n}\n"                         \
                 : RLK_ACC_##R                                                                  \
                 : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TA), "n"(TB));                         \
  }
RLK_DEFINE_WGMMA(8, 4, 5, 6, 7, 8)
RLK_DEFINE_WGMMA(64, 32, 33, 34, 35, 36)
RLK_DEFINE_WGMMA(128, 64, 65, 66, 67, 68)
RLK_DEFINE_WGMMA(192, 96, 97, 98, 99, 100)
RLK_DEFINE_WGMMA(256, 128, 129, 130, 131, 132)
#undef RLK_DEFINE_WGMMA
#undef RLK_ACC_128
#undef RLK_ACC_96
#undef RLK_ACC_64
#undef RLK_ACC_32
#undef RLK_ACC_4
#undef RLK_ACC32
#undef RLK_ACC4
#undef RLK_WGMMA_REGS_128
#undef RLK_WGMMA_REGS_96
#undef RLK_WGMMA_REGS_64
#undef RLK_WGMMA_REGS_32
#undef RLK_WGMMA_REGS_4

// One consumer warpgroup's accumulation of one tile: acc = +0.0f, then for each of `nk` >= 1
// slices in ring order (slot it % STAGES, phase (it / STAGES) & 1): wait until TMA has filled the
// slot, issue the slice's wgmma (`issue(acc, slot)`: its 16-wide k steps, ascending) as one group,
// and release the previous slice's slot once at most this group is pending (`release(slot)`); the
// last slot is released when every group has completed. `it` counts the slices this warpgroup has
// consumed over the CTA's life. So each output is one chain over the tile's k steps in ascending
// order, whatever the tile or the CTA.
template <int STAGES, int R, class Issue, class Release>
__device__ __forceinline__ void accumulate_tile(float (&acc)[R], uint64_t* full, uint32_t& it, int nk,
                                                Issue&& issue, Release&& release) {
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0.0f;
  for (int kt = 0; kt < nk; ++kt, ++it) {
    const int slot = it % STAGES;
    mbar_wait(&full[slot], (it / STAGES) & 1);
    fence_acc(acc);
    wgmma_fence();
    issue(acc, slot);
    wgmma_commit();
    fence_acc(acc);
    wgmma_wait<1>();
    fence_acc(acc);
    if (kt > 0) release((it - 1) % STAGES);
  }
  wgmma_wait<0>();
  fence_acc(acc);
  release((it - 1) % STAGES);
}

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
                "wgmma: cuTensorMapEncodeTiled is not available from the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// Tensor map of a row-major (outer, inner) BF16 matrix moved in boxes of box_inner x box_outer
// elements, 128-byte swizzle (so box_inner = 64); out-of-bounds elements read as zero and are not
// written.
inline CUtensorMap map_2d(const bf16* ptr, int inner, int outer, int box_inner, int box_outer) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(inner) * sizeof(bf16)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_inner), static_cast<cuuint32_t>(box_outer)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_fn()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(ptr), dims, strides, box,
      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "wgmma: cuTensorMapEncodeTiled failed with ", static_cast<int>(r));
  return map;
}

// Whether this is an sm_90 device (the only one these kernels are built for) and every pointer is
// 16-byte aligned (TMA).
inline bool sm90_aligned(std::initializer_list<const void*> ptrs) {
  static int capability[64] = {};  // 10 * major + minor, per device, read once
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device >= 64) return false;
  if (capability[device] == 0) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    capability[device] = 10 * major + minor;
  }
  bool ok = capability[device] == 90;
  for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  return ok;
}

}  // namespace sm90
}  // namespace rlk
