// How many thread-block clusters the device holds at once (cudaOccupancyMaxActiveClusters), by
// cluster size, threads per block and dynamic shared memory per block (which sets the blocks an SM
// holds), for an empty kernel: the residency a clustered backward with one cluster per tile meets.
// Prints the SMs, the blocks an SM holds by itself (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
// and the clusters and blocks held at once.
//   nvcc -O2 -arch=sm_90a -o cluster_residency cluster_residency.cu && ./cluster_residency
#include <cstdio>
#include <cuda_runtime.h>

__global__ void empty_kernel(int* out) {
  extern __shared__ int smem[];
  if (out != nullptr) out[0] = smem[0];
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s: %d SMs, %zu bytes of shared memory per SM, %zu per block (opt-in)\n", prop.name,
              prop.multiProcessorCount, prop.sharedMemPerMultiprocessor, prop.sharedMemPerBlockOptin);
  cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(prop.sharedMemPerBlockOptin));
  cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  const int threads_list[] = {128, 224, 256, 512, 768};
  const int per_sm_list[] = {1, 2, 3, 4, 6};
  const int cluster_list[] = {1, 2, 3, 4, 6, 8};
  std::printf("threads  blocks/SM(smem)  smem_bytes  blocks/SM(query) | clusters of 1 2 3 4 6 8 (blocks held)\n");
  for (int threads : threads_list) {
    for (int per_sm : per_sm_list) {
      const int smem = static_cast<int>(prop.sharedMemPerMultiprocessor / per_sm) - 1024;
      if (smem > static_cast<int>(prop.sharedMemPerBlockOptin) || threads * per_sm > 2048) continue;
      int blocks_per_sm = 0;
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, empty_kernel, threads, smem);
      std::printf("%7d  %15d  %10d  %16d |", threads, per_sm, smem, blocks_per_sm);
      for (int c : cluster_list) {
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = c;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(c * 64);
        cfg.blockDim = dim3(threads);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int clusters = 0;
        const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, empty_kernel, &cfg);
        if (err != cudaSuccess) {
          std::printf(" %s", cudaGetErrorName(err));
          cudaGetLastError();
        } else {
          std::printf(" %4d (%4d)", clusters, clusters * c);
        }
      }
      std::printf("\n");
    }
  }
  return 0;
}
