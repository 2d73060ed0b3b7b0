// Integer helpers every stage uses, in one place.
#pragma once

#include <cstdint>

namespace sparsecc {

// Rounded-up integer division of non-negative a by positive b: ceil_div(10, 4) == 3, ceil_div(8, 4) == 2.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Non-negative a rounded up to a multiple of positive b: round_up(10, 4) == 12, round_up(8, 4) == 8.
constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

static_assert(ceil_div(10, 4) == 3 && ceil_div(8, 4) == 2 && ceil_div(0, 4) == 0);
static_assert(round_up(10, 4) == 12 && round_up(8, 4) == 8 && round_up(0, 4) == 0);

}  // namespace sparsecc
