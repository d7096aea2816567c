#ifndef TANDEM_HOPPER_ELEMENTLOOPS_H
#define TANDEM_HOPPER_ELEMENTLOOPS_H

/** \file
 * The element-loop mapping of the Hopper emitter: how the element nest of a vector op runs on the
 * GPU, decided here and printed by CodeGen.h (ElementCode.cpp) (as Plan.h decides the tiles and the
 * tensor maps).
 *
 *  - Over an accumulator held in wgmma fragment registers: a zeroing (check_zeroing), or an
 *    epilogue (map_epilogue): each thread runs the element code over the (row, col) of its own
 *    fragment registers, the nest's loops mapped onto the accumulator's rows and columns; two
 *    adjacent columns become one 4- or 8-byte store where the store allows (the paired store); an
 *    epilogue into a column-block ring (Tile::ring_blocks) is printed with the store that follows
 *    it, one column block at a time.
 *  - Over shared tiles (map_tile_nest): elementwise, the nest's range strided over the role's
 *    threads, where every store writes its own element and the loops are rectangular (loads the
 *    loops do not move are read once into registers); a reduction of the innermost loop, with
 *    per-thread partials and a shuffle reduction (a warp per row where there are rows enough for
 *    every warp); a thread per element where the loops every store moves along are strided over
 *    the threads and the others (a reduction down columns: acc[x] += in[k][x], k outside x) run in
 *    order inside each thread; else one thread runs the nest.
 *  - Every tile element the nest touches is placed in the tile's GPU layout (map_tile_index):
 *    its version at the GPU's version stride, rows that differ from the GPU's (a tail's pitch, a
 *    row padded to 16 bytes) rewritten to the full tile, 128B-swizzled column blocks. The Stmt's
 *    pitch there is told by a loop stepping whole rows of it, by a start whole rows into the
 *    version, or by the tile's copies (Tile::stmt_pitches); where none tells it, the planner
 *    copies the tile by threads in the Stmt's layout instead (Plan.cpp place_elements).
 *
 * Limits (tandem::Error naming the vector op or the buffer): an element nest over an accumulator
 * is a zeroing or a per-element epilogue of one or two loops that start at 0, walk the
 * accumulator's rows and columns from its first element and read one element of it; a tile whose
 * rows differ on the GPU is at most 2-D and indexed affinely in the nest's loop vars, one loop
 * stepping by whole rows and one by columns (max pooling's two of each), from a version's start
 * or from whole rows and columns inside it (a stencil's shifted window).
 */

#include "Plan.h"

#include <optional>
#include <string>
#include <vector>

namespace tandem::hopper_backend {

/** A loop of an element nest. */
struct Loop {
    std::string name;
    Halide::Expr min, extent;
};

/** Peels the For chain of an element nest: loops outermost first, and what is inside them. */
Halide::Internal::Stmt peel_loops(const Halide::Internal::Stmt &nest, std::vector<Loop> *loops);

/** store[i] = store[i] op f(k), reduced over the innermost loop k. */
struct Reduction {
    enum class Op { Add, Max, Min };
    Op op = Op::Add;
    const Halide::Internal::Store *store = nullptr;
    Halide::Expr self_load; // the operand reading the stored element
    Halide::Expr rest;      // f(k)
    Halide::Expr identity;  // of op, in the store's type
    /** A warp per row of the loops outside k (shuffles only, no barrier): rows enough for every
     * warp of the role. Else the role's threads reduce each row together. */
    bool warp_per_row = false;
    Halide::Expr combine(const Halide::Expr &x, const Halide::Expr &y) const;
};

/** An accumulator epilogue mapped onto each thread's wgmma fragment registers. */
struct FragmentEpilogue {
    /** The accumulators the element code reads, the one it maps first: every one of the same
     * MMA tile and read at the same element, so one fragment register index serves them all
     * (SwiGLU's two matmuls meeting in one epilogue). */
    std::vector<std::string> accumulators;
    std::vector<Loop> loops;     // the nest's loops (at most two)
    Halide::Internal::Stmt body; // inside them: the element code
    std::string row, col;        // the IR vars of the fragment's row and column (an internal
                                 // name, at 0, where no loop walks that way)
    Halide::Expr rows, cols;     // the nest's extents along them: the guards
    /** The body's store where columns col and col + 1 land next to each other at an even element
     * (a register pair as one aligned 4- or 8-byte store), else null. */
    const Halide::Internal::Store *pair = nullptr;
    /** Non-empty: the body writes this tile, held as a ring of column blocks; the epilogue is
     * printed with the tile's store, one column block at a time. */
    std::string ring_tile;
    /** The body's stores into MMA operands made on chip (Tile::on_chip): outside the nest's
     * extents the epilogue writes zeros there, the padding the next wgmma multiplies. */
    std::vector<const Halide::Internal::Store *> operands;
    int64_t block_columns = 0; // the columns of one block of that ring (0: none)
    /** Set: the body is a reduction over the fragment's columns into a shared tile indexed by
     * the row (softmax's row max and sum of the scores): each thread folds its registers of a
     * row, the row's four threads shuffle, and one of them updates the element. */
    std::optional<Reduction> row_reduction;
    /** The body's f32 loads of shared tiles at the element's row alone (not its column) that
     * the body does not write (attention's row max and rescale factors): the emitter loads each
     * once per thread and row, before the registers (CodeGen::row_values), and the model
     * charges them so (VectorCost). Distinct by buffer and index. */
    std::vector<const Halide::Internal::Load *> row_loads;
};

/** The epilogue of vector op `v` (its element nest `nest`) that reads the accumulator `acc`, and
 * any others of the same tile; throws tandem::Error where the nest is not one the fragments can
 * run. `tile`: the MMA that last wrote acc before it (the tile's own shape), if known. With
 * `reads` false the nest reads no accumulator but writes an MMA operand made on chip whose tile
 * is acc's (Plan::fragments_of): it walks acc's fragments, placed by its store into the operand,
 * and zeroes the operand's padding. */
FragmentEpilogue map_epilogue(const Plan &plan, const ir::VectorOp &v,
                              const Halide::Internal::Stmt &nest, const std::string &acc,
                              const ir::MmaOp *tile = nullptr, bool reads = true);

/** Throws tandem::Error unless the nest of `v` zeroes the accumulator `acc` (in registers an
 * accumulator can only be zeroed, or read by an epilogue). */
void check_zeroing(const ir::VectorOp &v, const Halide::Internal::Stmt &nest,
                   const std::string &acc);

/** How the element nest of a vector op over shared tiles runs on a role's threads. */
struct TileNest {
    enum class Kind { Elementwise, Reduction, ThreadPerElement, Serial };
    Kind kind = Kind::Serial;
    std::vector<Loop> loops;
    /** ThreadPerElement: the loops strided over the threads (outermost first); `code` runs the
     * other loops, in their order, around the body in each thread. */
    std::vector<Loop> strided;
    /** ThreadPerElement with a single 32-bit store: its element is held in a register across the
     * other loops (read before them, written after): `code` stores to `held_name` instead. */
    const Halide::Internal::Store *held = nullptr;
    Halide::Internal::Stmt body;
    /** Elementwise: loads the loops do not move, of buffers the nest does not write (a row's
     * scalar), read once into registers (the compiler cannot prove shared memory unaliased): the
     * name each is read into, and the load; `code` is the body reading the names instead. */
    std::vector<std::pair<std::string, Halide::Expr>> scalars;
    Halide::Internal::Stmt code;
    Reduction reduction; // Kind::Reduction
};

/** The register a ThreadPerElement nest holds its store's element in (TileNest::held). */
extern const std::string held_name;

/** The mapping of `nest` onto a role of `threads` threads. */
TileNest map_tile_nest(const Plan &plan, const Halide::Internal::Stmt &nest, int threads);

/** Where an element of a tile lies on the GPU: version * tile.slot_elements() + the element
 * within the version, in 128B-swizzled column blocks where the tile is swizzled
 * (Tile::swizzled). */
struct TileIndex {
    bool as_in_stmt = false; // the Stmt's index is the GPU's (the tile keeps the Stmt's layout)
    Halide::Expr version;    // the version the element lies in (0: the first)
    /** The tile's GPU layout is the Stmt's within a version (not Tile::dynamic_layout): the
     * element within the version. */
    Halide::Expr element;
    /** Else the element is outer * layout[0] + inner: the nest's loop vars stepping by a row and
     * by 1 ("" where none does). */
    std::string outer, inner;
    /** `dynamic_layout`: the Stmt rows the outer var steps by, the columns the inner one does. */
    int64_t outer_rows = 1, inner_columns = 1;
    bool rows_of_tile = true;  // the outer var steps by the tile's row, the inner one by 1
    bool version_start = true; // the index minus its loop vars is the start of a version
    /** Else (a window inside the version of a `dynamic_layout` tile) its start: whole rows of
     * the Stmt's pitch and elements, placed at row_offset * layout[0] + column_offset. */
    int64_t row_offset = 0, column_offset = 0;
};

/** The GPU place of `tile`'s element `index` inside the element nest `loops`. */
TileIndex map_tile_index(const Tile &tile, const Halide::Expr &index,
                         const std::vector<Loop> &loops);

} // namespace tandem::hopper_backend

#endif
