#ifndef TANDEM_LOWER_ASCEND_VECTOR_SELECTION_H
#define TANDEM_LOWER_ASCEND_VECTOR_SELECTION_H

/** \file
 * Instruction selection for the Ascend vector path (AscendVector.h): one element nest's value as
 * AscendC's vector instructions (sim::ascend VectorCall's count and repeat forms, Brcb,
 * ReduceSum, Compare / Select), in groups that need no barrier among them. What a nest's operands
 * are over its rows and columns (Kind), where intermediate results go (a private input tile or
 * the kernel's scratch), and the instructions' repeat and stride parameters are decided here;
 * AscendVector.cpp is the pass around it (which ops, which tiles are private, chunks, scratch).
 */

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tandem::lower::ascend_vector {

using Halide::Expr;
using namespace Halide::Internal;

constexpr int kLanes = 64;   // f32 elements of one repeat (256 bytes)
constexpr int kPerBlock = 8; // f32 elements of one 32-byte block
const char *const kScratch = "vector_scratch", *const kMask = "vector_mask",
                  *const kGatherOffsets = "gather_offsets";

struct Loop {
    std::string var;
    Expr min, extent;
};

/** The nest as rows x cols elements: a row-wise nest has two loops (rows outer, columns inner);
 * any other nest is one row of all its elements, every tensor read where the store writes. The
 * rows of a row-wise nest may be padded (AscendRows.h): `cols` is then the tiles' row pitch, and
 * the instructions run over whole padded rows; `width` is how many columns are the nest's (a
 * reduction sums only those; it may be known only at run time, in a tail tile). */
struct Shape {
    std::vector<Loop> loops;
    bool rowwise = false;
    int64_t rows = 1, cols = 0;
    Expr width;
    Expr count;            // a flat nest's elements when only a bound (cols) is constant: a tail's
    int64_t first_row = 0; // a chunk of a row-wise nest: its rows start here
};

/** What an operand is over the nest's (row, column) elements. */
enum class Kind {
    Tile,   // a rows x cols tile, dense
    Row,    // one row, the same for every row (read with a repeat stride of 0)
    PerRow, // one value per row, `rows` of them contiguous
    Blocks, // per-row values broadcast to a 32-byte block each (Brcb): block stride 0, one block
            // per row
    Scalar, // a constant
};

struct Value {
    Kind kind = Kind::Scalar;
    std::string buffer;
    Expr offset, scalar;
    int64_t pitch =
        0; // a column's tile whose rows lie `pitch` apart, not the nest's (0: the nest's)
};

/** The vector instructions' own UB room for intermediate results, beyond the tiles: f32 and, for
 * Compare's masks, uint8. Grows per op; the kernel keeps the largest op's need. */
struct Scratch {
    int64_t floats = 0, mask_bytes = 0; // this op's
    int64_t max_floats = 0, max_mask_bytes = 0;
    int64_t free_bytes = 0; // what UB has left
    Expr take(int64_t n) {
        const int64_t at = floats;
        floats += (n + kPerBlock - 1) / kPerBlock * kPerBlock;
        return Expr(int(at));
    }
    int64_t reserved = 0; // the Gather offset tables so far
    int64_t bytes() const { return floats * 4 + (mask_bytes + 31) / 32 * 32 + reserved; }
    bool fits() const { return bytes() <= free_bytes; }
    // For the error when an op's room does not fit: UB's size and its largest tile.
    int64_t capacity = 0;
    std::string largest;
};

/** The byte offsets of a Gather over a nest of `rows` rows `pitch` apart (the first `width`
 * columns the nest's): element (r, c) reads the source at r * row_step + c * col_step elements,
 * a column past the width (padding) at r * row_step: inside the tile. One table per distinct key,
 * computed once at the kernel's start (AscendVector.h). */
struct GatherTable {
    int64_t row_step = 0, col_step = 0, rows = 1, pitch = 0, width = 1;
    int64_t elements() const { return (rows * pitch + kPerBlock - 1) / kPerBlock * kPerBlock; }
    bool operator<(const GatherTable &o) const {
        return std::tie(row_step, col_step, rows, pitch, width) <
               std::tie(o.row_step, o.col_step, o.rows, o.pitch, o.width);
    }
};

/** The kernel's Gather offset tables (int32_t, in `gather_offsets`): the committed ones and those
 * of the op being mapped (kept only when it maps). */
struct GatherTables {
    std::map<GatherTable, int64_t> committed, pending; // table -> its first element
    int64_t elements = 0, pending_elements = 0;
    Expr offset_of(const GatherTable &t) {
        if (auto it = committed.find(t); it != committed.end())
            return Expr(int(it->second));
        if (auto it = pending.find(t); it != pending.end())
            return Expr(int(it->second));
        const int64_t at = elements + pending_elements;
        pending[t] = at;
        pending_elements += t.elements();
        return Expr(int(at));
    }
    void commit() {
        committed.insert(pending.begin(), pending.end());
        elements += pending_elements;
        rollback();
    }
    void rollback() {
        pending.clear();
        pending_elements = 0;
    }
    int64_t bytes() const { return (elements + pending_elements) * 4; }
};

/** The instructions of one logical op: they touch disjoint elements of their destination, so
 * they need no barrier among them; a group that depends on an earlier one is behind a barrier. */
struct Group {
    std::vector<ir::VectorInstruction> instructions;
};

/** Whether an element offset provably starts inside a 32-byte block. */
bool misaligned(const Expr &offset);

/** The loads in an Expr, outermost first. */
std::vector<const Halide::Internal::Load *> loads_in(const Expr &value);

/** The instructions of one nest (Shape) from its value: gen() an expression into a tile,
 * assign() / reduce() into the destination; `ok` false when the nest has no mapping. */
class Selection {
public:
    Selection(const Shape &shape, const std::set<std::string> &private_tiles, Scratch &scratch,
              GatherTables &tables)
        : shape(shape), private_tiles(private_tiles), scratch(scratch), tables(tables) {}

    std::vector<Group> groups;
    bool ok = true;
    bool per_row_values =
        false; // some operand is not a dense tile (a flat nest cannot go in chunks)
    bool per_row_operands = false; // some operand has a value per row (a chunk's start on a block)
    bool gathers = false;          // some operand is gathered (Gather)

    /** Counts the reads of each tile (before gen), for reusing a private tile as a temp. */
    void count_reads(const Expr &e);

    /** A Load as an operand, from its index's steps along the rows and the columns. */
    Value classify(const Load *l) const;

    /** A Load classify() refuses whose index is affine in the nest's loops with steps >= 0 (a
     * transposed read, a window starting inside a 32-byte block): its elements gathered into a
     * dense tile (`into`, else a temp), by byte offsets (GatherTables) from the 32-byte block
     * it starts in. */
    bool gatherable(const Load *l) const;
    Value gather(const Load *l, const Value &into);

    /** The value of `e`; a tile result goes into `into` (a Tile). */
    Value gen(const Expr &e, const Value &into);

    /** An int32 expression of the element's position (its row and column, a causal mask's
     * key - query), affine in the nest's loops, as a float tile: the columns' indices made once
     * (CreateVecIndex), scaled and offset, plus the rows' (CreateVecIndex per row, broadcast).
     * Exact while the positions stay below 2^24. */
    Value position(const Expr &e);

    /** A reduction over the columns into one value per row: self[r] = self[r] op (f over the
     * row), op "Add" (ReduceSum per row, then Add), "Max" or "Min" (ReduceMax / ReduceMin per
     * row, each into its own sharedTmpBuffer, the row values gathered by a WholeReduceMax /
     * WholeReduceMin of one lane per row, then Max / Min). */
    void reduce(const Value &self, const Expr &f, const std::string &op = "Add");

    /** A reduction down the columns (self[x] = self[x] op f[r, x], self one row): f as a tile (its
     * instructions in groups), then `rows` instructions `op` of the row r into self, each behind
     * a barrier (the element loops' order). Returns the tile f is in; the caller makes the loop
     * over the rows (`rows` may be known only at run time). */
    Value column_operand(const Expr &f);

    /** dst = value, the value of the store: nothing when it is there already, a Duplicate of a
     * constant, else a copy on V (Muls by 1: exact, -0 and NaN kept). */
    void assign(const Value &dst, const Value &value);

    /** dst = value, an update's (the destination is read until the last instruction): the last
     * group's instructions, which made value, write dst instead where value is laid out as dst;
     * else assign(). */
    void assign_update(const Value &dst, const Value &value);

    /** A tile for an intermediate result: a private input tile the op has finished reading, else
     * scratch. */
    Value temp();

    Value fail();

    /** The elements a tile holds (a bound), and those the instructions run over. */
    int64_t elements() const { return shape.rows * shape.cols; }
    int64_t rows() const { return shape.rows; }
    Expr count() const { return shape.count.defined() ? shape.count : Expr(int(elements())); }

private:
    struct Tile {
        Expr base;
        int reads = 0;          // reads of it the instructions have not made yet
        bool one_region = true; // every read at `base`
        bool holds = false;     // it holds an intermediate result
    };
    const Shape &shape;
    const std::set<std::string> &private_tiles;
    Scratch &scratch;
    GatherTables &tables;
    std::map<std::string, Tile> tiles;
    std::map<std::string, Value>
        broadcasts;               // per-row values already in blocks, by buffer and offset
    std::vector<Expr> free_tiles; // scratch tiles whose value has been used

    /** A scratch tile whose value its one reader has now used goes back to the pool (the barrier
     * before the next writer of scratch orders the reuse). */
    void release(const Value &v, const Value &dst);

    /** An f32 value the same for the whole nest and read from no tile (a constant, or one
     * computed from the kernel's runtime extents): an instruction's scalar operand. */
    bool scalar(const Expr &e) const;

    bool leaf(const Expr &e) const { return e.as<Load>() || scalar(e); }

    static std::vector<Expr> children(const Expr &e);

    Value per_row();

    /** Where a tile result goes: `into` when given, else a temp. */
    Value result_tile(const Value &into) { return into.buffer.empty() ? temp() : into; }

    /** An int32 tile (an int8 matmul's accumulator) as f32: Cast with CAST_NONE. */
    Value widen(const Halide::Internal::Load *l, const Value &into);

    /** A tile for the result of an instruction reading x and y: in place in an operand this
     * instruction reads for the last time (a private tile), so that it needs no other tile and
     * no barrier against an earlier reader of another; else temp(). */
    Value last_read(const Value &x, const Value &y);

    /** A per-row value as an operand of a tile instruction: its rows' blocks (Brcb, into scratch).
     */
    Value broadcast(const Value &v);

    /** dst = x op y (a scalar on either side), over `n` elements (tiles) or the rows (per-row). */
    void combine(const std::string &op, const Value &dst, const Value &x, const Value &y,
                 const Expr &n);

    /** select(a < b, t, f) and the other comparisons: Compare into the mask, then Select. */
    Value select(const Halide::Internal::Select *s, const Value &into);
    /** Compare x with y (CMPMODE `mode`) over `whole` elements into the mask. */
    void compare(const Value &x, const Value &y, int64_t whole, int mode);
    /** dst = the mask's t, else f, over `n` elements. */
    void select_by_mask(const Value &dst, const Value &t, const Value &f, const Expr &n);
    /** Whether the values read are all one per row (and there is one): a select among them is
     * one per row too (attention's running max, -inf while a row has seen no key). */
    bool per_row_only(const std::vector<Expr> &values) const;
    /** select() over one value per row: Compare and Select over the rows. */
    Value select_rows(int mode, const Expr &true_value, const Expr &false_value, const Expr &a,
                      const Expr &b);

    /** Each row's sum (op "Add") or maximum / minimum ("Max" / "Min") of the tile v, one per
     * row, by repeat-form reductions rather than an instruction per row: rows of 64k lanes
     * folded to 64 and BlockReduce'd twice, rows of at most 64 by one WholeReduce a repeat a
     * row; an empty Value where the nest is neither (a width known at run time, a tail). */
    Value row_reduction(const Value &v, const std::string &op);
    /** reduce() by ReduceMax / ReduceMin (op "Max" / "Min") of the tile v. */
    void reduce_extreme(const Value &self, const Value &v, const std::string &op);

    /** A tile's values in scratch with room for `whole` elements (a Muls by 1: exact). */
    Value in_whole_repeats(const Value &v, int64_t whole);

    /** A tile at the nest's row pitch: a column tile at another pitch copied into a temp. */
    Value uniform(const Value &v);

    /** A value as a dense tile (a constant: a Duplicate into a temp). */
    Value tile_of(const Value &v);

    /** One count-form instruction. */
    void emit_count(const std::string &op, const Value &dst, const std::vector<Value> &srcs,
                    const Expr &scalar, const Expr &n);

    /** A tile instruction: the count form when every operand is a dense tile (or per-row values
     * over the rows), else the repeat form over rows and columns. */
    void emit(const std::string &op, const Value &dst, const std::vector<Value> &srcs,
              const Expr &scalar, const Expr &n);

    void read(const Value &v);
};

} // namespace tandem::lower::ascend_vector

#endif
