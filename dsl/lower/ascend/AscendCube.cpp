#include "AscendCube.h"

#include "lower/FirstMma.h"
#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

std::string l0(const std::string &operand) {
    return operand + ".l0";
}

int64_t round16(int64_t n) {
    return (n + 15) / 16 * 16;
}

/** A fractal row's elements (C0, 32 bytes: 32 int8) or 16, the larger: an operand tile's K side
 * (and an L1 tile's columns) round up to it. */
int64_t round_k(int64_t n, const Halide::Type &type) {
    const int64_t c0 = std::max<int64_t>(16, 32 / type.bytes());
    return (n + c0 - 1) / c0 * c0;
}

/** An operand tile's other side (and an L1 tile's rows): 16, or 32 for 8-bit data, which
 * LoadDataWithTranspose moves in 32 x 32 blocks (backends/ascend/Cube.h). */
int64_t round_rows(int64_t n, const Halide::Type &type) {
    return type.bytes() == 1 ? (n + 31) / 32 * 32 : round16(n);
}

/** The cube's buffers: the L1 operand tiles and the L0C accumulators of every tile MMA, and
 * the accumulators one column wide (Halide then stores them with one dimension, like a row). */
class CubeBuffers : public IRVisitor {
public:
    std::set<std::string> operands, accumulators, columns;

private:
    using IRVisitor::visit;
    void visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (ir::as_mma(Stmt(op), &m)) {
            operands.insert(m.a);
            operands.insert(m.b);
            accumulators.insert(m.acc);
            if (is_const_one(m.n) && !is_const_one(m.m))
                columns.insert(m.acc);
        }
    }
};

/** A one-column accumulator's stores as rows of one element: Halide gives them one dimension,
 * which would otherwise read as a single row of the Mmad's Nz. */
class ColumnCopies : public IRMutator {
public:
    explicit ColumnCopies(const CubeBuffers &cube) : cube(cube) {}

private:
    using IRMutator::visit;
    const CubeBuffers &cube;
    Stmt visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(Stmt(op), &c) || c.dims.size() != 1)
            return op;
        if (!cube.accumulators.count(c.src) || !cube.columns.count(c.src))
            return op;
        c.dims.insert(c.dims.begin(), ir::CopyDim{1, 1, 1});
        return ir::make_copy(c);
    }
};

/** Sizes the cube's buffers for their fractal layouts: each tile's rows rounded up to 16 (32 for
 * int8), its columns to 16 or C0 (a 1 x 72 bf16 tile of A takes 16 x 80 in L1's Nz, an int8 one
 * 32 x 96; backends/ascend/Cube.h). */
class PadFractal : public LoopScopedMutator {
public:
    explicit PadFractal(const CubeBuffers &cube) : cube(cube) {}

private:
    using IRMutator::visit;
    const CubeBuffers &cube;
    Stmt visit(const Allocate *op) override {
        if (!cube.operands.count(op->name) && !cube.accumulators.count(op->name))
            return IRMutator::visit(op);
        // The extents are the tile's columns, then its rows.
        int64_t columns = constant_upper_bound(op->extents[0], loops), rows = 1;
        for (size_t d = 1; d < op->extents.size(); d++)
            rows *= constant_upper_bound(op->extents[d], loops);
        if (columns <= 0 || rows <= 0)
            return IRMutator::visit(op); // memory planning says why
        Expr elements = Expr(int(round_k(columns, op->type) * round_rows(rows, op->type)));
        return Allocate::make(op->name, op->type, op->memory_type, {elements}, op->condition,
                              mutate(op->body), op->new_expr, op->free_function);
    }
};

class Cube : public LoopScopedMutator {
public:
    Cube(CompileContext &ctx, const std::set<std::string> &cube_operands)
        : ctx(ctx), cube_operands(cube_operands) {}
    std::map<std::string, std::pair<Halide::Type, int64_t>> l0_buffers; // name -> (type, elements)
    std::map<std::string, bool> in_l0b; // name -> an MMA's B operand (else A)

private:
    using IRMutator::visit;
    CompileContext &ctx;
    const std::set<std::string> &cube_operands;

    Stmt load_data(
        const std::string &operand, const Halide::Type &type, const Expr &offset,
        const std::vector<std::pair<Expr, Expr>> &dims /* extent, L1 stride; innermost first */,
        size_t k_dim) {
        ir::CopyOp c;
        c.dst = l0(operand);
        c.src = operand;
        c.dst_offset = 0;
        c.src_offset = offset;
        Expr dense = 1;
        int64_t elements = 1;
        for (size_t d = 0; d < dims.size(); d++) {
            const auto &[extent, stride] = dims[d];
            c.dims.push_back({extent, dense, stride});
            dense = dense * extent;
            // The cube's operands are fractal (16 x C0 blocks): each side rounds up to 16, K to
            // C0 where that is more.
            const int64_t side = std::max<int64_t>(1, constant_upper_bound(extent, loops));
            elements *= d == k_dim ? round_k(side, type) : round_rows(side, type);
        }
        c.barrier = ir::full_barrier(c.dst);
        c.slot = 0;
        // L0A/L0B operands start at 512-byte boundaries: round each version up.
        int64_t align = ctx.target.machine.integer("l0ab_align") / type.bytes();
        elements = (elements + align - 1) / align * align;
        auto &b = l0_buffers[c.dst];
        b = {type, std::max(b.second, elements)};
        in_l0b[c.dst] = k_dim == 1; // B's dims are {n, k}, A's {k, m}
        Stmt copy = Block::make(ir::make_copy(c), ir::make_wait({c.barrier, 0}));
        return ProducerConsumer::make(c.dst, true, copy);
    }

    Stmt visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (ir::as_copy(op, &c) && c.dims.size() == 2 && cube_operands.count(c.dst)) {
            // GM -> L1 is an Nd2Nz: its source row pitch (srcDValue) is a 16-bit field.
            const int64_t pitch = constant_upper_bound(c.dims[1].src_stride, loops);
            if (pitch > 65535) {
                throw Error("Func '" + c.dst.substr(0, c.dst.find('$')) +
                            "', directive async_copy(): on ascend the cube's "
                            "tiles come into L1 by Nd2Nz, whose source row pitch is 16 bits, but " +
                            c.src + "'s rows are " + std::to_string(pitch) +
                            " elements apart (at most 65535)");
            }
        }
        ir::MmaOp m;
        if (!ir::as_mma(op, &m))
            return op;
        Halide::Type a_type = Halide::BFloat(16), b_type = Halide::BFloat(16);
        for (const auto &[name, f] : ctx.functions) {
            if (name == m.a)
                a_type = f.output_types()[0];
            if (name == m.b)
                b_type = f.output_types()[0];
        }
        // The cube reads L1 in 16 x 16 fractals: a K slice of a resident operand starts on one.
        for (const auto &[operand, offset] :
             {std::make_pair(m.a, m.a_offset), std::make_pair(m.b, m.b_offset)}) {
            if (!can_prove(offset % 16 == 0)) {
                std::ostringstream at;
                at << simplify(offset);
                throw Error(
                    "Func '" + m.acc.substr(0, m.acc.find('$')) +
                    "', directive tile_mma(): on ascend the cube reads its operands from L1 "
                    "in 16 x 16 fractals, but it reads " +
                    operand + " from element " + at.str() +
                    " of its tile, which is not always a multiple of 16; make the reduction's "
                    "split "
                    "factor a multiple of 16");
            }
        }
        Stmt a = load_data(m.a, a_type, m.a_offset, {{m.k, m.a_stride_k}, {m.m, m.a_stride_m}}, 0);
        Stmt b = load_data(m.b, b_type, m.b_offset, {{m.n, m.b_stride_n}, {m.k, m.b_stride_k}}, 1);
        ir::MmaOp cube = m;
        cube.a = l0(m.a);
        cube.a_offset = 0;
        cube.a_stride_k = 1;
        cube.a_stride_m = m.k;
        cube.b = l0(m.b);
        cube.b_offset = 0;
        cube.b_stride_n = 1;
        cube.b_stride_k = m.n;
        Stmt mma = ProducerConsumer::make(l0(m.a), false, ir::make_mma(cube));
        return Block::make({a, b, mma});
    }
};

/** The variables an expression or statement reads, and those a statement binds. */
struct Names : IRVisitor {
    std::set<std::string> read, bound;
    using IRVisitor::visit;
    void visit(const Variable *op) override { read.insert(op->name); }
    void visit(const For *op) override {
        bound.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const LetStmt *op) override {
        bound.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Let *op) override {
        bound.insert(op->name);
        IRVisitor::visit(op);
    }
};

/** An L0 operand's LoadData repeated from an L1 tile that does not change meanwhile (attention's
 * query tile, staged once per query tile, loaded into L0A for each key block): in the region that
 * consumes the L1 tile, every LoadData of the operand that copies the same part of it and reads
 * nothing the region binds goes, and one LoadData before the region fills L0 for all of it (as a
 * hand-written kernel keeps Q in L0A). The region's consume markers of the operand go with them;
 * one around the region stands for them. */
class HoistInvariantLoads : public IRMutator {
public:
    explicit HoistInvariantLoads(const std::set<std::string> &l0s) : l0s(l0s) {}
    std::set<std::string> hoisted_anywhere;

private:
    using IRMutator::visit;
    const std::set<std::string> &l0s;

    /** The produces of `name` in `s`; whether one of them repeats (is in a loop of s). */
    static std::vector<const ProducerConsumer *> produces(const Stmt &s, const std::string &name,
                                                          bool *repeats) {
        struct Find : IRVisitor {
            const std::string &name;
            std::vector<const ProducerConsumer *> found;
            int loops = 0;
            bool in_loop = false;
            explicit Find(const std::string &n) : name(n) {}
            using IRVisitor::visit;
            void visit(const For *op) override {
                loops++;
                IRVisitor::visit(op);
                loops--;
            }
            void visit(const ProducerConsumer *op) override {
                if (op->is_producer && op->name == name) {
                    found.push_back(op);
                    in_loop = in_loop || loops > 0;
                }
                IRVisitor::visit(op);
            }
        } find(name);
        s.accept(&find);
        *repeats = find.in_loop || find.found.size() > 1;
        return find.found;
    }

    /** Whether `s` makes, writes or allocates `buffer`. */
    static bool makes(const Stmt &s, const std::string &buffer) {
        struct Find : IRVisitor {
            const std::string &buffer;
            bool found = false;
            explicit Find(const std::string &b) : buffer(b) {}
            using IRVisitor::visit;
            void visit(const ProducerConsumer *op) override {
                found = found || (op->is_producer && op->name == buffer);
                IRVisitor::visit(op);
            }
            void visit(const Allocate *op) override {
                found = found || op->name == buffer;
                IRVisitor::visit(op);
            }
            void visit(const Store *op) override {
                found = found || op->name == buffer;
                IRVisitor::visit(op);
            }
            void visit(const Evaluate *op) override {
                ir::CopyOp c;
                found = found || (ir::as_copy(op, &c) && c.dst == buffer);
                IRVisitor::visit(op);
            }
        } find(buffer);
        s.accept(&find);
        return find.found;
    }

    Stmt visit(const ProducerConsumer *op) override {
        Stmt body = mutate(op->body);
        if (op->is_producer || makes(body, op->name))
            return ProducerConsumer::make(op->name, op->is_producer, body);
        Names in_region;
        body.accept(&in_region);
        std::vector<Stmt> before;
        std::vector<std::string> hoisted;
        for (const std::string &name : l0s) {
            bool same = false;
            const std::vector<const ProducerConsumer *> found = produces(body, name, &same);
            for (const ProducerConsumer *p : found) {
                const Stmt first = flatten(p->body).front();
                ir::CopyOp copy;
                Names reads;
                p->accept(&reads);
                same = same && first.as<Evaluate>() && ir::as_copy(first.as<Evaluate>(), &copy) &&
                       copy.src == op->name && equal(p->body, found[0]->body) &&
                       std::none_of(reads.read.begin(), reads.read.end(),
                                    [&](const auto &v) { return in_region.bound.count(v) > 0; });
            }
            if (!same)
                continue;
            before.push_back(Stmt(found[0]));
            hoisted.push_back(name);
            hoisted_anywhere.insert(name);
            struct Take : IRMutator {
                const std::string &name;
                explicit Take(const std::string &n) : name(n) {}
                using IRMutator::visit;
                Stmt visit(const ProducerConsumer *pc) override {
                    if (pc->name != name)
                        return IRMutator::visit(pc);
                    return pc->is_producer ? Evaluate::make(0) : mutate(pc->body);
                }
            } take(name);
            body = remove_no_ops(take.mutate(body));
        }
        for (const std::string &name : hoisted)
            body = ProducerConsumer::make(name, false, body);
        before.push_back(body);
        return ProducerConsumer::make(op->name, false, block(before));
    }
};

} // namespace

Stmt stage_cube_operands(const Stmt &s, CompileContext &ctx) {
    CubeBuffers buffers;
    s.accept(&buffers);
    Cube cube(ctx, buffers.operands);
    Stmt result = cube.mutate(
        ColumnCopies(buffers).mutate(PadFractal(buffers).mutate(overwrite_first_mma(s, ctx))));
    // Only A operands: each MMA then still loads its B operand after the hoisted load, and that
    // load's ready flag orders both (AscendFlags gives the hoisted one none of its own).
    std::set<std::string> l0as;
    for (const auto &[name, buffer] : cube.l0_buffers) {
        if (!cube.in_l0b[name])
            l0as.insert(name);
    }
    HoistInvariantLoads hoist(l0as);
    result = hoist.mutate(result);
    // Two ping-pong slots per L0 operand where every operand fits twice in L0A and in L0B, else
    // one (the next operand's LoadData then waits for the MMA that read the last; the operands
    // an MMA reads are loaded together, one pair of flags per slot, so all take the same count).
    int64_t bytes[2] = {0, 0};
    for (const auto &[name, buffer] : cube.l0_buffers)
        bytes[cube.in_l0b[name]] += buffer.second * buffer.first.bytes();
    const int64_t capacity[2] = {ctx.target.machine.integer("l0a_bytes"),
                                 ctx.target.machine.integer("l0b_bytes")};
    const bool twice = 2 * bytes[0] <= capacity[0] && 2 * bytes[1] <= capacity[1];
    for (const auto &[name, buffer] : cube.l0_buffers) {
        result = Allocate::make(name, buffer.first, Halide::MemoryType::Auto,
                                {Expr(int(buffer.second))}, const_true(), result);
        ctx.funcs.push_back(name);
        ctx.directives[name].async_copy = true;
        ctx.directives[name].multi_buffer = twice ? 2 : 1;
    }
    for (const std::string &name : hoist.hoisted_anywhere) {
        // One version: the next region's load waits for this region's last MMA.
        ctx.directives[name].multi_buffer = 1;
        ctx.directives[name].loaded_once = true;
    }
    if (!cube.l0_buffers.empty()) {
        ctx.notes.push_back("ascend cube: operands staged L1 -> L0A/L0B in " +
                            (twice ? std::string("two ping-pong slots")
                                   : "one slot each (" + std::to_string(bytes[0]) +
                                         " bytes of L0A and " + std::to_string(bytes[1]) +
                                         " of L0B do not both fit twice)") +
                            "; accumulators in L0C");
    }
    return result;
}

} // namespace tandem::lower
