// Where the Hopper emitter places a tile's elements (hopper/ElementLoops.h map_tile_index), checked
// by numbers: for a tile whose Stmt rows are a tail's shorter pitch and whose GPU rows are the full
// tile's, every element the nest reads lands on the same (row, column) on the GPU. Max pooling
// (loops stepping by two columns and two rows), a stencil's window, and steps the emitter must
// refuse rather than misplace. And how a nest over shared tiles is spread over the threads
// (map_tile_nest): a thread per element only where no two threads can touch one element.
#include "hopper/ElementLoops.h"

#include <gtest/gtest.h>

namespace {

using namespace tandem;
using namespace tandem::hopper_backend;
using Halide::Expr;
using Halide::Internal::Variable;

/** The value of e with the named variables set. */
int64_t value(Expr e, const std::map<std::string, int> &at) {
    for (const auto &[name, v] : at)
        e = Halide::Internal::substitute(name, Expr(v), e);
    e = Halide::Internal::simplify(e);
    const int64_t *k = Halide::Internal::as_const_int(e);
    EXPECT_NE(k, nullptr) << e;
    return k ? *k : -1;
}

class ElementLoops : public ::testing::Test {
protected:
    // Two versions of a 128 x 16 f32 tile, filled by TMA at full size; in the Stmt a tile's rows
    // are `pitch` apart: 128 for full tiles, 88..126 for the tails (the core's tile t = 0..4).
    SramBuffer buffer;
    Tile tile;
    Expr t = Variable::make(Halide::Int(32), "t"), version = Variable::make(Halide::Int(32), "v"),
         x = Variable::make(Halide::Int(32), "x"), y = Variable::make(Halide::Int(32), "y");
    Expr pitch = 600 - 2 * Halide::max(Halide::clamp(t, 0, 4) * 64, 236);

    void SetUp() override {
        buffer.name = "in_tile";
        buffer.type = Halide::Float(32);
        buffer.slots = 2;
        buffer.slot_elements = 2048;
        tile.buffer = &buffer;
        tile.layout = tile.data = tile.reach = {128, 16};
        tile.role = {0, 1};
        tile.dynamic_layout = true;
        tile.stmt_pitch = 128;
        tile.stmt_pitches = {128};
        tile.slot_bytes = 2048 * 4;
    }

    /** Checks every element the nest over y < rows, x < columns reads at `index` (an element of
     * the Stmt's layout: version * 2048 + row * pitch + column) against the GPU's place. */
    void check(const Expr &index, int rows, int columns) {
        const std::vector<Loop> loops = {{"y", 0, rows}, {"x", 0, columns}};
        const TileIndex m = map_tile_index(tile, index, loops);
        ASSERT_FALSE(m.as_in_stmt);
        for (int tt = 0; tt <= 4; tt++) {
            for (int v = 0; v < 2; v++) {
                for (int yy = 0; yy < rows; yy++) {
                    for (int xx = 0; xx < columns; xx++) {
                        std::map<std::string, int> at = {{"t", tt}, {"v", v}, {"y", yy}, {"x", xx}};
                        const int64_t p = value(pitch, at), i = value(index, at) - v * 2048;
                        const int64_t want = v * 2048 + i / p * 128 + i % p;
                        int64_t got =
                            value(m.version, at) * 2048 + (m.row_offset * 128 + m.column_offset);
                        if (!m.outer.empty())
                            got += at[m.outer] * m.outer_rows * 128;
                        if (!m.inner.empty())
                            got += at[m.inner] * m.inner_columns;
                        ASSERT_EQ(got, want) << "tile " << tt << ", version " << v << ", y " << yy
                                             << ", x " << xx << ": " << index;
                    }
                }
            }
        }
    }
};

TEST_F(ElementLoops, MaxPoolingStepsByTwoRowsAndTwoColumns) {
    for (int dy = 0; dy < 2; dy++) {
        for (int dx = 0; dx < 2; dx++)
            // As Halide flattens it: ((pitch * y + x) * 2 + dy * pitch + dx.
            check((pitch * y + x) * 2 + dy * pitch + dx + version * 2048, 8, 44);
    }
}

TEST_F(ElementLoops, StencilWindowInsideTheVersion) {
    for (int dy = 0; dy < 3; dy++) {
        for (int dx = 0; dx < 3; dx++)
            check((x + dx) + (y + dy) * pitch + version * 2048, 13, 86);
    }
}

TEST_F(ElementLoops, EveryOtherRow) {
    // Before session 49 a step of two rows was placed as one row on the GPU.
    const Expr index = (pitch * y) * 2 + x + version * 2048;
    const TileIndex m = map_tile_index(tile, index, {{"y", 0, 8}, {"x", 0, 88}});
    EXPECT_EQ(m.outer_rows, 2);
    check(index, 8, 88);
}

TEST_F(ElementLoops, TailPathWithItsOwnPitch) {
    // Tiles of 124 columns and, on the path of the last one, 20 (its copy's constant pitch): a
    // step of 40 is two rows there, not 40 columns.
    tile.layout = tile.data = tile.reach = {124, 10};
    buffer.slot_elements = 1240;
    tile.slot_bytes = 1240 * 4;
    tile.stmt_pitch = 124;
    tile.stmt_pitches = {124, 20};
    const TileIndex m =
        map_tile_index(tile, (y * 20 + x) * 2 + 21 + version * 1240, {{"y", 0, 5}, {"x", 0, 10}});
    EXPECT_EQ(m.outer, "y");
    EXPECT_EQ(m.outer_rows, 2);
    EXPECT_EQ(m.inner, "x");
    EXPECT_EQ(m.inner_columns, 2);
    EXPECT_EQ(m.row_offset, 1);
    EXPECT_EQ(m.column_offset, 1);
    // A window of one row with no loop to tell the pitch: 21 is a row and a column at a pitch of
    // 20, or 21 columns at 124.
    EXPECT_THROW(map_tile_index(tile, x + 21, {{"x", 0, 3}}), Error);
}

TEST_F(ElementLoops, RefusesStepsThatAreNotRowsOrColumns) {
    // Rows one element longer than the tile's pitch: not a place on the GPU's rows.
    EXPECT_THROW(map_tile_index(tile, x + y * (pitch + 1), {{"y", 0, 8}, {"x", 0, 8}}), Error);
    // A constant step past the row, not a whole number of full rows.
    EXPECT_THROW(map_tile_index(tile, x + y * 130, {{"y", 0, 8}, {"x", 0, 8}}), Error);
}

/** The nest of loops (outermost first) around one store of `value` into `buffer` at `index`. */
Halide::Internal::Stmt nest(const std::vector<Loop> &loops, const std::string &buffer,
                            const Expr &index, const Expr &value) {
    using namespace Halide::Internal;
    Stmt s = Store::make(buffer, value, index, Parameter(), const_true(), ModulusRemainder());
    for (size_t i = loops.size(); i-- > 0;)
        s = For::make(loops[i].name, loops[i].min, loops[i].extent, ForType::Serial,
                      Halide::DeviceAPI::None, s);
    return s;
}

Expr load(const std::string &buffer, const Expr &index) {
    return Halide::Internal::Load::make(
        Halide::Float(32), buffer, index, Halide::Buffer<>(), Halide::Internal::Parameter(),
        Halide::Internal::const_true(), Halide::Internal::ModulusRemainder());
}

TEST(TileNest, ColumnSumIsAThreadPerColumn) {
    // acc[x] += in[k][x] with k outside x (ColumnReduce's schedule): before session 50 one
    // thread ran it all. Each thread now owns columns and runs k in order: the same sums, in the
    // same order, as the Stmt.
    const Plan plan;
    Expr k = Variable::make(Halide::Int(32), "k"), x = Variable::make(Halide::Int(32), "x");
    const TileNest n = map_tile_nest(
        plan, nest({{"k", 0, 8}, {"x", 0, 64}}, "acc", x, load("acc", x) + load("in", k * 64 + x)),
        128);
    ASSERT_EQ(n.kind, TileNest::Kind::ThreadPerElement);
    ASSERT_EQ(n.strided.size(), 1u);
    EXPECT_EQ(n.strided[0].name, "x");
    const auto *inner = n.code.as<Halide::Internal::For>();
    ASSERT_NE(inner, nullptr);
    EXPECT_EQ(inner->name, "k");
}

TEST(TileNest, ThreadsTakeEveryLoopEachStoreMovesAlong) {
    // A 2-D output reduced over k outside it: rows and columns both strided, k in each thread.
    const Plan plan;
    Expr k = Variable::make(Halide::Int(32), "k"), x = Variable::make(Halide::Int(32), "x"),
         y = Variable::make(Halide::Int(32), "y");
    const Expr at = y * 16 + x;
    const TileNest n = map_tile_nest(plan,
                                     nest({{"k", 0, 5}, {"y", 0, 4}, {"x", 0, 16}}, "acc", at,
                                          load("acc", at) * load("in", k * 64 + at)),
                                     128);
    ASSERT_EQ(n.kind, TileNest::Kind::ThreadPerElement);
    ASSERT_EQ(n.strided.size(), 2u);
    EXPECT_EQ(n.strided[0].name, "y");
    EXPECT_EQ(n.strided[1].name, "x");
}

TEST(TileNest, OneThreadWhereThreadsCouldTouchOneElement) {
    const Plan plan;
    Expr k = Variable::make(Halide::Int(32), "k"), x = Variable::make(Halide::Int(32), "x"),
         y = Variable::make(Halide::Int(32), "y");
    // A scatter: x + k meets x' + k' for other columns (steps 1 and 1).
    const Expr scatter = x + k;
    EXPECT_EQ(map_tile_nest(plan,
                            nest({{"k", 0, 8}, {"x", 0, 64}}, "acc", scatter,
                                 load("acc", scatter) + load("in", k * 64 + x)),
                            128)
                  .kind,
              TileNest::Kind::Serial);
    // Rows that overlap: y * 8 + x with 16 columns (the pitch is shorter than a row).
    const Expr overlap = y * 8 + x;
    EXPECT_EQ(map_tile_nest(plan,
                            nest({{"k", 0, 3}, {"y", 0, 4}, {"x", 0, 16}}, "acc", overlap,
                                 load("acc", overlap) + load("in", k)),
                            128)
                  .kind,
              TileNest::Kind::Serial);
    // A running sum along the row reads the element another iteration wrote.
    EXPECT_EQ(map_tile_nest(plan,
                            nest({{"y", 0, 4}, {"x", 0, 15}}, "scan", y * 16 + x + 1,
                                 load("scan", y * 16 + x) + load("in", y * 16 + x)),
                            128)
                  .kind,
              TileNest::Kind::Serial);
}

} // namespace
