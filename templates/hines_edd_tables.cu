// Hines exact domain decomposition, tables mode: the plan's chains, junctions and gathers are read
// from device arrays (the layout of hines_plan.hpp), one kernel per stage, in the order of
// interpret_hines (plan/hines_interpreter.cpp) so that results agree with it to rounding.
//   REAL  the arithmetic type (insertion point; double by default)
// Values are N x R row-major (the R values of row i at [i * R, i * R + R)). A chain is four ints:
// begin, end, parent junction, child junction (-1: none).
typedef /*@REAL*/double/*@end*/ real;

// Stage 1, one thread per chain: T = tridiag(l, d, u) over rows begin..end; rv = T^-1 b (R columns),
// pv = T^-1 (u[end] e_last), qv = T^-1 (l[begin-1] e_first); piv and w are the factorisation.
extern "C" __global__ void hines_stage1(const int* __restrict__ chains, int nchains, const real* __restrict__ d,
                                        const real* __restrict__ u, const real* __restrict__ l,
                                        const real* __restrict__ b, int r, real* rv, real* pv, real* qv, real* piv,
                                        real* w) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= nchains) return;
  const int s = chains[4 * c], e = chains[4 * c + 1], pj = chains[4 * c + 2], cj = chains[4 * c + 3];
  for (int i = s; i <= e; ++i) {
    piv[i] = i == s ? d[i] : d[i] - l[i - 1] * w[i - 1];
    if (i < e) w[i] = u[i] / piv[i];
  }
  for (int col = 0; col < r; ++col) {
    for (int i = s; i <= e; ++i) {
      real y = b[(long long)i * r + col];
      if (i > s) y -= l[i - 1] * rv[(long long)(i - 1) * r + col];
      rv[(long long)i * r + col] = y / piv[i];
    }
    for (int i = e - 1; i >= s; --i) rv[(long long)i * r + col] -= w[i] * rv[(long long)(i + 1) * r + col];
  }
  if (pj >= 0) {
    pv[e] = u[e] / piv[e];
    for (int i = e - 1; i >= s; --i) pv[i] = -w[i] * pv[i + 1];
  }
  if (cj >= 0) {
    for (int i = s; i <= e; ++i) qv[i] = (i == s ? l[s - 1] : -l[i - 1] * qv[i - 1]) / piv[i];
    for (int i = e - 1; i >= s; --i) qv[i] -= w[i] * qv[i + 1];
  }
}

// Stage 2, one thread per junction: its row of the (negated) domain system, gathering its chains in
// plan order.
extern "C" __global__ void hines_stage2(const int* __restrict__ junctions, const unsigned char* __restrict__ direct,
                                        const int* __restrict__ gather_offsets, const int* __restrict__ gather,
                                        const int* __restrict__ chains, int nj, const real* __restrict__ d,
                                        const real* __restrict__ u, const real* __restrict__ l,
                                        const real* __restrict__ b, int r, const real* __restrict__ rv,
                                        const real* __restrict__ pv, const real* __restrict__ qv, real* md, real* mu,
                                        real* ml, real* mb) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= nj) return;
  const int j = junctions[k];
  real dk = -d[j], uk = 0, lk = 0;
  if (direct[k]) {
    uk = -u[j];
    lk = -l[j];
  }
  for (int col = 0; col < r; ++col) mb[(long long)k * r + col] = -b[(long long)j * r + col];
  for (int g = gather_offsets[k]; g < gather_offsets[k + 1]; ++g) {
    const int c = gather[g];
    const int s = chains[4 * c], e = chains[4 * c + 1], pj = chains[4 * c + 2];
    if (pj == k) {
      dk += l[e] * pv[e];
      for (int col = 0; col < r; ++col) mb[(long long)k * r + col] += l[e] * rv[(long long)e * r + col];
    } else {
      dk += u[s - 1] * qv[s];
      for (int col = 0; col < r; ++col) mb[(long long)k * r + col] += u[s - 1] * rv[(long long)s * r + col];
      if (pj >= 0) {
        uk = u[s - 1] * pv[s];
        lk = l[e] * qv[e];
      }
    }
  }
  md[k] = dk;
  mu[k] = uk;
  ml[k] = lk;
}

// The base: serial Hines elimination by one thread, in place (b becomes x; d is overwritten).
extern "C" __global__ void hines_base(const int* __restrict__ parent, int n, real* d, const real* __restrict__ u,
                                      const real* __restrict__ l, real* b, int r) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  for (int i = 0; i < n; ++i) {
    const int p = parent[i];
    if (p < 0) continue;
    const real f = l[i] / d[i];
    d[p] -= f * u[i];
    for (int col = 0; col < r; ++col) b[(long long)p * r + col] -= f * b[(long long)i * r + col];
  }
  for (int i = n - 1; i >= 0; --i) {
    const int p = parent[i];
    for (int col = 0; col < r; ++col) {
      real v = b[(long long)i * r + col];
      if (p >= 0) v -= u[i] * b[(long long)p * r + col];
      b[(long long)i * r + col] = v / d[i];
    }
  }
}

// Stage 4, one thread per chain, then one per junction: x from the domain solution mx.
extern "C" __global__ void hines_stage4(const int* __restrict__ chains, int nchains, const int* __restrict__ junctions,
                                        int nj, const real* __restrict__ rv, const real* __restrict__ pv,
                                        const real* __restrict__ qv, const real* __restrict__ mx, int r, real* x) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < nchains) {
    const int s = chains[4 * t], e = chains[4 * t + 1], pj = chains[4 * t + 2], cj = chains[4 * t + 3];
    for (int i = s; i <= e; ++i)
      for (int col = 0; col < r; ++col) {
        real v = rv[(long long)i * r + col];
        if (pj >= 0) v -= mx[(long long)pj * r + col] * pv[i];
        if (cj >= 0) v -= mx[(long long)cj * r + col] * qv[i];
        x[(long long)i * r + col] = v;
      }
  } else if (t < nchains + nj) {
    const int k = t - nchains;
    for (int col = 0; col < r; ++col) x[(long long)junctions[k] * r + col] = mx[(long long)k * r + col];
  }
}
