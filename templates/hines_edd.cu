// Hines exact domain decomposition executor: the plan's chains, junctions and gathers are read from
// the executor's int32 table section, the level schedule and the workspace layout are compile-time
// constants of the emitted module, and each cell's base is read from the tables too (code mode
// tables) or compiled in as straight-line code (code mode unrolled, the BASE insertion point). The arithmetic
// follows interpret_hines (plan/hines_interpreter.cpp) operation by operation, so results agree with it to
// rounding.
//
// Insertion points (emit/hines_cuda.cpp fills them; the defaults keep the skeleton compilable):
//   REAL           the arithmetic type (double or float)
//   RHS            R, right-hand sides per row
//   BLOCK_THREADS  threads of hines_block
//   LAYOUT         the level constants: kFirst (G, levels run by the grid kernels), kLevels (levels run
//                  by hines_block), kSegStride, kSharedFrom (the first level whose arrays are in the
//                  block's dynamic shared memory; kFirst + kLevels when none), kOff (offsets of every
//                  level's arrays in the workspace, or in shared memory from kSharedFrom on, in
//                  elements of real), kBasePiv, kChainMax and kBaseMax (the longest chain, the largest base),
//                  kBaseShared (bases staged in shared memory) and kUnrolledBase (code mode unrolled)
//   BASE           unrolled mode: one function per distinct base structure, the elimination in
//                  straight-line code with the parent offsets as immediates, and base_unrolled, which
//                  picks the function of a segment type
//
// Values are N x R row-major (the R values of row i at [i * R, i * R + R)). A chain is four ints:
// begin, end, parent junction, child junction (-1: none).
typedef /*@REAL*/double/*@end*/ real;
constexpr int R = /*@RHS*/1/*@end*/;
constexpr int kBlockThreads = /*@BLOCK_THREADS*/256/*@end*/;

// Workspace arrays of one level l, in kOff[l]: stage-1 results of level l, then level l + 1's matrix
// (the negated domain system) and its solution.
enum { RV, PV, QV, PIV, W, MD, MU, ML, MB, MX, kArrays };

/*@LAYOUT*/
constexpr int kFirst = 0, kLevels = 1, kSegStride = 3, kSharedFrom = 1;
__constant__ long long kOff[1][kArrays] = {{0, 8, 16, 24, 32, 40, 48, 56, 64, 72}};
constexpr long long kBasePiv = 80;
constexpr int kChainMax = 2, kBaseMax = 8, kRegChainMax = 8;
constexpr bool kBaseShared = true, kUnrolledBase = false;
/*@end*/

// Chains of up to kRegChain rows are solved in registers: all their loads are issued at once and
// only rv, pv and qv are stored (the factorisation stays in registers). Longer chains (minimal
// decomposition, large K) take the loop that keeps piv and w in the workspace. kRegChainMax is the
// plan's (kHinesRegisterChain, which sizes the workspace accordingly).
constexpr int kRegChain = kChainMax < 1 ? 1 : kChainMax < kRegChainMax ? kChainMax : kRegChainMax;
// Neighbour indices of the unrolled register chain, clamped so that no expression indexes outside
// the arrays even where its guard is false (an out-of-range constant index sends the array to local
// memory).
__device__ constexpr int dn(int k) { return k > 0 ? k - 1 : 0; }
__device__ constexpr int up(int k) { return k + 1 < kRegChain ? k + 1 : k; }
// kBaseShared: a segment's base is staged in shared memory (loaded by the whole block, eliminated
// there by one thread) when it fits in 24 KiB (plan/hines_plan.hpp, hines_base_shared_bytes);
// otherwise the thread works on global memory.

// Stage 1 for one chain: T = tridiag(l, d, u) over rows begin..end; rv = T^-1 b (R columns),
// pv = T^-1 (u[end] e_last), qv = T^-1 (l[begin-1] e_first); piv and w are the factorisation.
__device__ __forceinline__ void chain_solve(const int* __restrict__ ch, const real* __restrict__ d,
                                            const real* __restrict__ u, const real* __restrict__ l,
                                            const real* __restrict__ b, real* __restrict__ rv,
                                            real* __restrict__ pv, real* __restrict__ qv, real* __restrict__ piv,
                                            real* __restrict__ w) {
  const int s = ch[0], e = ch[1], pj = ch[2], cj = ch[3];
  const int n = e - s + 1;
  if constexpr (kChainMax > kRegChain) {
    if (n > kRegChain) {
      for (int i = s; i <= e; ++i) {
        piv[i] = real(1) / (i == s ? d[i] : d[i] - l[i - 1] * w[i - 1]);  // the pivot's reciprocal
        if (i < e) w[i] = u[i] * piv[i];
      }
#pragma unroll
      for (int col = 0; col < R; ++col) {
        for (int i = s; i <= e; ++i) {
          real y = b[(long long)i * R + col];
          if (i > s) y -= l[i - 1] * rv[(long long)(i - 1) * R + col];
          rv[(long long)i * R + col] = y * piv[i];
        }
        for (int i = e - 1; i >= s; --i) rv[(long long)i * R + col] -= w[i] * rv[(long long)(i + 1) * R + col];
      }
      if (pj >= 0) {
        pv[e] = u[e] * piv[e];
        for (int i = e - 1; i >= s; --i) pv[i] = -w[i] * pv[i + 1];
      }
      if (cj >= 0) {
        for (int i = s; i <= e; ++i) qv[i] = (i == s ? l[s - 1] : -l[i - 1] * qv[i - 1]) * piv[i];
        for (int i = e - 1; i >= s; --i) qv[i] -= w[i] * qv[i + 1];
      }
      return;
    }
  }
  // The arithmetic of the loop above, unrolled over kRegChain rows with k < n guards.
  real dd[kRegChain], uu[kRegChain], lm[kRegChain], bb[kRegChain][R];  // lm[k] = l[s + k - 1]
#pragma unroll
  for (int k = 0; k < kRegChain; ++k)
    if (k < n) {
      dd[k] = d[s + k];
      uu[k] = u[s + k];
      lm[k] = k > 0 || cj >= 0 ? l[s + k - 1] : real(0);
#pragma unroll
      for (int col = 0; col < R; ++col) bb[k][col] = b[(long long)(s + k) * R + col];
    }
  real pk[kRegChain], wk[kRegChain];  // pk: the pivots' reciprocals
#pragma unroll
  for (int k = 0; k < kRegChain; ++k)
    if (k < n) {
      pk[k] = real(1) / (k == 0 ? dd[0] : dd[k] - lm[k] * wk[dn(k)]);
      if (k < n - 1) wk[k] = uu[k] * pk[k];
    }
#pragma unroll
  for (int col = 0; col < R; ++col) {
    real y[kRegChain];
#pragma unroll
    for (int k = 0; k < kRegChain; ++k)
      if (k < n) {
        real v = bb[k][col];
        if (k > 0) v -= lm[k] * y[dn(k)];
        y[k] = v * pk[k];
      }
#pragma unroll
    for (int k = kRegChain - 2; k >= 0; --k)
      if (k < n - 1) y[k] -= wk[k] * y[up(k)];
#pragma unroll
    for (int k = 0; k < kRegChain; ++k)
      if (k < n) rv[(long long)(s + k) * R + col] = y[k];
  }
  if (pj >= 0) {
    real p[kRegChain];
#pragma unroll
    for (int k = kRegChain - 1; k >= 0; --k)
      if (k == n - 1) {
        p[k] = uu[k] * pk[k];
      } else if (k < n - 1) {
        p[k] = -wk[k] * p[up(k)];
      }
#pragma unroll
    for (int k = 0; k < kRegChain; ++k)
      if (k < n) pv[s + k] = p[k];
  }
  if (cj >= 0) {
    real q[kRegChain];
#pragma unroll
    for (int k = 0; k < kRegChain; ++k)
      if (k < n) q[k] = (k == 0 ? lm[0] : -lm[k] * q[dn(k)]) * pk[k];
#pragma unroll
    for (int k = kRegChain - 2; k >= 0; --k)
      if (k < n - 1) q[k] -= wk[k] * q[up(k)];
#pragma unroll
    for (int k = 0; k < kRegChain; ++k)
      if (k < n) qv[s + k] = q[k];
  }
}

// Stage 2 for junction k: its row of the negated domain system, gathering its chains in plan order.
__device__ __forceinline__ void junction_row(int k, const int* __restrict__ junctions, const int* __restrict__ direct,
                                             const int* __restrict__ gather_offsets, const int* __restrict__ gather,
                                             const int* __restrict__ chains, const real* __restrict__ d,
                                             const real* __restrict__ u, const real* __restrict__ l,
                                             const real* __restrict__ b, const real* rv, const real* pv,
                                             const real* qv, real* md, real* mu, real* ml, real* mb) {
  const int j = junctions[k];
  real dk = -d[j], uk = 0, lk = 0;
  if (direct[k]) {
    uk = -u[j];
    lk = -l[j];
  }
  real acc[R];
#pragma unroll
  for (int col = 0; col < R; ++col) acc[col] = -b[(long long)j * R + col];
  const int g1 = gather_offsets[k + 1];
  for (int g = gather_offsets[k]; g < g1; ++g) {
    const int* ch = chains + 4 * gather[g];
    const int s = ch[0], e = ch[1], pj = ch[2];
    if (pj == k) {
      dk += l[e] * pv[e];
#pragma unroll
      for (int col = 0; col < R; ++col) acc[col] += l[e] * rv[(long long)e * R + col];
    } else {
      dk += u[s - 1] * qv[s];
#pragma unroll
      for (int col = 0; col < R; ++col) acc[col] += u[s - 1] * rv[(long long)s * R + col];
      if (pj >= 0) {
        uk = u[s - 1] * pv[s];
        lk = l[e] * qv[e];
      }
    }
  }
  md[k] = dk;
  mu[k] = uk;
  ml[k] = lk;
#pragma unroll
  for (int col = 0; col < R; ++col) mb[(long long)k * R + col] = acc[col];
}

// Stage 4 for one chain: x = rv - Mx[parent junction] pv - Mx[child junction] qv.
__device__ __forceinline__ void chain_back(const int* __restrict__ ch, const real* rv, const real* pv,
                                           const real* qv, const real* mx, real* x) {
  const int s = ch[0], e = ch[1], pj = ch[2], cj = ch[3];
  for (int i = s; i <= e; ++i)
#pragma unroll
    for (int col = 0; col < R; ++col) {
      real v = rv[(long long)i * R + col];
      if (pj >= 0) v -= mx[(long long)pj * R + col] * pv[i];
      if (cj >= 0) v -= mx[(long long)cj * R + col] * qv[i];
      x[(long long)i * R + col] = v;
    }
}

// The base: serial Hines elimination of a small forest by one thread; d, u, l and b are read only,
// the pivots' reciprocals go to piv and the solution to x.
__device__ __forceinline__ void base_solve(const int* __restrict__ parent, int n, const real* __restrict__ d,
                                           const real* __restrict__ u, const real* __restrict__ l,
                                           const real* __restrict__ b, real* __restrict__ piv,
                                           real* __restrict__ x) {
  for (int i = 0; i < n; ++i) {
    piv[i] = d[i];
#pragma unroll
    for (int col = 0; col < R; ++col) x[(long long)i * R + col] = b[(long long)i * R + col];
  }
  for (int i = 0; i < n; ++i) {
    const real inv = real(1) / piv[i];  // row i's pivot is final: its children come before it
    piv[i] = inv;
    const int p = parent[i];
    if (p < 0) continue;
    const real f = l[i] * inv;
    piv[p] -= f * u[i];
#pragma unroll
    for (int col = 0; col < R; ++col) x[(long long)p * R + col] -= f * x[(long long)i * R + col];
  }
  for (int i = n - 1; i >= 0; --i) {
    const int p = parent[i];
#pragma unroll
    for (int col = 0; col < R; ++col) {
      real v = x[(long long)i * R + col];
      if (p >= 0) v -= u[i] * x[(long long)p * R + col];
      x[(long long)i * R + col] = v * piv[i];
    }
  }
}

// Unrolled bases. Each function eliminates one base structure in place on the staged arrays (piv
// holds d on entry, x holds b): the arithmetic of base_solve, row by row. base_unrolled(type, ...)
// runs the function of the segment type whose table starts at `type`.
/*@BASE*/
__device__ __forceinline__ void base_unrolled(int, real*, const real*, const real*, real*) { __trap(); }
/*@end*/

// Grid kernels for the large levels (l < kFirst), one launch per stage and level, tables of the whole
// level with absolute indices.
extern "C" __global__ void hines_stage1(const int* __restrict__ chains, int nchains, const real* __restrict__ d,
                                        const real* __restrict__ u, const real* __restrict__ l,
                                        const real* __restrict__ b, real* rv, real* pv, real* qv, real* piv,
                                        real* w) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < nchains) chain_solve(chains + 4 * c, d, u, l, b, rv, pv, qv, piv, w);
}

extern "C" __global__ void hines_stage2(const int* __restrict__ junctions, const int* __restrict__ direct,
                                        const int* __restrict__ gather_offsets, const int* __restrict__ gather,
                                        const int* __restrict__ chains, int nj, const real* __restrict__ d,
                                        const real* __restrict__ u, const real* __restrict__ l,
                                        const real* __restrict__ b, const real* __restrict__ rv,
                                        const real* __restrict__ pv, const real* __restrict__ qv, real* md, real* mu,
                                        real* ml, real* mb) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < nj) junction_row(k, junctions, direct, gather_offsets, gather, chains, d, u, l, b, rv, pv, qv, md, mu, ml, mb);
}

// One thread per chain, then one per junction.
extern "C" __global__ void hines_stage4(const int* __restrict__ chains, int nchains, const int* __restrict__ junctions,
                                        int nj, const real* __restrict__ rv, const real* __restrict__ pv,
                                        const real* __restrict__ qv, const real* __restrict__ mx, real* x) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < nchains) {
    chain_back(chains + 4 * t, rv, pv, qv, mx, x);
  } else if (t < nchains + nj) {
    const int k = t - nchains;
#pragma unroll
    for (int col = 0; col < R; ++col) x[(long long)junctions[k] * R + col] = mx[(long long)k * R + col];
  }
}

// One level's table inside a segment type: nchains, njunctions, ngather, then chains (4 ints each),
// junctions, direct flags, gather offsets (nj + 1, from 0) and gathers; indices are relative to the
// segment's first row (chains, junctions) and first domain row (parent/child junctions).
struct LevelTable {
  int nc, nj;
  const int *chains, *junctions, *direct, *goff, *gather;
  __device__ __forceinline__ const int* read(const int* t) {
    nc = t[0];
    nj = t[1];
    const int ng = t[2];
    chains = t + 3;
    junctions = chains + 4 * nc;
    direct = junctions + nj;
    goff = direct + nj;
    gather = goff + nj + 1;
    return gather + ng;
  }
};

// The arrays of level `level` for a segment whose rows of that level start at r0 and whose
// junctions start at j0: in the workspace, or from kSharedFrom on in the block's shared memory, which
// holds the segment's part alone.
__device__ __forceinline__ real* level_array(real* ws, real* sws, int level, int array, long long r0,
                                             long long j0) {
  const long long o = kOff[level][array];
  if (level >= kSharedFrom) return sws + o;
  const long long first = array < MD ? r0 : j0;
  return ws + o + first * (array == RV || array == MB || array == MX ? R : 1);
}

// Levels kFirst .. kFirst + kLevels - 1 and the base of one segment (an independent part of the
// forest: a cell) per block, stages separated by __syncthreads. segments holds, per block, the
// offset of its segment type in `tables` and its first row at each of its levels and at the base.
// Level kFirst's matrix is the user's arrays when kFirst is 0, else the domain system the grid
// kernels built; its solution goes to x (kFirst 0) or to that domain's solution. The levels from
// kSharedFrom on keep their arrays in dynamic shared memory (the launch gives the bytes): only this
// block reads and writes them.
extern "C" __global__ void __launch_bounds__(kBlockThreads)
    hines_block(const int* __restrict__ segments, const int* __restrict__ tables, const real* __restrict__ d0,
                const real* __restrict__ u0, const real* __restrict__ l0, const real* __restrict__ b0, real* x0,
                real* ws) {
  extern __shared__ __align__(16) unsigned char hines_shared[];
  real* const sws = reinterpret_cast<real*>(hines_shared);
  const int* seg = segments + (long long)blockIdx.x * kSegStride;
  const int* t = tables + seg[0];
  const real *d, *u, *l, *b;
  real* x;
  if (kFirst == 0) {
    d = d0, u = u0, l = l0, b = b0, x = x0;
  } else {
    const long long* o = kOff[kFirst > 0 ? kFirst - 1 : 0];
    d = ws + o[MD], u = ws + o[MU], l = ws + o[ML], b = ws + o[MB], x = ws + o[MX];
  }
  {
    const long long r0 = seg[1];
    d += r0, u += r0, l += r0, b += r0 * R, x += r0 * R;
  }
  // The level loops stay rolled: unrolled, they keep every level's pointers live and double the
  // registers (105 instead of 64 at 512 threads for four levels), halving the blocks per SM.
#pragma unroll 1
  for (int i = 0; i < kLevels; ++i) {
    const int lv = kFirst + i;
    const long long r0 = seg[1 + i], j0 = seg[2 + i];
    LevelTable lt;
    t = lt.read(t);
    real *rv = level_array(ws, sws, lv, RV, r0, j0), *pv = level_array(ws, sws, lv, PV, r0, j0),
         *qv = level_array(ws, sws, lv, QV, r0, j0);
    real *piv = level_array(ws, sws, lv, PIV, r0, j0), *w = level_array(ws, sws, lv, W, r0, j0);
    for (int c = threadIdx.x; c < lt.nc; c += blockDim.x)
      chain_solve(lt.chains + 4 * c, d, u, l, b, rv, pv, qv, piv, w);
    __syncthreads();
    real *md = level_array(ws, sws, lv, MD, r0, j0), *mu = level_array(ws, sws, lv, MU, r0, j0),
         *ml = level_array(ws, sws, lv, ML, r0, j0), *mb = level_array(ws, sws, lv, MB, r0, j0);
    for (int k = threadIdx.x; k < lt.nj; k += blockDim.x)
      junction_row(k, lt.junctions, lt.direct, lt.goff, lt.gather, lt.chains, d, u, l, b, rv, pv, qv, md, mu, ml, mb);
    __syncthreads();
    d = md, u = mu, l = ml, b = mb;
  }
  {
    const long long r0 = seg[1 + kLevels];
    constexpr int last = kLevels > 0 ? kFirst + kLevels - 1 : 0;  // the level whose domain is the base
    real* xb = kLevels == 0 ? x : level_array(ws, sws, last, MX, 0, r0);
    if constexpr (kBaseShared) {
      // Unrolled mode eliminates in place (sd becomes the pivots' reciprocals, sb the solution) and needs no
      // parents, pivots or x of its own.
      constexpr int kTab = kUnrolledBase ? 1 : kBaseMax;
      __shared__ real sd[kBaseMax], su[kBaseMax], sl[kBaseMax], sb[kBaseMax * R], spiv[kTab], sx[kTab * R];
      __shared__ int sp[kTab];
      const int n = t[0];
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        sd[i] = d[i], su[i] = u[i], sl[i] = l[i];
        if constexpr (!kUnrolledBase) sp[i] = t[1 + i];
#pragma unroll
        for (int col = 0; col < R; ++col) sb[i * R + col] = b[(long long)i * R + col];
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        if constexpr (kUnrolledBase) {
          base_unrolled(seg[0], sd, su, sl, sb);
        } else {
          base_solve(sp, n, sd, su, sl, sb, spiv, sx);
        }
      }
      __syncthreads();
      const real* sol = kUnrolledBase ? sb : sx;
      for (int i = threadIdx.x; i < n * R; i += blockDim.x) xb[i] = sol[i];
    } else {
      if (threadIdx.x == 0) base_solve(t + 1, t[0], d, u, l, b, ws + kBasePiv + r0, xb);
    }
    __syncthreads();
  }
#pragma unroll 1
  for (int i = kLevels - 1; i >= 0; --i) {
    const int lv = kFirst + i;
    const long long r0 = seg[1 + i], j0 = seg[2 + i];
    // Level i's table: skip the i before it (see LevelTable for the layout).
    const int* ti = tables + seg[0];
    for (int k = 0; k < i; ++k) ti += 3 + 4 * ti[0] + 3 * ti[1] + 1 + ti[2];
    LevelTable lt;
    lt.read(ti);
    const real* mx = level_array(ws, sws, lv, MX, r0, j0);
    // Level lv's solution: x, or the domain solution of the level above (whose junctions are these rows).
    real* xl = i == 0 ? x : level_array(ws, sws, lv - 1, MX, 0, r0);
    const real *rv = level_array(ws, sws, lv, RV, r0, j0), *pv = level_array(ws, sws, lv, PV, r0, j0),
               *qv = level_array(ws, sws, lv, QV, r0, j0);
    for (int c = threadIdx.x; c < lt.nc; c += blockDim.x) chain_back(lt.chains + 4 * c, rv, pv, qv, mx, xl);
    for (int k = threadIdx.x; k < lt.nj; k += blockDim.x)
#pragma unroll
      for (int col = 0; col < R; ++col) xl[(long long)lt.junctions[k] * R + col] = mx[(long long)k * R + col];
    __syncthreads();
  }
}
