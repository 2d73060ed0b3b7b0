// Blocklet decomposition: block strengths, the lossless greedy blocklet / multi-blocklet extraction,
// the cost-estimate proposal and the CBL / CMBL / CRMB layouts (see blocklets.hpp).
#include "sparsecc/inspector/blocklets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include "sparsecc/common/error.hpp"
#include "sparsecc/common/math.hpp"

namespace sparsecc {

namespace {

std::int64_t area_of(BlockShape s) { return std::int64_t{s.bh} * s.bw; }

void check_shape(BlockShape s, int max_side, const char* where) {
  if (s.bh < 1 || s.bh > max_side || s.bw < 1 || s.bw > max_side)
    throw UsageError(
        fmt::format("{}: block shape {} has a side outside 1..{}", where, block_shape_name(s), max_side));
}

bool known_precision(const std::string& p) { return p == "f16" || p == "bf16" || p == "f32"; }

void check_precision(const std::string& p, const char* where) {
  if (!known_precision(p))
    throw UsageError(fmt::format("{}: precision '{}' is not one of f16, bf16, f32", where, p));
}

DType precision_dtype(const std::string& p) {
  if (p == "f16") return DType::f16;
  if (p == "bf16") return DType::bf16;
  return DType::f32;
}

// Blocks are ranked by magnitude, larger first; a NaN magnitude ranks below every real one (all real
// magnitudes are >= 0), which keeps the ordering strict-weak and deterministic.
double rank_key(double magnitude) { return std::isnan(magnitude) ? -1.0 : magnitude; }

// Calls fn(rb, blocks) for every row block, with its blocks holding a nonzero in column-block order.
// The per-column-block accumulators are dense and reset through the list of touched blocks, so a row
// block costs its nonzeros plus the sort of its touched blocks.
template <class Fn>
void for_each_row_block(const CsrMatrix& a, BlockShape shape, Fn&& fn) {
  struct Acc {
    std::int64_t nnz = 0;
    double magnitude = 0.0;
  };
  const std::int64_t row_blocks = ceil_div(a.rows, shape.bh), col_blocks = ceil_div(a.cols, shape.bw);
  const double area = static_cast<double>(area_of(shape));
  std::vector<Acc> acc(static_cast<std::size_t>(col_blocks));
  std::vector<std::int64_t> touched;
  std::vector<BlockStrength> blocks;
  for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
    touched.clear();
    const std::int64_t r_end = std::min(a.rows, (rb + 1) * shape.bh);
    for (std::int64_t r = rb * shape.bh; r < r_end; ++r) {
      for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
        const double v = a.values[i];
        if (v == 0.0) continue;  // stored zeros stay in the residual and add nothing to a block
        Acc& b = acc[static_cast<std::size_t>(a.col_idx[i] / shape.bw)];
        if (b.nnz == 0) touched.push_back(a.col_idx[i] / shape.bw);
        ++b.nnz;
        b.magnitude += std::fabs(v);
      }
    }
    std::sort(touched.begin(), touched.end());
    blocks.clear();
    for (const std::int64_t cb : touched) {
      Acc& b = acc[static_cast<std::size_t>(cb)];
      blocks.push_back({rb, cb, b.nnz, b.magnitude, static_cast<double>(b.nnz) / area});
      b = Acc{};
    }
    fn(rb, blocks);
  }
}

// Structural checks of a decomposition's tiles against its shape and size; the tiles may come from a
// caller rather than decompose_blocklets.
void check_tiles(const BlockletDecomposition& d, const char* where) {
  const BlockShape s = d.config.shape;
  check_shape(s, kMaxBlockletSide, where);
  if (d.rows < 0 || d.cols < 0) throw UsageError(fmt::format("{}: negative matrix size", where));
  const std::int64_t row_blocks = ceil_div(d.rows, s.bh), col_blocks = ceil_div(d.cols, s.bw);
  const auto area = static_cast<std::size_t>(area_of(s));
  std::vector<std::pair<std::int64_t, std::int64_t>> positions;
  positions.reserve(d.tiles.size());
  for (const BlockletTile& t : d.tiles) {
    if (t.row < 0 || t.col < 0 || t.row % s.bh != 0 || t.col % s.bw != 0 || t.row / s.bh >= row_blocks ||
        t.col / s.bw >= col_blocks)
      throw UsageError(fmt::format("{}: tile at ({}, {}) is not on the {} grid of a {} x {} matrix", where,
                                   t.row, t.col, block_shape_name(s), d.rows, d.cols));
    if (t.values.size() != area)
      throw UsageError(fmt::format("{}: tile at ({}, {}) has {} values, expected {}", where, t.row, t.col,
                                   t.values.size(), area));
    for (std::size_t e = 0; e < area; ++e) {
      const std::int64_t r = t.row + static_cast<std::int64_t>(e) / s.bw,
                         c = t.col + static_cast<std::int64_t>(e) % s.bw;
      if (t.values[e] != 0.0 && (r >= d.rows || c >= d.cols))
        throw UsageError(fmt::format("{}: tile at ({}, {}) holds a nonzero outside the matrix at ({}, {})",
                                     where, t.row, t.col, r, c));
    }
    positions.emplace_back(t.row, t.col);
  }
  std::sort(positions.begin(), positions.end());
  const auto dup = std::adjacent_find(positions.begin(), positions.end());
  if (dup != positions.end())
    throw UsageError(fmt::format("{}: two tiles at ({}, {})", where, dup->first, dup->second));
}

struct Triplet {
  std::int64_t row;
  std::int64_t col;
  double value;
};

// CSR from entries at distinct positions; throws when two share a position.
CsrMatrix csr_from_triplets(std::int64_t rows, std::int64_t cols, std::vector<Triplet>& t, DType dtype,
                            const char* where) {
  std::sort(t.begin(), t.end(), [](const Triplet& x, const Triplet& y) {
    return std::tie(x.row, x.col) < std::tie(y.row, y.col);
  });
  CsrMatrix out;
  out.rows = rows;
  out.cols = cols;
  out.source_dtype = dtype;
  out.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  out.col_idx.reserve(t.size());
  out.values.reserve(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i > 0 && t[i].row == t[i - 1].row && t[i].col == t[i - 1].col)
      throw UsageError(fmt::format("{}: two entries at ({}, {})", where, t[i].row, t[i].col));
    ++out.row_ptr[static_cast<std::size_t>(t[i].row) + 1];
    out.col_idx.push_back(static_cast<std::int32_t>(t[i].col));
    out.values.push_back(t[i].value);
  }
  for (std::int64_t r = 0; r < rows; ++r) out.row_ptr[r + 1] += out.row_ptr[r];
  return out;
}

// ---- layouts ----

// A block stored by a layout, placed in matrix coordinates.
struct PlacedBlock {
  std::int64_t row;
  std::int64_t col;
  std::int32_t pass;
  const double* values;  // bh * bw, row-major
};

void place_cbl(const CblMatrix& m, std::int64_t row0, std::int64_t col0, std::int32_t pass,
               std::vector<PlacedBlock>& out) {
  const std::int64_t area = area_of(m.type);
  for (std::size_t i = 0; i < m.indices.size(); ++i)
    out.push_back({row0 + static_cast<std::int64_t>(i) * m.type.bh,
                   col0 + std::int64_t{m.indices[i]} * m.type.bw, pass,
                   m.values.data() + static_cast<std::int64_t>(i) * area});
}

void place_cmbl(const CmblMatrix& m, std::int64_t row0, std::int64_t col0, std::vector<PlacedBlock>& out) {
  for (std::size_t k = 0; k < m.bl_matrices.size(); ++k)
    place_cbl(m.bl_matrices[k], row0, col0, static_cast<std::int32_t>(k), out);
}

// Appends the nonzeros of one placed block of shape s; one outside `rows` x `cols` is an error.
void collect_nonzeros(const PlacedBlock& b, BlockShape s, std::int64_t rows, std::int64_t cols,
                      const char* where, std::vector<Triplet>& out) {
  for (std::int64_t e = 0; e < area_of(s); ++e) {
    const double v = b.values[e];
    if (v == 0.0) continue;
    const std::int64_t r = b.row + e / s.bw, c = b.col + e % s.bw;
    if (r >= rows || c >= cols)
      throw UsageError(
          fmt::format("{}: a blocklet of type {} stores a nonzero at ({}, {}), outside the {} x {} matrix",
                      where, block_shape_name(s), r, c, rows, cols));
    out.push_back({r, c, v});
  }
}

// Throws when two entries share a position.
void check_disjoint(std::vector<Triplet> t, const char* where) {
  std::sort(t.begin(), t.end(), [](const Triplet& x, const Triplet& y) {
    return std::tie(x.row, x.col) < std::tie(y.row, y.col);
  });
  for (std::size_t i = 1; i < t.size(); ++i)
    if (t[i].row == t[i - 1].row && t[i].col == t[i - 1].col)
      throw UsageError(
          fmt::format("{}: two blocklets store a nonzero at ({}, {})", where, t[i].row, t[i].col));
}

std::vector<Triplet> cmbl_nonzeros(const CmblMatrix& m, std::int64_t row0, std::int64_t col0,
                                   std::int64_t rows, std::int64_t cols, const char* where) {
  std::vector<Triplet> t;
  std::vector<PlacedBlock> placed;
  for (const CblMatrix& bl : m.bl_matrices) {
    placed.clear();
    place_cbl(bl, row0, col0, 0, placed);
    for (const PlacedBlock& b : placed) collect_nonzeros(b, bl.type, rows, cols, where, t);
  }
  return t;
}

std::vector<Triplet> crmb_nonzeros(const CrmbMatrix& m, const char* where) {
  std::vector<Triplet> t;
  const std::int64_t row_blocks = static_cast<std::int64_t>(m.row_block_ptr.size()) - 1;
  for (std::int64_t rb = 0; rb < row_blocks; ++rb)
    for (std::int64_t j = m.row_block_ptr[rb]; j < m.row_block_ptr[rb + 1]; ++j) {
      const auto part = cmbl_nonzeros(m.mbl_matrices[static_cast<std::size_t>(j)], rb * m.block.bh,
                                      std::int64_t{m.indices[static_cast<std::size_t>(j)]} * m.block.bw,
                                      m.rows, m.cols, where);
      t.insert(t.end(), part.begin(), part.end());
    }
  return t;
}

void validate_cbl(const CblMatrix& m, const char* where) {
  check_shape(m.type, kMaxBlockletSide, where);
  if (m.rows < 0 || m.cols < 0) throw UsageError(fmt::format("{}: negative matrix size", where));
  const std::int64_t row_blocks = ceil_div(m.rows, m.type.bh), col_blocks = ceil_div(m.cols, m.type.bw);
  if (static_cast<std::int64_t>(m.indices.size()) != row_blocks)
    throw UsageError(fmt::format("{}: {} indices for {} row blocks", where, m.indices.size(), row_blocks));
  if (static_cast<std::int64_t>(m.values.size()) != row_blocks * area_of(m.type))
    throw UsageError(fmt::format("{}: {} values, expected {} ({} row blocks of {})", where, m.values.size(),
                                 row_blocks * area_of(m.type), row_blocks, block_shape_name(m.type)));
  for (std::size_t i = 0; i < m.indices.size(); ++i)
    if (m.indices[i] < 0 || m.indices[i] >= col_blocks)
      throw UsageError(fmt::format("{}: row block {} has column-block index {}, outside 0..{}", where, i,
                                   m.indices[i], col_blocks - 1));
  // Nonzero padding would be data outside the matrix.
  std::vector<PlacedBlock> placed;
  place_cbl(m, 0, 0, 0, placed);
  std::vector<Triplet> ignored;
  for (const PlacedBlock& b : placed) collect_nonzeros(b, m.type, m.rows, m.cols, where, ignored);
}

void validate_cmbl(const CmblMatrix& m, const char* where) {
  if (m.rows < 0 || m.cols < 0) throw UsageError(fmt::format("{}: negative matrix size", where));
  for (std::size_t k = 0; k < m.bl_matrices.size(); ++k) {
    const CblMatrix& bl = m.bl_matrices[k];
    if (bl.rows != m.rows || bl.cols != m.cols)
      throw UsageError(fmt::format("{}: blocklet {} is {} x {} in a {} x {} multi-blocklet matrix", where, k,
                                   bl.rows, bl.cols, m.rows, m.cols));
    validate_cbl(bl, where);
  }
  check_disjoint(cmbl_nonzeros(m, 0, 0, m.rows, m.cols, where), where);
}

void validate_crmb(const CrmbMatrix& m, const char* where) {
  check_shape(m.block, kMaxRmbBlockSide, where);
  if (m.rows < 0 || m.cols < 0) throw UsageError(fmt::format("{}: negative matrix size", where));
  const std::int64_t row_blocks = ceil_div(m.rows, m.block.bh), col_blocks = ceil_div(m.cols, m.block.bw);
  const auto blocks = static_cast<std::int64_t>(m.mbl_matrices.size());
  if (static_cast<std::int64_t>(m.row_block_ptr.size()) != row_blocks + 1)
    throw UsageError(fmt::format("{}: row_block_ptr has {} entries for {} row blocks", where,
                                 m.row_block_ptr.size(), row_blocks));
  if (static_cast<std::int64_t>(m.indices.size()) != blocks)
    throw UsageError(fmt::format("{}: {} indices for {} nonzero blocks", where, m.indices.size(), blocks));
  if (m.row_block_ptr[0] != 0) throw UsageError(fmt::format("{}: row_block_ptr[0] is not 0", where));
  for (std::int64_t rb = 0; rb < row_blocks; ++rb)
    if (m.row_block_ptr[rb + 1] < m.row_block_ptr[rb])
      throw UsageError(fmt::format("{}: row_block_ptr decreases at row block {}", where, rb));
  if (m.row_block_ptr[row_blocks] != blocks)
    throw UsageError(
        fmt::format("{}: row_block_ptr ends at {}, expected {}", where, m.row_block_ptr[row_blocks], blocks));
  for (std::int64_t rb = 0; rb < row_blocks; ++rb)
    for (std::int64_t j = m.row_block_ptr[rb]; j < m.row_block_ptr[rb + 1]; ++j) {
      const std::int32_t cb = m.indices[static_cast<std::size_t>(j)];
      if (cb < 0 || cb >= col_blocks)
        throw UsageError(fmt::format("{}: block {} has column-block index {}, outside 0..{}", where, j, cb,
                                     col_blocks - 1));
      if (j > m.row_block_ptr[rb] && cb <= m.indices[static_cast<std::size_t>(j - 1)])
        throw UsageError(
            fmt::format("{}: column-block indices of row block {} are not strictly increasing", where, rb));
      const CmblMatrix& mbl = m.mbl_matrices[static_cast<std::size_t>(j)];
      if (mbl.rows != m.block.bh || mbl.cols != m.block.bw)
        throw UsageError(fmt::format("{}: block {} is {} x {}, expected {}", where, j, mbl.rows, mbl.cols,
                                     block_shape_name(m.block)));
      validate_cmbl(mbl, where);
      for (const CblMatrix& bl : mbl.bl_matrices)
        if (m.block.bh % bl.type.bh != 0 || m.block.bw % bl.type.bw != 0)
          throw UsageError(fmt::format("{}: blocklet type {} does not divide the block {}", where,
                                       block_shape_name(bl.type), block_shape_name(m.block)));
    }
  // Blocks in the padding of the last row or column block must not store nonzeros there.
  crmb_nonzeros(m, where);
}

// The common blocklet type of a layout's blocklets; {1, 1} when there are none.
BlockShape common_type(const std::vector<const CmblMatrix*>& mbls, const char* where) {
  std::optional<BlockShape> type;
  for (const CmblMatrix* m : mbls)
    for (const CblMatrix& bl : m->bl_matrices) {
      if (!type) type = bl.type;
      if (bl.type != *type)
        throw UsageError(
            fmt::format("{}: blocklet types {} and {} are mixed; a decomposition has one shape "
                        "(read the matrix with csr_from_crmb and decompose it instead)",
                        where, block_shape_name(*type), block_shape_name(bl.type)));
    }
  return type.value_or(BlockShape{1, 1});
}

// Tiles from placed blocks of one shape (validated: disjoint nonzeros, none outside the matrix).
BlockletDecomposition decomposition_from_blocks(std::vector<PlacedBlock> blocks, BlockShape s,
                                                std::int64_t rows, std::int64_t cols,
                                                const std::string& precision) {
  BlockletDecomposition d;
  d.rows = rows;
  d.cols = cols;
  d.config.shape = s;
  d.config.precision = precision;
  const std::int64_t area = area_of(s);
  std::sort(blocks.begin(), blocks.end(), [](const PlacedBlock& x, const PlacedBlock& y) {
    return std::tie(x.row, x.col, x.pass) < std::tie(y.row, y.col, y.pass);
  });
  for (const PlacedBlock& b : blocks) {
    if (std::none_of(b.values, b.values + area, [](double v) { return v != 0.0; })) continue;
    if (d.tiles.empty() || d.tiles.back().row != b.row || d.tiles.back().col != b.col)
      d.tiles.push_back({b.row, b.col, b.pass, 0, std::vector<double>(static_cast<std::size_t>(area), 0.0)});
    BlockletTile& t = d.tiles.back();  // blocks on one position merge; their nonzeros are disjoint
    for (std::int64_t e = 0; e < area; ++e)
      if (b.values[e] != 0.0) {
        t.values[static_cast<std::size_t>(e)] = b.values[e];
        ++t.nnz;
      }
  }
  double min_fill = 1.0;
  for (const BlockletTile& t : d.tiles) min_fill = std::min(min_fill, static_cast<double>(t.nnz) / area);
  d.config.fill_threshold = min_fill;
  d.config.max_blocks = static_cast<std::int64_t>(d.tiles.size());
  d.residual.rows = rows;
  d.residual.cols = cols;
  d.residual.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  d.residual.source_dtype = precision_dtype(precision);
  return d;
}

// Tiles grouped by the row block they start in, each group in (pass, column) order: the k-th tile of a
// row block belongs to blocklet k of the layouts.
bool layout_order(const BlockletTile* x, const BlockletTile* y) {
  return std::tie(x->row, x->pass, x->col) < std::tie(y->row, y->pass, y->col);
}

// A multi-blocklet matrix of `rows` x `cols` from tiles sorted by layout_order, with coordinates taken
// relative to (row0, col0).
CmblMatrix cmbl_from_tiles(const std::vector<const BlockletTile*>& tiles, BlockShape s, std::int64_t rows,
                           std::int64_t cols, std::int64_t row0, std::int64_t col0) {
  const std::int64_t row_blocks = ceil_div(rows, s.bh), area = area_of(s);
  std::vector<std::int64_t> count(static_cast<std::size_t>(row_blocks), 0);
  for (const BlockletTile* t : tiles) ++count[static_cast<std::size_t>((t->row - row0) / s.bh)];
  const std::int64_t blocklets = count.empty() ? 0 : *std::max_element(count.begin(), count.end());
  CmblMatrix m;
  m.rows = rows;
  m.cols = cols;
  for (std::int64_t k = 0; k < blocklets; ++k)
    m.bl_matrices.push_back({s, rows, cols,
                             std::vector<double>(static_cast<std::size_t>(row_blocks * area), 0.0),
                             std::vector<std::int32_t>(static_cast<std::size_t>(row_blocks), 0)});
  std::fill(count.begin(), count.end(), 0);
  for (const BlockletTile* t : tiles) {
    const std::int64_t rb = (t->row - row0) / s.bh;
    CblMatrix& bl = m.bl_matrices[static_cast<std::size_t>(count[static_cast<std::size_t>(rb)]++)];
    bl.indices[static_cast<std::size_t>(rb)] = static_cast<std::int32_t>((t->col - col0) / s.bw);
    std::copy(t->values.begin(), t->values.end(), bl.values.begin() + rb * area);
  }
  return m;
}

// ---- proposal cost model ----
//
// Costs are issue slots of one SM sub-partition per output column, with one residual FMA as the unit.
// The numbers are rough and deliberately few; they only have to rank shapes and find break-even fills.
//  - Residual nonzero: one FFMA with the weight baked (the unrolled path); fp16/bf16 residuals pair two
//    output columns in one half2/bf162 FMA, so half a slot.
constexpr double kResidualCostF32 = 1.0;
constexpr double kResidualCostHalf = 0.5;
//  - Tensor-core tile (fp16/bf16, both sides multiples of 8): an sm_90 SM peaks near 16 dense fp16 FMAs
//    per SIMT issue slot; mma.sync on scattered tiles gets about half of that. An 8-row tile still
//    occupies a 16-row fragment (the other rows are zero), hence the rounding of bh up to 16. Each tile
//    also loads its B fragment (ldmatrix) and moves its A fragment into registers: one slot.
constexpr double kMmaEntriesPerSlot = 8.0;
constexpr double kMmaTileOverhead = 1.0;
//  - SIMT tile (the thesis's 2x2 / 4x4, and every shape in f32, since tf32 tensor cores would round the
//    weights): register-blocked FMAs over all bh * bw entries, each cheaper than a residual FMA because
//    B rows are read as contiguous vectors and shared by the tile's rows; plus a small per-tile setup.
constexpr double kSimtEntryCost = 0.75;  // in residual FMAs of the same precision
constexpr double kSimtTileOverhead = 0.5;
//  - Blocklets add a second code path (fragment set-up, a separate loop or kernel section), so a shape
//    must save at least this fraction of the all-residual estimate; a marginal saving, such as the few
//    full 2x2 blocks of an unstructured matrix, leaves blocklets off.
constexpr double kMinRelativeSaving = 0.05;

}  // namespace

std::string block_shape_name(BlockShape s) { return fmt::format("{}x{}", s.bh, s.bw); }

void validate_blocklet_config(const BlockletConfig& cfg) {
  check_shape(cfg.shape, kMaxBlockletSide, "blocklet config");
  if (!(cfg.fill_threshold > 0.0 && cfg.fill_threshold <= 1.0))
    throw UsageError(fmt::format("blocklet config: fill threshold {} outside (0, 1]", cfg.fill_threshold));
  if (cfg.max_blocks < 0)
    throw UsageError(fmt::format("blocklet config: negative cap on blocks ({})", cfg.max_blocks));
  check_precision(cfg.precision, "blocklet config");
}

BlockStrengths block_strengths(const CsrMatrix& a, BlockShape shape) {
  validate(a);
  check_shape(shape, kMaxBlockletSide, "block_strengths");
  BlockStrengths s;
  s.shape = shape;
  s.row_blocks = ceil_div(a.rows, shape.bh);
  s.col_blocks = ceil_div(a.cols, shape.bw);
  for_each_row_block(a, shape, [&](std::int64_t, const std::vector<BlockStrength>& blocks) {
    s.blocks.insert(s.blocks.end(), blocks.begin(), blocks.end());
  });
  return s;
}

std::int64_t BlockletDecomposition::nnz_covered() const {
  std::int64_t n = 0;
  for (const BlockletTile& t : tiles) n += t.nnz;
  return n;
}

std::int64_t BlockletDecomposition::explicit_zeros() const {
  return static_cast<std::int64_t>(tiles.size()) * area_of(config.shape) - nnz_covered();
}

std::int32_t BlockletDecomposition::passes() const {
  std::int32_t p = 0;
  for (const BlockletTile& t : tiles) p = std::max(p, t.pass + 1);
  return p;
}

BlockletDecomposition decompose_blocklets(const CsrMatrix& a, const BlockletConfig& cfg) {
  validate(a);
  validate_blocklet_config(cfg);
  const BlockShape s = cfg.shape;
  const std::int64_t row_blocks = ceil_div(a.rows, s.bh), col_blocks = ceil_div(a.cols, s.bw);
  const auto area = static_cast<std::size_t>(area_of(s));

  // The qualifying blocks of each row block, strongest first (first maximum on ties): since aligned
  // blocks are disjoint, this is the order in which repeated argmax passes would pick them.
  struct Candidate {
    std::int64_t col_block;
    double key;
  };
  std::vector<std::vector<Candidate>> ranked(static_cast<std::size_t>(row_blocks));
  for_each_row_block(a, s, [&](std::int64_t rb, const std::vector<BlockStrength>& blocks) {
    auto& list = ranked[static_cast<std::size_t>(rb)];
    for (const BlockStrength& b : blocks)
      if (b.fill >= cfg.fill_threshold) list.push_back({b.col_block, rank_key(b.magnitude)});
    std::stable_sort(list.begin(), list.end(),
                     [](const Candidate& x, const Candidate& y) { return x.key > y.key; });
  });

  // Pass p takes candidate p of every row block that has one; the cap may cut the last pass, which
  // then keeps its strongest blocks. Row blocks drop out of the active list once exhausted, so the
  // passes cost the number of candidates, not passes x row blocks.
  struct Taken {
    std::int64_t col_block;
    std::int32_t pass;
  };
  std::vector<std::vector<Taken>> taken(static_cast<std::size_t>(row_blocks));
  std::vector<std::int64_t> active;
  for (std::int64_t rb = 0; rb < row_blocks; ++rb)
    if (!ranked[static_cast<std::size_t>(rb)].empty()) active.push_back(rb);
  std::int64_t budget = cfg.max_blocks;
  for (std::size_t pass = 0; budget > 0 && !active.empty(); ++pass) {
    std::vector<std::int64_t> chosen = active;
    if (static_cast<std::int64_t>(chosen.size()) > budget) {
      std::stable_sort(chosen.begin(), chosen.end(), [&](std::int64_t x, std::int64_t y) {
        return ranked[static_cast<std::size_t>(x)][pass].key > ranked[static_cast<std::size_t>(y)][pass].key;
      });
      chosen.resize(static_cast<std::size_t>(budget));
    }
    for (const std::int64_t rb : chosen)
      taken[static_cast<std::size_t>(rb)].push_back(
          {ranked[static_cast<std::size_t>(rb)][pass].col_block, static_cast<std::int32_t>(pass)});
    budget -= static_cast<std::int64_t>(chosen.size());
    std::erase_if(active,
                  [&](std::int64_t rb) { return ranked[static_cast<std::size_t>(rb)].size() <= pass + 1; });
  }

  BlockletDecomposition d;
  d.rows = a.rows;
  d.cols = a.cols;
  d.config = cfg;
  CsrMatrix& res = d.residual;
  res.rows = a.rows;
  res.cols = a.cols;
  res.source_dtype = a.source_dtype;
  res.row_ptr.assign(1, 0);
  res.row_ptr.reserve(static_cast<std::size_t>(a.rows) + 1);
  std::vector<std::int64_t> slot(static_cast<std::size_t>(col_blocks), -1);  // column block -> tile
  for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
    auto& mine = taken[static_cast<std::size_t>(rb)];
    std::sort(mine.begin(), mine.end(),
              [](const Taken& x, const Taken& y) { return x.col_block < y.col_block; });
    for (const Taken& t : mine) {
      slot[static_cast<std::size_t>(t.col_block)] = static_cast<std::int64_t>(d.tiles.size());
      d.tiles.push_back({rb * s.bh, t.col_block * s.bw, t.pass, 0, std::vector<double>(area, 0.0)});
    }
    const std::int64_t r_end = std::min(a.rows, (rb + 1) * s.bh);
    for (std::int64_t r = rb * s.bh; r < r_end; ++r) {
      for (std::int64_t i = a.row_ptr[r]; i < a.row_ptr[r + 1]; ++i) {
        const std::int32_t c = a.col_idx[i];
        const double v = a.values[i];
        const std::int64_t tile = slot[static_cast<std::size_t>(c / s.bw)];
        if (v != 0.0 && tile >= 0) {
          BlockletTile& t = d.tiles[static_cast<std::size_t>(tile)];
          t.values[static_cast<std::size_t>((r - t.row) * s.bw + (c - t.col))] = v;
          ++t.nnz;
        } else {
          res.col_idx.push_back(c);
          res.values.push_back(v);
        }
      }
      res.row_ptr.push_back(static_cast<std::int64_t>(res.col_idx.size()));
    }
    for (const Taken& t : mine) slot[static_cast<std::size_t>(t.col_block)] = -1;
  }
  return d;
}

CsrMatrix recombine_blocklets(const BlockletDecomposition& d) {
  const char* where = "recombine_blocklets";
  check_tiles(d, where);
  validate(d.residual);
  if (d.residual.rows != d.rows || d.residual.cols != d.cols)
    throw UsageError(fmt::format("{}: residual is {} x {} in a {} x {} decomposition", where, d.residual.rows,
                                 d.residual.cols, d.rows, d.cols));
  const BlockShape s = d.config.shape;
  std::vector<Triplet> t;
  t.reserve(static_cast<std::size_t>(d.nnz_covered() + d.residual.nnz()));
  for (const BlockletTile& tile : d.tiles)
    for (std::size_t e = 0; e < tile.values.size(); ++e)
      if (tile.values[e] != 0.0)
        t.push_back({tile.row + static_cast<std::int64_t>(e) / s.bw,
                     tile.col + static_cast<std::int64_t>(e) % s.bw, tile.values[e]});
  for (std::int64_t r = 0; r < d.rows; ++r)
    for (std::int64_t i = d.residual.row_ptr[r]; i < d.residual.row_ptr[r + 1]; ++i)
      t.push_back({r, d.residual.col_idx[i], d.residual.values[i]});
  return csr_from_triplets(d.rows, d.cols, t, d.residual.source_dtype, where);
}

nlohmann::json to_json(const BlockletDecomposition& d) {
  const std::int64_t covered = d.nnz_covered(), nnz = covered + d.residual.nnz();
  nlohmann::json j;
  j["shape"] = block_shape_name(d.config.shape);
  j["fill_threshold"] = d.config.fill_threshold;
  j["max_blocks"] =
      d.config.max_blocks == kUnlimitedBlocks ? nlohmann::json(nullptr) : nlohmann::json(d.config.max_blocks);
  j["precision"] = d.config.precision;
  j["rows"] = d.rows;
  j["cols"] = d.cols;
  j["nnz"] = nnz;
  j["blocks"] = d.tiles.size();
  j["passes"] = d.passes();
  j["nnz_covered"] = covered;
  j["explicit_zeros"] = d.explicit_zeros();
  j["residual_nnz"] = d.residual.nnz();
  j["coverage"] = nnz == 0 ? 0.0 : static_cast<double>(covered) / static_cast<double>(nnz);
  return j;
}

std::vector<BlockShape> blocklet_candidate_shapes() { return {{16, 8}, {16, 16}, {8, 8}, {4, 4}, {2, 2}}; }

BlockletConfig propose_blocklets(const CsrMatrix& a, const BlockletProposalOptions& options,
                                 std::vector<BlockletCandidate>* candidates) {
  validate(a);
  std::string precision = options.precision;
  if (precision.empty())
    precision = a.source_dtype == DType::f16 ? "f16" : a.source_dtype == DType::bf16 ? "bf16" : "f32";
  check_precision(precision, "propose_blocklets");
  const bool half = precision != "f32";
  const double residual_cost = half ? kResidualCostHalf : kResidualCostF32;
  const double baseline = residual_cost * static_cast<double>(a.nnz());

  std::vector<BlockletCandidate> all;
  for (const BlockShape s : blocklet_candidate_shapes()) {
    BlockletCandidate c;
    c.shape = s;
    const std::int64_t area = area_of(s);
    c.tensor_cores = half && s.bh % 8 == 0 && s.bw % 8 == 0;
    c.tile_cost =
        c.tensor_cores
            ? kMmaTileOverhead + static_cast<double>(ceil_div(s.bh, 16) * 16 * s.bw) / kMmaEntriesPerSlot
            : residual_cost * kSimtEntryCost * static_cast<double>(area) + kSimtTileOverhead;
    // A tile pays when nnz * residual_cost > tile_cost.
    c.min_nnz = static_cast<std::int64_t>(std::floor(c.tile_cost / residual_cost)) + 1;
    c.estimated_cost = baseline;
    if (c.min_nnz <= area) {
      c.fill_threshold = static_cast<double>(c.min_nnz) / static_cast<double>(area);
      for_each_row_block(a, s, [&](std::int64_t, const std::vector<BlockStrength>& blocks) {
        for (const BlockStrength& b : blocks)
          if (b.nnz >= c.min_nnz) {
            ++c.blocks;
            c.nnz_covered += b.nnz;
          }
      });
      c.estimated_cost = static_cast<double>(c.blocks) * c.tile_cost +
                         residual_cost * static_cast<double>(a.nnz() - c.nnz_covered);
    }
    all.push_back(c);
  }

  BlockletConfig cfg;
  cfg.precision = precision;
  const BlockletCandidate* best = nullptr;
  double best_cost = baseline * (1.0 - kMinRelativeSaving);
  for (const BlockletCandidate& c : all)
    if (c.estimated_cost < best_cost) {
      best = &c;
      best_cost = c.estimated_cost;
    }
  if (best) {
    cfg.shape = best->shape;
    cfg.fill_threshold = best->fill_threshold;
    cfg.max_blocks = kUnlimitedBlocks;
  } else {
    cfg.shape = all.front().shape;
    cfg.fill_threshold = all.front().fill_threshold > 0.0 ? all.front().fill_threshold : 1.0;
    cfg.max_blocks = 0;
  }
  if (candidates) *candidates = std::move(all);
  return cfg;
}

void validate(const CblMatrix& m) { validate_cbl(m, "CBL"); }
void validate(const CmblMatrix& m) { validate_cmbl(m, "CMBL"); }
void validate(const CrmbMatrix& m) { validate_crmb(m, "CRMB"); }

CsrMatrix csr_from_cbl(const CblMatrix& m, DType source_dtype) {
  validate_cbl(m, "csr_from_cbl");
  std::vector<PlacedBlock> placed;
  place_cbl(m, 0, 0, 0, placed);
  std::vector<Triplet> t;
  for (const PlacedBlock& b : placed) collect_nonzeros(b, m.type, m.rows, m.cols, "csr_from_cbl", t);
  return csr_from_triplets(m.rows, m.cols, t, source_dtype, "csr_from_cbl");
}

CsrMatrix csr_from_cmbl(const CmblMatrix& m, DType source_dtype) {
  validate_cmbl(m, "csr_from_cmbl");
  auto t = cmbl_nonzeros(m, 0, 0, m.rows, m.cols, "csr_from_cmbl");
  return csr_from_triplets(m.rows, m.cols, t, source_dtype, "csr_from_cmbl");
}

CsrMatrix csr_from_crmb(const CrmbMatrix& m, DType source_dtype) {
  validate_crmb(m, "csr_from_crmb");
  auto t = crmb_nonzeros(m, "csr_from_crmb");
  return csr_from_triplets(m.rows, m.cols, t, source_dtype, "csr_from_crmb");
}

CmblMatrix cmbl_from_blocklets(const BlockletDecomposition& d) {
  check_tiles(d, "cmbl_from_blocklets");
  std::vector<const BlockletTile*> tiles;
  for (const BlockletTile& t : d.tiles) tiles.push_back(&t);
  std::sort(tiles.begin(), tiles.end(), layout_order);
  return cmbl_from_tiles(tiles, d.config.shape, d.rows, d.cols, 0, 0);
}

CrmbMatrix crmb_from_blocklets(const BlockletDecomposition& d, BlockShape rmb_block) {
  const char* where = "crmb_from_blocklets";
  check_tiles(d, where);
  check_shape(rmb_block, kMaxRmbBlockSide, where);
  const BlockShape s = d.config.shape;
  if (rmb_block.bh % s.bh != 0 || rmb_block.bw % s.bw != 0)
    throw UsageError(fmt::format("{}: blocklet shape {} does not divide the RMB block {}", where,
                                 block_shape_name(s), block_shape_name(rmb_block)));
  CrmbMatrix m;
  m.block = rmb_block;
  m.rows = d.rows;
  m.cols = d.cols;
  const std::int64_t row_blocks = ceil_div(d.rows, rmb_block.bh);
  m.row_block_ptr.assign(static_cast<std::size_t>(row_blocks) + 1, 0);
  // Tiles by RMB block (row-major), then in layout order inside it.
  auto rmb_of = [&](const BlockletTile* t) {
    return std::pair{t->row / rmb_block.bh, t->col / rmb_block.bw};
  };
  std::vector<const BlockletTile*> tiles;
  for (const BlockletTile& t : d.tiles) tiles.push_back(&t);
  std::sort(tiles.begin(), tiles.end(), [&](const BlockletTile* x, const BlockletTile* y) {
    const auto bx = rmb_of(x), by = rmb_of(y);
    return bx != by ? bx < by : layout_order(x, y);
  });
  for (std::size_t i = 0; i < tiles.size();) {
    const auto [rb, cb] = rmb_of(tiles[i]);
    std::size_t end = i;
    while (end < tiles.size() && rmb_of(tiles[end]) == std::pair{rb, cb}) ++end;
    const std::vector<const BlockletTile*> group(tiles.begin() + static_cast<std::ptrdiff_t>(i),
                                                 tiles.begin() + static_cast<std::ptrdiff_t>(end));
    m.mbl_matrices.push_back(
        cmbl_from_tiles(group, s, rmb_block.bh, rmb_block.bw, rb * rmb_block.bh, cb * rmb_block.bw));
    m.indices.push_back(static_cast<std::int32_t>(cb));
    ++m.row_block_ptr[static_cast<std::size_t>(rb) + 1];
    i = end;
  }
  for (std::int64_t rb = 0; rb < row_blocks; ++rb) m.row_block_ptr[rb + 1] += m.row_block_ptr[rb];
  return m;
}

BlockletDecomposition blocklets_from_cmbl(const CmblMatrix& m, const std::string& precision) {
  const char* where = "blocklets_from_cmbl";
  check_precision(precision, where);
  validate_cmbl(m, where);
  const BlockShape s = common_type({&m}, where);
  std::vector<PlacedBlock> placed;
  place_cmbl(m, 0, 0, placed);
  return decomposition_from_blocks(std::move(placed), s, m.rows, m.cols, precision);
}

BlockletDecomposition blocklets_from_crmb(const CrmbMatrix& m, const std::string& precision) {
  const char* where = "blocklets_from_crmb";
  check_precision(precision, where);
  validate_crmb(m, where);
  std::vector<const CmblMatrix*> mbls;
  for (const CmblMatrix& mbl : m.mbl_matrices) mbls.push_back(&mbl);
  const BlockShape s = common_type(mbls, where);
  std::vector<PlacedBlock> placed;
  const std::int64_t row_blocks = static_cast<std::int64_t>(m.row_block_ptr.size()) - 1;
  for (std::int64_t rb = 0; rb < row_blocks; ++rb)
    for (std::int64_t j = m.row_block_ptr[rb]; j < m.row_block_ptr[rb + 1]; ++j)
      place_cmbl(m.mbl_matrices[static_cast<std::size_t>(j)], rb * m.block.bh,
                 std::int64_t{m.indices[static_cast<std::size_t>(j)]} * m.block.bw, placed);
  return decomposition_from_blocks(std::move(placed), s, m.rows, m.cols, precision);
}

}  // namespace sparsecc
