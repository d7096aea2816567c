// The cube's real AscendC instructions for the IR's copies and MMAs (Cube.h).
#include "Cube.h"

namespace tandem::ascend_backend {

using namespace Halide::Internal;
using Halide::Expr;
using sim::ascend::Mem;

namespace {

Expr up(const Expr &x, int64_t to) {
    return simplify((x + int(to - 1)) / int(to) * int(to));
}

const SramBuffer &buffer(const Kernel &k, const std::string &name) {
    const SramBuffer *b = k.buffer(name);
    internal_assert(b) << "ascend cube: no on-chip buffer " << name << "\n";
    return *b;
}

Mem mem_of(const Kernel &k, const std::string &name) {
    const SramBuffer *b = k.buffer(name);
    return b ? b->ascend_mem : Mem::GM;
}

/** A version's start and the offset inside it. */
struct InVersion {
    Expr base, logical;
};
InVersion split(const Expr &offset, int64_t slot_elements) {
    Expr s = int(slot_elements);
    return {simplify(offset / s * s), simplify(offset % s)};
}

/** C0: the elements of a 32-byte fractal row. */
int c0_of(const SramBuffer &b) {
    return 32 / b.type.bytes();
}

/** What an L1 tile's rows round up to in its Nz: 16, or 32 for 8-bit data (LoadDataWithTranspose
 * reads two fractals of a column block at once). */
int row_pad(const SramBuffer &b) {
    return b.type.bytes() == 1 ? 32 : 16;
}

std::string text(const ir::CopyOp &c) {
    std::ostringstream os;
    os << c.src << " -> " << c.dst << " (" << c.dims.size() << " dims:";
    for (const ir::CopyDim &d : c.dims)
        os << " {" << d.extent << ", " << d.dst_stride << ", " << d.src_stride << "}";
    return os.str() + ")";
}

/** The version an L1 tile copy starts, checking that it covers the tile from its first element
 * (the tile's layout is set by the copy's rows: Halide packs each tile by its own extents). */
Expr tile_start(const SramBuffer &l1, const Expr &offset, const ir::CopyOp &c) {
    InVersion v = split(offset, l1.slot_elements);
    internal_assert(is_const_zero(v.logical)) << "ascend cube: the copy " << text(c) << " starts "
                                              << v.logical << " elements into its L1 tile\n";
    return v.base;
}

/** GM row-major rows -> the L1 tile's Nz: column blocks of the tile's rows rounded up to 16. A
 * tile one element wide or high (Halide may give it one dimension, and then which side is which
 * is lost; its GM elements may be strided) is laid out as one column: n rows of one element. */
CubeCall nd2nz(const Kernel &k, const ir::CopyOp &c) {
    const SramBuffer &l1 = buffer(k, c.dst);
    internal_assert(!c.dims.empty() && c.dims.size() <= 2)
        << "ascend cube: the copy " << text(c) << " is not rows of a tile\n";
    CubeCall call;
    call.kind = CubeCall::Kind::Nd2Nz;
    call.dst = c.dst;
    call.src = c.src;
    call.dst_offset = tile_start(l1, c.dst_offset, c);
    call.src_offset = c.src_offset;
    const ir::CopyDim *line = nullptr; // the elements of a one-wide tile
    if (c.dims.size() == 1)
        line = &c.dims[0];
    else if (is_const_one(c.dims[1].extent))
        line = &c.dims[0];
    else if (is_const_one(c.dims[0].extent))
        line = &c.dims[1];
    if (line) {
        call.n_value = line->extent;
        call.d_value = 1;
        call.src_d_value = line->src_stride;
    } else {
        internal_assert(is_const_one(c.dims[0].dst_stride) && is_const_one(c.dims[0].src_stride))
            << "ascend cube: the copy " << text(c) << " is not whole rows of a row-major tile\n";
        call.d_value = c.dims[0].extent;
        call.n_value = c.dims[1].extent;
        call.src_d_value = c.dims[1].src_stride;
    }
    call.dst_nz_c0_stride = up(call.n_value, row_pad(l1));
    return call;
}

/** The LoadData2D calls that fill an L0 operand of rows x cols fractals laid row after row (Zz,
 * Zn) from L1, where fractal (r, c) lies at fractal index corner + r * row_step + c * col_step. A
 * call moves one row or one column (its repeats step by srcStride in L1 and by dstGap in L0), so
 * the calls run over the shorter side; where L1 holds the fractals in L0's order, the whole
 * operand is one call (at most 255 repeats). Each form moves the same fractals to the same places;
 * the fields are selects where the extents are runtime ones (a tail tile picks at run time). */
void fractal_grid(CubeCall &call, const Expr &dst, const Expr &rows, const Expr &cols,
                  const Expr &corner, const Expr &row_step, const Expr &col_step, int c0) {
    const Expr i = Variable::make(Halide::Int(32), cube_index());
    const int fractal = 16 * c0; // elements
    const Expr whole = simplify(col_step == 1 && row_step == cols && rows * cols <= 255);
    const Expr by_row = simplify(whole || rows <= cols);
    auto pick = [&](const Expr &row, const Expr &column) {
        return simplify(select(by_row, row, column));
    };
    call.count = simplify(select(whole, 1, pick(rows, cols)));
    call.repeat_times = simplify(select(whole, rows * cols, pick(cols, rows)));
    call.start_index = pick(corner + i * row_step, corner + i * col_step);
    call.src_stride = pick(col_step, row_step);
    call.dst_offset = pick(dst + i * cols * fractal, dst + i * fractal);
    call.dst_gap = pick(0, cols - 1);
}

/** L1 Nz -> L0A Zz (A is m x k) or L0B Zn (B is k x n). The IR's L0 copy is dense: dims[0] the
 * inner side (A: k, B: n), dims[1] the outer (A: m, B: k), each with its stride in the row-major
 * L1 tile: the side with stride 1 is the tile's columns, the other its rows. */
CubeCall load_data(const Kernel &k, const ir::CopyOp &c, bool a_operand) {
    const SramBuffer &l1 = buffer(k, c.src);
    internal_assert(c.dims.size() == 2)
        << "ascend cube: the operand load " << text(c) << " is not two-dimensional\n";
    const int c0 = c0_of(l1);
    const ir::CopyDim &inner = c.dims[0], &outer = c.dims[1];
    // Which side are the tile's rows: a side the read takes one element of says nothing (Halide
    // drops its stride), so the other is the rows - of a tile one element wide (nd2nz lays such
    // tiles out as one column, its stride 1) or of a wider tile read a column at a time. With
    // both sides wider, the side with stride 1 is the columns.
    // A single element is the same either way: read as it lies (no transpose).
    bool rows_outer = a_operand || !is_const_one(outer.extent) || !is_const_one(inner.extent);
    if (is_const_one(outer.extent) && !is_const_one(inner.extent))
        rows_outer = false;
    else if (!is_const_one(inner.extent) && !is_const_one(outer.extent)) {
        rows_outer = is_const_one(inner.src_stride);
        internal_assert(rows_outer || is_const_one(outer.src_stride))
            << "ascend cube: the operand load " << text(c)
            << " reads neither the rows nor the columns of its L1 tile\n";
    }
    const Expr &rows = rows_outer ? outer.extent : inner.extent;
    const Expr pitch = simplify(max(rows_outer ? outer.src_stride : inner.src_stride, 1));
    // Fractals per column block of the tile's Nz (the read covers the tile's rows).
    const Expr blocks = simplify(up(rows, row_pad(l1)) / 16);
    // The read may start inside the tile (a resident operand read a K slice at a time), at a
    // whole fractal: any row block of a one-column tile, any column block of another.
    InVersion v = split(c.src_offset, l1.slot_elements);
    Expr col0 = simplify(v.logical % pitch), row0 = simplify(v.logical / pitch);
    // The first fractal it reads.
    Expr corner = simplify(col0 / c0 * blocks + row0 / 16);
    Expr i = Variable::make(Halide::Int(32), cube_index());
    CubeCall call;
    call.kind = CubeCall::Kind::LoadData;
    call.dst = c.dst;
    call.src = c.src;
    call.src_offset = v.base;
    call.check = simplify(select(pitch == 1, row0 % 16 == 0, row0 == 0 && col0 % c0 == 0));
    if (l1.type.bytes() == 1 && rows_outer != a_operand) {
        // 8-bit data stored with K outermost (L1 rows are k): LoadDataWithTranspose turns a 32 x
        // 32 block (fractals 2r and 2r + 1 of a column block) into two fractals of 16 m or n rows
        // and 32 k (the AscendC sample mmad_s8_f16_f32_with_A_B_transpose_option's loops). The
        // last block may write one fractal past the rows rounded to 16: the L0 tile has room for
        // them rounded to 32, and a B's lands where the next K block's call writes after it.
        const int64_t fractal = 512;
        const Expr kp = up(rows, c0), columns = rows_outer ? inner.extent : outer.extent;
        call.kind = CubeCall::Kind::LoadDataTranspose8;
        call.check = simplify(row0 % 32 == 0 && col0 % c0 == 0);
        call.start_index = 0;
        call.repeat_times = simplify(a_operand ? kp / 32 : (columns + 31) / 32);
        if (a_operand) {
            // A (Zz, strips of 16 m rows kp wide): a call per 32 m (column block i of L1), a
            // repeat per K block: the two fractals one strip apart, the next repeat's beside.
            call.count = simplify((columns + 31) / 32);
            call.src_offset = simplify(v.base + (corner + i * blocks) * int(fractal));
            call.dst_offset = simplify(c.dst_offset + i * 32 * kp);
            call.src_stride = 1;
            call.dst_frac_gap = simplify(kp / 32 - 1);
            call.dst_gap = 0;
        } else {
            // B (Zn, K block i holds up(n, 16) / 16 fractals in a row): a call per K block, a
            // repeat per 32 n (the next column block of L1): both fractals side by side.
            call.count = simplify(kp / 32);
            call.src_offset = simplify(v.base + (corner + 2 * i) * int(fractal));
            call.dst_offset = simplify(c.dst_offset + i * up(inner.extent, 16) * c0);
            call.src_stride = simplify(blocks / 2);
            call.dst_frac_gap = 0;
            call.dst_gap = 1;
        }
        return call;
    }
    if (a_operand) {
        // A (m x k) into Zz: rows are 16-row strips of m, columns C0-wide blocks of k.
        const Expr mf = simplify((outer.extent + 15) / 16),
                   kf = simplify(up(inner.extent, c0) / c0);
        if (rows_outer) // L1 rows are m: strip r is row block r of every column block
            fractal_grid(call, c.dst_offset, mf, kf, corner, 1, blocks, c0);
        else { // L1 rows are k (A stored transposed): strip r is column block r, transposed
            fractal_grid(call, c.dst_offset, mf, kf, corner, blocks, 1, c0);
            call.transpose = true;
        }
    } else {
        // B (k x n) into Zn: rows are C0-deep blocks of k, columns 16-wide blocks of n.
        const Expr kf = simplify((outer.extent + (c0 - 1)) / c0),
                   nf = simplify(up(inner.extent, 16) / 16);
        if (!rows_outer) // L1 rows are n (attention's K): k block r is column block r
            fractal_grid(call, c.dst_offset, kf, nf, corner, blocks, 1, c0);
        else { // L1 rows are k: k block r is row block r of every column block, transposed
            fractal_grid(call, c.dst_offset, kf, nf, corner, 1, blocks, c0);
            call.transpose = true;
        }
    }
    return call;
}

/** The accumulator store as [n, m]: its first dim (n, or m where Halide left out an n of extent
 * 1), the later dims that move more than one element (not a batch's), and a unit n put back in
 * front of a lone m: a lone dim is m where it steps by a row, or, when rows are one element apart,
 * where it is longer than the output's n. */
ir::CopyOp accumulator_rows(const Kernel &k, const ir::CopyOp &store) {
    ir::CopyOp c = store;
    c.dims.assign(1, store.dims.at(0));
    for (size_t d = 1; d < store.dims.size(); d++) {
        if (!is_const_one(store.dims[d].extent))
            c.dims.push_back(store.dims[d]);
    }
    if (c.dims.size() > 1 || is_const_one(c.dims[0].extent))
        return c;
    const KernelArg *out = k.arg(c.dst);
    const bool n_runtime = out && !out->runtime.empty() && out->runtime[0];
    const int64_t n = out && !out->extents.empty() ? out->extents[0] : 0;
    const Expr bound = find_constant_bound(c.dims[0].extent, Direction::Upper); // a tail's too
    const int64_t extent = bound.defined() && is_const(bound) ? *as_const_int(bound) : -1;
    if (!is_const_one(c.dims[0].dst_stride) || (out && !n_runtime && extent > n))
        c.dims.insert(c.dims.begin(), {Expr(1), Expr(1), Expr(1)});
    return c;
}

CubeCall fixpipe(const Kernel &k, const ir::CopyOp &store) {
    const ir::CopyOp c = accumulator_rows(k, store);
    const SramBuffer &l0c = buffer(k, c.src);
    internal_assert(!c.dims.empty() && c.dims.size() <= 2 && is_const_one(c.dims[0].dst_stride) &&
                    is_const_one(c.dims[0].src_stride))
        << "ascend cube: the accumulator store " << text(c) << " is not whole rows\n";
    CubeCall call;
    call.kind = CubeCall::Kind::Fixpipe;
    call.dst = c.dst;
    call.src = c.src;
    call.dst_offset = c.dst_offset;
    call.src_offset = split(c.src_offset, l0c.slot_elements).base; // the tile's accumulator
    call.n_size = c.dims[0].extent;
    call.m_size = c.dims.size() == 2 ? c.dims[1].extent : Expr(1);
    call.fix_src_stride = up(call.m_size, 16); // the Mmad's Nz: column blocks of m rounded to 16
    call.dst_stride = c.dims.size() == 2 ? c.dims[1].dst_stride : c.dims[0].extent;
    return call;
}

/** The copy without its dims past the second that move one element (a batched matmul's tile
 * lies in one batch: its copies are the tile's rows plus a unit batch dim). A tile that still has
 * more than two dims is not a matrix: a user error. */
ir::CopyOp matrix_copy(const ir::CopyOp &copy) {
    ir::CopyOp c = copy;
    for (size_t d = c.dims.size(); d-- > 2;) {
        if (is_const_one(c.dims[d].extent))
            c.dims.erase(c.dims.begin() + long(d));
    }
    if (c.dims.size() > 2) {
        throw Error("ascend: the cube copies " + c.src + " -> " + c.dst + " as " +
                    std::to_string(c.dims.size()) +
                    " dims: a matmul tile is a matrix; tile the batch (or any third) dimension by "
                    "1 outside the tile, for example fuse it into the tiles map_to_cores spreads");
    }
    return c;
}

} // namespace

const std::string &cube_index() {
    static const std::string name = "cube_call";
    return name;
}

bool is_cube_copy(const Kernel &k, const ir::CopyOp &c) {
    Mem src = mem_of(k, c.src), dst = mem_of(k, c.dst);
    return (src == Mem::GM && dst == Mem::L1) ||
           (src == Mem::L1 && (dst == Mem::L0A || dst == Mem::L0B)) || src == Mem::L0C;
}

CubeCall cube_copy(const Kernel &k, const ir::CopyOp &copy) {
    Mem src = mem_of(k, copy.src), dst = mem_of(k, copy.dst);
    const ir::CopyOp c = matrix_copy(copy);
    if (src == Mem::GM && dst == Mem::L1)
        return nd2nz(k, c);
    if (src == Mem::L1 && (dst == Mem::L0A || dst == Mem::L0B))
        return load_data(k, c, dst == Mem::L0A);
    internal_assert(src == Mem::L0C && dst == Mem::GM)
        << "ascend cube: no instruction copies " << text(c) << "\n";
    return fixpipe(k, c);
}

CubeCall cube_mma(const Kernel &k, const ir::MmaOp &m) {
    CubeCall call;
    call.kind = CubeCall::Kind::Mmad;
    call.dst = m.acc;
    call.src = m.a;
    call.src2 = m.b;
    call.dst_offset = split(m.acc_offset, buffer(k, m.acc).slot_elements).base;
    call.src_offset = m.a_offset;
    call.src2_offset = m.b_offset;
    call.m = m.m;
    call.n = m.n;
    call.k = m.k;
    call.accumulate = m.accumulate.defined() ? m.accumulate : Halide::Expr(true);
    return call;
}

} // namespace tandem::ascend_backend
