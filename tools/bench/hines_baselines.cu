// GPU kernels of the Hines solver baselines: one time step (factor the current diagonal, solve R
// right-hand sides) of a post-order Hines forest, in three published styles:
//   hines_interleaved    CoreNEURON cell_permute 1: one thread per cell, cells of one shape interleaved
//   hines_dhs            DeepDendrite's Dendritic Hierarchical Scheduling: K lanes per cell, Hu's schedule
//   hines_trsv_*         the thesis's MIN-TRSV: stages around one cuSPARSE gtsv2 call (host enqueues it)
// The tables they read are built by bench/hines_schedules.cpp (layouts described there). Inputs (diag,
// lower, upper, b) are never written, so a step can be replayed; x and the scratch arrays are
// outputs. The file compiles on its own (nvcc -c, or NVRTC at run time) with
//   HINES_REAL (double or float), HINES_RHS (R) and HINES_RHS_CHUNK (columns kept in registers).
#ifndef HINES_REAL
#define HINES_REAL double
#endif
#ifndef HINES_RHS
#define HINES_RHS 1
#endif
#ifndef HINES_RHS_CHUNK
#define HINES_RHS_CHUNK (HINES_RHS < 8 ? HINES_RHS : 8)
#endif

typedef HINES_REAL real;

// Full unrolling of the per-column loops (register arrays); nothing when the file is compiled as host
// C++ (the unit tests run these kernels on the CPU).
#ifdef __CUDACC__
#define HINES_UNROLL _Pragma("unroll")
#else
#define HINES_UNROLL
#endif

#define HINES_BLOCK 128

// Node code flags of the interleaved layout (hines_schedules.hpp): code = ((parent + 1) << 3) | flags.
#define HINES_HAS_CHILDREN 1
#define HINES_MULTI_CHILD 2
#define HINES_FIRST_CHILD 4

// One cell, one thread. Pointers are offset to the cell: node i at i * stride, column k of node i at
// (i * R + k) * stride. Chunk by chunk of C columns: forward elimination (fused with the factorisation
// in the first chunk: pivots become reciprocals in `inv`), then back-substitution. A node's last child
// is the node just before it, so its contribution travels in registers; earlier children accumulate
// in the parent's own inv/x slots (the first one stores, later ones add).
template <typename T, int R, int C>
__device__ __forceinline__ void interleaved_cell(int n, int stride, const int* __restrict__ code,
                                                 const T* __restrict__ diag, const T* __restrict__ lower,
                                                 const T* __restrict__ upper, const T* __restrict__ b,
                                                 T* __restrict__ inv, T* __restrict__ x) {
  for (int c0 = 0; c0 < R; c0 += C) {
    const bool factor = c0 == 0;
    T carry_d = T(0);
    T carry[C];
    HINES_UNROLL
    for (int k = 0; k < C; ++k) carry[k] = T(0);
    for (int i = 0; i < n; ++i) {
      const int w = code[i];
      const int p = (w >> 3) - 1;
      const int o = i * stride;
      T bb[C];
      HINES_UNROLL
      for (int k = 0; k < C; ++k) bb[k] = c0 + k < R ? b[(i * R + c0 + k) * stride] : T(0);
      T iv;
      if (factor) {
        T d = diag[o];
        if (w & HINES_HAS_CHILDREN) {
          d -= carry_d;
          if (w & HINES_MULTI_CHILD) d -= inv[o];
        }
        iv = T(1) / d;
        inv[o] = iv;
      } else {
        iv = inv[o];
      }
      if (w & HINES_HAS_CHILDREN) {
        HINES_UNROLL
        for (int k = 0; k < C; ++k)
          if (c0 + k < R) {
            bb[k] -= carry[k];
            if (w & HINES_MULTI_CHILD) bb[k] -= x[(i * R + c0 + k) * stride];
          }
      }
      HINES_UNROLL
      for (int k = 0; k < C; ++k)
        if (c0 + k < R) x[(i * R + c0 + k) * stride] = bb[k];
      if (p < 0) continue;
      const T f = lower[o] * iv;
      const T fu = factor ? f * upper[o] : T(0);
      if (p == i + 1) {
        carry_d = fu;
        HINES_UNROLL
        for (int k = 0; k < C; ++k) carry[k] = f * bb[k];
      } else if (w & HINES_FIRST_CHILD) {
        if (factor) inv[p * stride] = fu;
        HINES_UNROLL
        for (int k = 0; k < C; ++k)
          if (c0 + k < R) x[(p * R + c0 + k) * stride] = f * bb[k];
      } else {
        if (factor) inv[p * stride] += fu;
        HINES_UNROLL
        for (int k = 0; k < C; ++k)
          if (c0 + k < R) x[(p * R + c0 + k) * stride] += f * bb[k];
      }
    }
    T next[C];  // x of node i + 1
    HINES_UNROLL
    for (int k = 0; k < C; ++k) next[k] = T(0);
    for (int i = n - 1; i >= 0; --i) {
      const int p = (code[i] >> 3) - 1;
      const int o = i * stride;
      const T iv = inv[o];
      T xv[C];
      HINES_UNROLL
      for (int k = 0; k < C; ++k) xv[k] = c0 + k < R ? x[(i * R + c0 + k) * stride] : T(0);
      if (p < 0) {
        HINES_UNROLL
        for (int k = 0; k < C; ++k) xv[k] *= iv;
      } else {
        const T u = upper[o];
        if (p == i + 1) {
          HINES_UNROLL
          for (int k = 0; k < C; ++k) xv[k] = (xv[k] - u * next[k]) * iv;
        } else {
          HINES_UNROLL
          for (int k = 0; k < C; ++k)
            if (c0 + k < R) xv[k] = (xv[k] - u * x[(p * R + c0 + k) * stride]) * iv;
        }
      }
      HINES_UNROLL
      for (int k = 0; k < C; ++k)
        if (c0 + k < R) {
          x[(i * R + c0 + k) * stride] = xv[k];
          next[k] = xv[k];
        }
    }
  }
}

// groups: 5 ints per group (nodes, stride, cells, data_base, code_offset); warps: 2 ints per warp
// (group, first cell slot). One thread per cell slot; padding slots return at once.
template <typename T, int R, int C>
__device__ __forceinline__ void interleaved_kernel(const int* __restrict__ groups,
                                                   const int* __restrict__ warps, int nwarps,
                                                   const int* __restrict__ code, const T* __restrict__ diag,
                                                   const T* __restrict__ lower, const T* __restrict__ upper,
                                                   const T* __restrict__ b, T* __restrict__ inv,
                                                   T* __restrict__ x) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int warp = t >> 5;
  if (warp >= nwarps) return;
  const int* g = groups + 5 * warps[2 * warp];
  const int slot = warps[2 * warp + 1] + (t & 31);
  if (slot >= g[2]) return;
  const int base = g[3] + slot;
  const int rbase = g[3] * R + slot;
  interleaved_cell<T, R, C>(g[0], g[1], code + g[4], diag + base, lower + base, upper + base, b + rbase,
                            inv + base, x + rbase);
}

// One cell on K lanes (lane l of the cell's sub-warp `mask`), pointers offset to the cell's slots;
// column k of slot s at k * steps * K + s. Step t: lane l eliminates the node in slot t * K + l, pulling
// its children's contributions (fu = f * upper, and f times their eliminated right-hand sides) in
// ascending child order: every update of a node is made by its own lane, so there are no write
// conflicts and no atomics, and the result does not depend on timing. Back-substitution runs the
// steps in reverse. __syncwarp(mask) orders the steps.
template <typename T, int R, int C>
__device__ __forceinline__ void dhs_cell(int steps, int k_threads, int lane, unsigned mask,
                                         const int* __restrict__ table, const int* __restrict__ children,
                                         const T* __restrict__ diag, const T* __restrict__ lower,
                                         const T* __restrict__ upper, const T* __restrict__ b,
                                         T* __restrict__ inv, T* __restrict__ fac, T* __restrict__ fu,
                                         T* __restrict__ x) {
  const int slots = steps * k_threads;
  for (int c0 = 0; c0 < R; c0 += C) {
    const bool factor = c0 == 0;
    for (int t = 0; t < steps; ++t) {
      const int s = t * k_threads + lane;
#ifdef __CUDACC__
      const int4 e = *reinterpret_cast<const int4*>(table + 4 * s);
      const int p = e.x, first = e.y, count = e.z;
#else
      const int p = table[4 * s], first = table[4 * s + 1], count = table[4 * s + 2];
#endif
      if (p != -2) {
        T bb[C];
        HINES_UNROLL
        for (int k = 0; k < C; ++k) bb[k] = c0 + k < R ? b[(c0 + k) * slots + s] : T(0);
        T d = factor ? diag[s] : T(0);
        for (int j = first; j < first + count; ++j) {
          const int cs = children[j];
          if (factor) d -= fu[cs];
          const T f = fac[cs];
          HINES_UNROLL
          for (int k = 0; k < C; ++k)
            if (c0 + k < R) bb[k] -= f * x[(c0 + k) * slots + cs];
        }
        if (factor) {
          const T iv = T(1) / d;
          inv[s] = iv;
          if (p >= 0) {
            const T f = lower[s] * iv;
            fac[s] = f;
            fu[s] = f * upper[s];
          }
        }
        HINES_UNROLL
        for (int k = 0; k < C; ++k)
          if (c0 + k < R) x[(c0 + k) * slots + s] = bb[k];
      }
      __syncwarp(mask);
    }
    for (int t = steps - 1; t >= 0; --t) {
      const int s = t * k_threads + lane;
      const int p = table[4 * s];
      if (p != -2) {
        const T iv = inv[s];
        const T u = p >= 0 ? upper[s] : T(0);
        HINES_UNROLL
        for (int k = 0; k < C; ++k)
          if (c0 + k < R) {
            T v = x[(c0 + k) * slots + s];
            if (p >= 0) v -= u * x[(c0 + k) * slots + p];
            x[(c0 + k) * slots + s] = v * iv;
          }
      }
      __syncwarp(mask);
    }
  }
}

// cells: 4 ints per cell (slot base, table offset in slots, steps, 0); floor(32 / K) cells per warp,
// each on K consecutive lanes.
template <typename T, int R, int C>
__device__ __forceinline__ void dhs_kernel(const int* __restrict__ cells, int ncells, int k_threads,
                                           const int* __restrict__ tables, const int* __restrict__ children,
                                           const T* __restrict__ diag, const T* __restrict__ lower,
                                           const T* __restrict__ upper, const T* __restrict__ b,
                                           T* __restrict__ inv, T* __restrict__ fac, T* __restrict__ fu,
                                           T* __restrict__ x) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = t & 31;
  const int per_warp = 32 / k_threads;
  const int sub = lane / k_threads;
  if (sub >= per_warp) return;
  const int cell = (t >> 5) * per_warp + sub;
  if (cell >= ncells) return;
  const unsigned mask = (k_threads == 32 ? 0xffffffffu : ((1u << k_threads) - 1u)) << (sub * k_threads);
  const int* c = cells + 4 * cell;
  const int base = c[0];
  dhs_cell<T, R, C>(c[2], k_threads, lane - sub * k_threads, mask, tables + 4 * c[1], children, diag + base,
                    lower + base, upper + base, b + base * R, inv + base, fac + base, fu + base,
                    x + base * R);
}

// MIN-TRSV stage 0: T (rows per hines_schedules.hpp: junction rows and padding rows are identity)
// and its right-hand-side block, column-major m x (R + 2): R columns of b, then the P column
// (upper[e] at the last row of every chain with a parent junction) and the Q column (lower[s - 1] at
// the first row of every chain with a child junction). One thread per row of T.
template <typename T, int R>
__device__ __forceinline__ void trsv_assemble_kernel(int n, int m, const int* __restrict__ rows,
                                                     const T* __restrict__ diag, const T* __restrict__ lower,
                                                     const T* __restrict__ upper, const T* __restrict__ b,
                                                     T* __restrict__ dl, T* __restrict__ d,
                                                     T* __restrict__ du, T* __restrict__ rhs) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= m) return;
  const int* info = rows + 4 * r;
  if (r >= n || info[0] >= 0) {
    dl[r] = T(0);
    d[r] = T(1);
    du[r] = T(0);
    for (int k = 0; k < R + 2; ++k) rhs[k * m + r] = T(0);
    return;
  }
  const int flags = info[3];
  const bool first = flags & 1, last = flags & 2;
  d[r] = diag[r];
  dl[r] = first ? T(0) : lower[r - 1];
  du[r] = last ? T(0) : upper[r];
  for (int k = 0; k < R; ++k) rhs[k * m + r] = b[r * R + k];
  rhs[R * m + r] = last && info[1] >= 0 ? upper[r] : T(0);
  rhs[(R + 1) * m + r] = first && info[2] >= 0 ? lower[r - 1] : T(0);
}

// MIN-TRSV stage 2, one thread per junction k: its row of the (negated) domain system, gathered from
// the chains that touch it in a fixed order. X is T's solution block (R columns, then P, then Q).
template <typename T, int R>
__device__ __forceinline__ void trsv_stage2_kernel(
    int nj, int m, const int* __restrict__ junctions, const int* __restrict__ gather_offsets,
    const int* __restrict__ gather, const int* __restrict__ chains, const T* __restrict__ diag,
    const T* __restrict__ lower, const T* __restrict__ upper, const T* __restrict__ b,
    const T* __restrict__ X, T* __restrict__ md, T* __restrict__ mu, T* __restrict__ ml, T* __restrict__ mb) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= nj) return;
  const int j = junctions[2 * k];
  const T* P = X + R * m;
  const T* Q = X + (R + 1) * m;
  const int g0 = gather_offsets[k], g1 = gather_offsets[k + 1];
  T d = -diag[j], u = T(0), l = T(0);
  if (junctions[2 * k + 1]) {
    u = -upper[j];
    l = -lower[j];
  }
  for (int g = g0; g < g1; ++g) {
    const int* ch = chains + 4 * gather[g];
    const int s = ch[0], e = ch[1], pj = ch[2];
    if (pj == k) {  // the chain below: its last row couples to this junction
      d += lower[e] * P[e];
    } else {  // the chain above: its first row couples to this junction
      const T us = upper[s - 1];
      d += us * Q[s];
      if (pj >= 0) {
        u = us * P[s];
        l = lower[e] * Q[e];
      }
    }
  }
  md[k] = d;
  mu[k] = u;
  ml[k] = l;
  for (int c = 0; c < R; ++c) {  // the right-hand sides, column by column, in the same order
    T acc = -b[j * R + c];
    for (int g = g0; g < g1; ++g) {
      const int* ch = chains + 4 * gather[g];
      if (ch[2] == k) {
        acc += lower[ch[1]] * X[c * m + ch[1]];
      } else {
        acc += upper[ch[0] - 1] * X[c * m + ch[0]];
      }
    }
    mb[k * R + c] = acc;
  }
}

// MIN-TRSV stage 3: the domain system (a Hines forest, one tree per cell) by serial Hines
// elimination, one thread per cell's domain tree; md becomes the pivots and mb the solution.
template <typename T, int R>
__device__ __forceinline__ void trsv_stage3_kernel(int ncells, const int* __restrict__ cell_offsets,
                                                   const int* __restrict__ dparent, T* __restrict__ md,
                                                   const T* __restrict__ mu, const T* __restrict__ ml,
                                                   T* __restrict__ mb) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= ncells) return;
  const int begin = cell_offsets[c], end = cell_offsets[c + 1];
  for (int k = begin; k < end; ++k) {
    const int p = dparent[k];
    if (p < 0) continue;
    const T f = ml[k] / md[k];
    md[p] -= f * mu[k];
    for (int q = 0; q < R; ++q) mb[p * R + q] -= f * mb[k * R + q];
  }
  for (int k = end - 1; k >= begin; --k) {
    const int p = dparent[k];
    const T iv = T(1) / md[k];
    for (int q = 0; q < R; ++q) {
      T v = mb[k * R + q];
      if (p >= 0) v -= mu[k] * mb[p * R + q];
      mb[k * R + q] = v * iv;
    }
  }
}

// MIN-TRSV stage 4, one thread per row: junction rows take the domain solution, chain rows
// x = X - Mx[parent junction] P - Mx[child junction] Q. x is N x R row-major.
template <typename T, int R>
__device__ __forceinline__ void trsv_stage4_kernel(int n, int m, const int* __restrict__ rows,
                                                   const T* __restrict__ X, const T* __restrict__ mx,
                                                   T* __restrict__ x) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const int* info = rows + 4 * r;
  if (info[0] >= 0) {
    for (int c = 0; c < R; ++c) x[r * R + c] = mx[info[0] * R + c];
    return;
  }
  const int pj = info[1], cj = info[2];
  const T p = pj >= 0 ? X[R * m + r] : T(0);
  const T q = cj >= 0 ? X[(R + 1) * m + r] : T(0);
  for (int c = 0; c < R; ++c) {
    T v = X[c * m + r];
    if (pj >= 0) v -= mx[pj * R + c] * p;
    if (cj >= 0) v -= mx[cj * R + c] * q;
    x[r * R + c] = v;
  }
}

extern "C" __global__ void __launch_bounds__(HINES_BLOCK)
    hines_interleaved(const int* __restrict__ groups, const int* __restrict__ warps, int nwarps,
                      const int* __restrict__ code, const real* __restrict__ diag,
                      const real* __restrict__ lower, const real* __restrict__ upper,
                      const real* __restrict__ b, real* __restrict__ inv, real* __restrict__ x) {
  interleaved_kernel<real, HINES_RHS, HINES_RHS_CHUNK>(groups, warps, nwarps, code, diag, lower, upper, b,
                                                       inv, x);
}

extern "C" __global__ void __launch_bounds__(HINES_BLOCK)
    hines_dhs(const int* __restrict__ cells, int ncells, int k_threads, const int* __restrict__ tables,
              const int* __restrict__ children, const real* __restrict__ diag, const real* __restrict__ lower,
              const real* __restrict__ upper, const real* __restrict__ b, real* __restrict__ inv,
              real* __restrict__ fac, real* __restrict__ fu, real* __restrict__ x) {
  dhs_kernel<real, HINES_RHS, HINES_RHS_CHUNK>(cells, ncells, k_threads, tables, children, diag, lower, upper,
                                               b, inv, fac, fu, x);
}

extern "C" __global__ void __launch_bounds__(HINES_BLOCK)
    hines_trsv_assemble(int n, int m, const int* __restrict__ rows, const real* __restrict__ diag,
                        const real* __restrict__ lower, const real* __restrict__ upper,
                        const real* __restrict__ b, real* __restrict__ dl, real* __restrict__ d,
                        real* __restrict__ du, real* __restrict__ rhs) {
  trsv_assemble_kernel<real, HINES_RHS>(n, m, rows, diag, lower, upper, b, dl, d, du, rhs);
}

extern "C" __global__ void __launch_bounds__(HINES_BLOCK)
    hines_trsv_stage2(int nj, int m, const int* __restrict__ junctions,
                      const int* __restrict__ gather_offsets, const int* __restrict__ gather,
                      const int* __restrict__ chains, const real* __restrict__ diag,
                      const real* __restrict__ lower, const real* __restrict__ upper,
                      const real* __restrict__ b, const real* __restrict__ X, real* __restrict__ md,
                      real* __restrict__ mu, real* __restrict__ ml, real* __restrict__ mb) {
  trsv_stage2_kernel<real, HINES_RHS>(nj, m, junctions, gather_offsets, gather, chains, diag, lower, upper, b,
                                      X, md, mu, ml, mb);
}

extern "C" __global__ void __launch_bounds__(HINES_BLOCK)
    hines_trsv_stage3(int ncells, const int* __restrict__ cell_offsets, const int* __restrict__ dparent,
                      real* __restrict__ md, const real* __restrict__ mu, const real* __restrict__ ml,
                      real* __restrict__ mb) {
  trsv_stage3_kernel<real, HINES_RHS>(ncells, cell_offsets, dparent, md, mu, ml, mb);
}

extern "C" __global__ void __launch_bounds__(HINES_BLOCK)
    hines_trsv_stage4(int n, int m, const int* __restrict__ rows, const real* __restrict__ X,
                      const real* __restrict__ mx, real* __restrict__ x) {
  trsv_stage4_kernel<real, HINES_RHS>(n, m, rows, X, mx, x);
}
