// Exhaustive check, on the GPU, of the three BF16 identities the row kernels rely on:
//   add: add.rn.bf16x2(a, b)  == bf16(fp32(a) + fp32(b))   for every pair of BF16 bit patterns
//   mul: mul.rn.bf16x2(a, b)  == bf16(fp32(a) * fp32(b))   for every pair of BF16 bit patterns
//   cvt: cvt.rn.bf16x2.f32(f, g) == (cvt.rn.bf16.f32(f), cvt.rn.bf16.f32(g)) for every FP32 pattern f
// where the right-hand sides are what eager (and the kernels before the bf16x2 forms) compute:
// the FP32 op rounded to nearest even, then one conversion to BF16. Comparison is of bits (NaN
// included). Prints the mismatch count of each and up to 4 examples.
//   nvcc -O3 -arch=sm_90a check_bf16x2.cu -o check_bf16x2 && ./check_bf16x2
#include <cuda_bf16.h>
#include <cstdint>
#include <cstdio>

__device__ unsigned long long mismatches[3];
__device__ uint32_t examples[3][4][3];

__device__ __forceinline__ uint32_t bits(__nv_bfloat162 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __nv_bfloat162 pair(uint32_t u) { return *reinterpret_cast<__nv_bfloat162*>(&u); }
__device__ __forceinline__ uint32_t one(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
__device__ __forceinline__ float widen(uint32_t h) { return __uint_as_float(h << 16); }

__device__ void record(int which, uint32_t a, uint32_t b, uint32_t got) {
  const unsigned long long n = atomicAdd(&mismatches[which], 1ull);
  if (n < 4) {
    examples[which][n][0] = a;
    examples[which][n][1] = b;
    examples[which][n][2] = got;
  }
}

__global__ void check(uint64_t total) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t a = static_cast<uint32_t>(i >> 16), b = static_cast<uint32_t>(i & 0xffff);
    // low lane (a, b), high lane (b, a)
    const uint32_t u = a | (b << 16), v = b | (a << 16);
    const uint32_t add = bits(__hadd2_rn(pair(u), pair(v))), mul = bits(__hmul2_rn(pair(u), pair(v)));
    const uint32_t add_ref = one(__fadd_rn(widen(a), widen(b))) | (one(__fadd_rn(widen(b), widen(a))) << 16);
    const uint32_t mul_ref = one(__fmul_rn(widen(a), widen(b))) | (one(__fmul_rn(widen(b), widen(a))) << 16);
    if (add != add_ref) record(0, a, b, add);
    if (mul != mul_ref) record(1, a, b, mul);
    const uint32_t f = static_cast<uint32_t>(i), g = ~f;
    const uint32_t cvt = bits(__floats2bfloat162_rn(__uint_as_float(f), __uint_as_float(g)));
    if (cvt != (one(__uint_as_float(f)) | (one(__uint_as_float(g)) << 16))) record(2, f, g, cvt);
  }
}

int main() {
  check<<<132 * 16, 256>>>(1ull << 32);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    printf("CUDA error: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  unsigned long long n[3];
  uint32_t ex[3][4][3];
  cudaMemcpyFromSymbol(n, mismatches, sizeof n);
  cudaMemcpyFromSymbol(ex, examples, sizeof ex);
  const char* names[3] = {"add.rn.bf16x2 vs bf16(fp32 add)", "mul.rn.bf16x2 vs bf16(fp32 mul)",
                          "cvt.rn.bf16x2.f32 vs two cvt.rn.bf16.f32"};
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("device: %s, sm_%d%d; 2^32 cases each\n", prop.name, prop.major, prop.minor);
  int bad = 0;
  for (int k = 0; k < 3; ++k) {
    printf("%-45s mismatches: %llu\n", names[k], n[k]);
    for (unsigned long long e = 0; e < n[k] && e < 4; ++e)
      printf("    a=0x%08x b=0x%08x got=0x%08x\n", ex[k][e][0], ex[k][e][1], ex[k][e][2]);
    bad |= n[k] != 0;
  }
  return bad;
}
