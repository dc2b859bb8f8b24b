// The row ops' backward plan by a stable counting sort, as device code for any block size: the
// positions of idx (int64, values in [0, segments)) in the order of torch.sort(idx, stable=True),
// and the segment and tile starts of row_segments.cu. Used by row_sort_plan's kernels
// (row_segments.cu, 1024 threads) and by norm_modulate's forward, whose launch gives one block of
// 128 threads to the plan beside its row blocks (norm_modulate.cu).
//
// The counts use shared-memory integer atomics, which give the same counts in any order; every
// position's slot then follows from the counts and the positions' order alone, so the plan is the
// same on every run.
#pragma once

#include <c10/util/Exception.h>

#include <cstdint>

namespace rlk {

constexpr int kSortMaxKeys = 256;    // keys counted in shared memory
constexpr int kSortMaxRows = 65536;  // positions
constexpr int kSortBatch = 8;        // idx loads issued together

// The sort's limits, checked on the host by every op that sorts (`op` names it in the message).
inline void check_sort_plan(int64_t positions, int64_t segments, int64_t tile_rows, const char* op) {
  const int64_t most_keys = kSortMaxKeys, most_rows = kSortMaxRows;
  TORCH_CHECK(segments >= 1 && segments <= most_keys, op, ": at most ", most_keys, " table rows");
  TORCH_CHECK(positions <= most_rows, op, ": at most ", most_rows, " positions");
  TORCH_CHECK(tile_rows >= 1, op, ": bad tile_rows");
}

// tile_start[k] = the tiles of the segments before k, segment k making ceil(count / tile_rows)
// tiles, from seg_start (segments + 1 entries); run by one thread.
__device__ inline void write_tile_starts(const int* seg_start, int segments, int tile_rows, int* tile_start) {
  int tiles = 0;
  tile_start[0] = 0;
  for (int k = 0; k < segments; ++k) {
    tiles += (seg_start[k + 1] - seg_start[k] + tile_rows - 1) / tile_rows;
    tile_start[k + 1] = tiles;
  }
}

// The positions [begin, end) of one block of Warps warps, warp w owning [begin + w * chunk,
// begin + (w + 1) * chunk) (chunk a multiple of 32): each warp's count per key in next[w][k], and,
// where `keys` is given, the keys staged as bytes (keys[i - begin]); returns this warp's positions
// as (first, end). Every thread of the block calls it (it synchronizes).
template <int Warps>
__device__ int2 count_keys_by_warp(const int64_t* __restrict__ idx, int begin, int end, int (*next)[kSortMaxKeys],
                                   uint8_t* keys) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < Warps * kSortMaxKeys; i += Warps * 32) (&next[0][0])[i] = 0;
  __syncthreads();
  const int chunk = ((end - begin + Warps - 1) / Warps + 31) / 32 * 32;
  const int warp_begin = min(end, begin + warp * chunk), warp_end = min(end, warp_begin + chunk);
  for (int i0 = warp_begin; i0 < warp_end; i0 += 32 * kSortBatch) {
    int64_t k[kSortBatch];
#pragma unroll
    for (int b = 0; b < kSortBatch; ++b) {
      const int i = i0 + b * 32 + lane;
      k[b] = i < warp_end ? idx[i] : -1;
    }
#pragma unroll
    for (int b = 0; b < kSortBatch; ++b) {
      if (k[b] >= 0) {
        if (keys != nullptr) keys[i0 + b * 32 + lane - begin] = static_cast<uint8_t>(k[b]);
        atomicAdd(&next[warp][k[b]], 1);
      }
    }
  }
  __syncthreads();
  return make_int2(warp_begin, warp_end);
}

// The stable counting sort's scatter by block `block` of Warps warps, over positions
// [block * block_rows, min(n, (block + 1) * block_rows)). With block_counts (blocks x segments,
// each block's count per key) the block is one of several; without, it is the only one
// (block_rows >= n) and counts for itself. Key k's first sorted position is the count of all
// smaller keys (seg_start, written by block 0 with the tile plan); the block's first slot in it
// follows the key's positions in blocks before it, and warp w's the block's positions in warps
// before w. Each warp then walks its positions in rounds of 32 in order; lanes holding the same
// key take consecutive slots in lane order (__match_any_sync); so every key keeps the positions'
// order: the stable sort. `keys`: block_rows bytes of shared memory, where the count stages the
// keys for the scatter.
template <int Warps>
__device__ void sort_positions(const int64_t* __restrict__ idx, int n, int segments, int tile_rows, int block,
                               int block_rows, const int* __restrict__ block_counts, int blocks,
                               int64_t* __restrict__ perm, int* __restrict__ seg_start, int* __restrict__ tile_start,
                               int (*next)[kSortMaxKeys], int* first, uint8_t* keys) {
  const int begin = block * block_rows, end = min(n, begin + block_rows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int2 mine = count_keys_by_warp<Warps>(idx, begin, end, next, keys);
  for (int k = threadIdx.x; k < segments; k += Warps * 32) {
    int total = 0;
    if (block_counts == nullptr) {  // the only block: its own counts are the totals
      for (int w = 0; w < Warps; ++w) total += next[w][k];
    } else {
      for (int b = 0; b < blocks; ++b) total += block_counts[b * segments + k];
    }
    first[k] = total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // at most 256 keys: one thread's scan
    int pos = 0;
    for (int k = 0; k < segments; ++k) {
      const int t = first[k];
      first[k] = pos;
      pos += t;
    }
    if (block == 0) {
      for (int k = 0; k < segments; ++k) seg_start[k] = first[k];
      seg_start[segments] = pos;
      write_tile_starts(seg_start, segments, tile_rows, tile_start);
    }
  }
  __syncthreads();
  for (int k = threadIdx.x; k < segments; k += Warps * 32) {
    int slot = first[k];
    for (int b = 0; b < block; ++b) slot += block_counts[b * segments + k];
    for (int w = 0; w < Warps; ++w) {
      const int c = next[w][k];
      next[w][k] = slot;
      slot += c;
    }
  }
  __syncthreads();
  for (int i0 = mine.x; i0 < mine.y; i0 += 32 * kSortBatch) {
    int key[kSortBatch];
#pragma unroll
    for (int b = 0; b < kSortBatch; ++b) {
      const int i = i0 + b * 32 + lane;
      key[b] = i < mine.y ? keys[i - begin] : -1;
    }
#pragma unroll
    for (int b = 0; b < kSortBatch; ++b) {
      const unsigned peers = __match_any_sync(0xffffffffu, key[b]);
      const int slot = key[b] >= 0 ? next[warp][key[b]] : 0;
      __syncwarp();
      if (key[b] >= 0) {
        perm[slot + __popc(peers & ((1u << lane) - 1))] = i0 + b * 32 + lane;
        if (lane == __ffs(peers) - 1) next[warp][key[b]] = slot + __popc(peers);
      }
      __syncwarp();
    }
  }
}

}  // namespace rlk
