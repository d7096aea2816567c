#include "AscendMix.h"

#include "AscendRows.h"
#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

// Cross-core flag ids: a tile stored in workspace slot s (cube -> vector), and slot s read
// (vector -> cube). Ids 8 .. 15 are left to catlass-style barriers and SyncAll.
constexpr int kStored = 0, kRead = 2;

/** The tile_mma Funcs an epilogue reads (a Load of an accumulator: MMAs name theirs in calls). */
class EpilogueReads : public IRVisitor {
public:
    explicit EpilogueReads(const CompileContext &ctx) : ctx(ctx) {}
    std::set<std::string> accumulators, cube;    // cube: the accumulators and the MMAs' operands
    std::map<std::string, std::string> operands; // the MMAs' operands, each to its accumulator
    std::set<std::string> vector_writes;         // what vector ops write

private:
    using IRVisitor::visit;
    const CompileContext &ctx;
    void visit(const Load *op) override {
        if (ctx.of(op->name).tile_mma)
            accumulators.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (ir::as_mma(Stmt(op), &m)) {
            cube.insert({m.acc, m.a, m.b});
            operands[m.a] = operands[m.b] = m.acc;
        }
        IRVisitor::visit(op);
    }
    void visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(Stmt(op), &v, &body)) {
            for (const ir::Region &r : v.regions)
                if (r.write)
                    vector_writes.insert(r.buffer);
        }
        IRVisitor::visit(op);
    }
};

/** Whether a leaf statement is the cube's: an MMA, or a copy, wait or store into a cube buffer. */
bool is_cube_op(const Stmt &s, const std::set<std::string> &cube) {
    ir::MmaOp m;
    ir::CopyOp c;
    ir::WaitOp w;
    ir::VectorOp v;
    Stmt body;
    if (ir::as_mma(s, &m))
        return true;
    if (ir::as_copy(s, &c))
        return cube.count(c.dst) > 0;
    if (ir::as_wait(s, &w)) {
        for (const std::string &b : cube)
            if (w.barrier == ir::full_barrier(b) || w.barrier == ir::empty_barrier(b))
                return true;
        return false;
    }
    if (ir::as_vector_op(s, &v, &body)) {
        for (const ir::Region &r : v.regions)
            if (r.write && cube.count(r.buffer))
                return true; // the accumulator's zeroing (FirstMma drops it)
        return false;
    }
    if (const Store *st = s.as<Store>())
        return cube.count(st->name) > 0;
    return false;
}

/** Keeps one side's statements: leaves for which `keep` holds, and what encloses them. */
class Side : public IRMutator {
public:
    Side(const std::set<std::string> &cube, bool cube_side) : cube(cube), cube_side(cube_side) {}

protected:
    using IRMutator::visit;
    const std::set<std::string> &cube;
    const bool cube_side;

    bool keep(const Stmt &leaf) const { return is_cube_op(leaf, cube) == cube_side; }

    Stmt visit(const Evaluate *op) override {
        if (is_const(op->value))
            return op;
        return keep(op) ? Stmt(op) : Evaluate::make(0);
    }
    Stmt visit(const Store *op) override { return keep(op) ? Stmt(op) : Evaluate::make(0); }
    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(op, &v, &body))
            return keep(op) ? Stmt(op) : Evaluate::make(0);
        Stmt b = mutate(op->body);
        return is_no_op(b) ? b : LetStmt::make(op->name, op->value, b);
    }
    Stmt visit(const For *op) override {
        Stmt b = mutate(op->body);
        return is_no_op(b)
                   ? b
                   : For::make(op->name, op->min, op->extent, op->for_type, op->device_api, b);
    }
    Stmt visit(const IfThenElse *op) override {
        Stmt t = mutate(op->then_case),
             e = op->else_case.defined() ? mutate(op->else_case) : Stmt();
        if (e.defined() && is_no_op(e))
            e = Stmt();
        if (is_no_op(t) && !e.defined())
            return t;
        return IfThenElse::make(op->condition, t, e);
    }
    Stmt visit(const ProducerConsumer *op) override {
        Stmt b = mutate(op->body);
        return is_no_op(b) ? b : ProducerConsumer::make(op->name, op->is_producer, b);
    }
    Stmt visit(const Block *op) override { return block({mutate(op->first), mutate(op->rest)}); }
    /** An allocation the side no longer uses goes. */
    Stmt allocation(const Allocate *op, const Stmt &body) {
        if (is_no_op(body) || !ir::touches(body, op->name))
            return body;
        return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition,
                              body);
    }
};

/** What both sides share: the accumulators the epilogue reads (outermost allocation first), one
 * tile counter and one workspace whose slots hold every accumulator of a tile. */
struct Handoff {
    struct Acc {
        std::string name;
        int64_t offset = 0;   // elements before it in a slot
        int64_t elements = 0; // its part of a slot (its tile, rounded to 32 bytes)
        int64_t pitch = 0;    // > 0: its row pitch in the workspace and its .ub (the widest row
                              // on 32 bytes)
    };
    std::vector<Acc> accs;
    std::string counter, workspace;
    int64_t slot = 0; // elements of a workspace slot: every accumulator of one tile
    bool async = true;
    Expr tile() const { return Variable::make(Halide::Int(32), counter); }
    Expr parity() const { return tile() % 2; }
    /** The workspace slot of this tile: two per AIC. */
    Expr offset(const Expr &aic) const { return (aic * 2 + parity()) * int(slot); }
    /** Accumulator `name`'s place in the handoff, or -1. */
    int index(const std::string &name) const {
        for (size_t i = 0; i < accs.size(); i++)
            if (accs[i].name == name)
                return int(i);
        return -1;
    }
    bool first(int i) const { return i == 0; }
    bool last(int i) const { return i == int(accs.size()) - 1; }
};

/** The cube side: the MMAs, then each accumulator stored to the workspace by the Fixpipe; the
 * vector cores are told once the tile's last one is there. */
class CubeSide : public Side {
public:
    CubeSide(const std::set<std::string> &cube, const Handoff &h) : Side(cube, true), h(h) {}

private:
    const Handoff &h;
    std::map<std::string, ir::MmaOp> mma; // each accumulator's first MMA in its current tile

    Stmt visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (ir::as_mma(op, &m) && h.index(m.acc) >= 0 && !mma.count(m.acc))
            mma[m.acc] = m;
        return Side::visit(op);
    }
    Stmt visit(const Allocate *op) override {
        const int i = h.index(op->name);
        if (i >= 0)
            mma.erase(op->name); // a tile of its own (a partitioned tail: its own extents)
        Stmt body = mutate(op->body);
        if (i < 0)
            return allocation(op, body);
        Stmt a =
            Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition, body);
        return h.first(i) ? block({a, ir::make_advance(h.counter)}) : a;
    }
    Stmt visit(const ProducerConsumer *op) override {
        if (h.index(op->name) < 0 || op->is_producer)
            return Side::visit(op);
        // Halide nests the accumulators' consumers; inside the innermost every one is computed.
        if (++consumers < int(h.accs.size())) {
            Stmt s = Side::visit(op);
            consumers--;
            return s;
        }
        consumers--;
        handoffs++;
        // The slot is free again once both AIVs have read what the tile two before left there.
        std::vector<Stmt> store = {
            IfThenElse::make(h.tile() >= 2, ir::make_cross_core_wait(kRead + h.parity()))};
        for (const Handoff::Acc &acc : h.accs) {
            auto m = mma.find(acc.name);
            if (m == mma.end() || !is_const_zero(simplify(m->second.acc_offset))) {
                throw Error("Func '" + acc.name.substr(0, acc.name.find('$')) +
                            "', directive tile_mma(): on ascend an epilogue "
                            "reads the accumulator through a GM workspace, which takes one MMA "
                            "per tile at its first "
                            "element; this tile's MMAs write parts of it");
            }
            const ir::MmaOp &first = m->second;
            ir::CopyOp c;
            c.dst = h.workspace;
            c.src = acc.name;
            c.dst_offset = h.offset(ir::core_id()) + int(acc.offset);
            c.src_offset = 0;
            c.dims = {{first.n, 1, 1},
                      {first.m, acc.pitch > 0 ? Expr(int(acc.pitch)) : first.acc_stride_m,
                       first.acc_stride_m}};
            c.barrier = ir::empty_barrier(acc.name);
            c.slot = 0;
            store.push_back(ir::make_copy(c));
            if (!h.async)
                store.push_back(ir::make_wait({c.barrier, 0}));
        }
        store.push_back(ir::make_cross_core_set("FIX", kStored + h.parity()));
        return ProducerConsumer::make(op->name, false, block(store));
    }

public:
    int handoffs = 0; // innermost consumers reached: where the tile goes to the vector cores

private:
    int consumers = 0; // the accumulators' consumers open around the current statement
};

/** Renames a buffer everywhere: loads, stores, allocations, markers and intrinsics' arguments. */
class Rename : public IRMutator {
public:
    Rename(const std::string &from, const std::string &to) : from(from), to(to) {}

private:
    using IRMutator::visit;
    const std::string &from, &to;
    Expr visit(const StringImm *op) override {
        return op->value == from ? StringImm::make(to) : Expr(op);
    }
    Expr visit(const Load *op) override {
        Expr e = IRMutator::visit(op);
        if (op->name != from)
            return e;
        const Load *l = e.as<Load>();
        return Load::make(l->type, to, l->index, l->image, l->param, l->predicate, l->alignment);
    }
    Stmt visit(const ProducerConsumer *op) override {
        Stmt b = mutate(op->body);
        return ProducerConsumer::make(op->name == from ? to : op->name, op->is_producer, b);
    }
};

/** The vector side: per tile of its AIC, pass the stored-flag; on its turn load the tile's
 * accumulators and run the epilogue; answer either way. */
class VectorSide : public Side {
public:
    VectorSide(const std::set<std::string> &cube, const Handoff &h, const CompileContext &ctx)
        : Side(cube, false), h(h), ctx(ctx) {}

private:
    const Handoff &h;
    const CompileContext &ctx;

    static std::string ub(const std::string &acc) { return acc + ".ub"; }
    Expr aic() const { return ir::core_id() / 2; }
    Stmt read() const { return ir::make_cross_core_set("MTE2", kRead + h.parity()); }

    Stmt visit(const Allocate *op) override {
        const int i = h.index(op->name);
        if (i >= 0 && h.first(i))
            loaded = 0; // a tile (or a partitioned tail's tile) of its own
        Stmt body = mutate(op->body);
        if (i < 0)
            return allocation(op, body);
        const Handoff::Acc &acc = h.accs[i];
        // acc.ub's rows on 32-byte blocks, one pitch for every tile (AscendRows.h): the Fixpipe
        // wrote them so.
        Stmt epilogue = Rename(acc.name, ub(acc.name)).mutate(body);
        const int64_t folded =
            op->extents.size() == 1 ? folded_row_width(op->body, acc.name, ctx) : 0; // 0: one row
        if (acc.pitch > 0 && folded > 0)
            epilogue = refold(epilogue, ub(acc.name), folded, acc.pitch);
        else if (acc.pitch > 0 && op->extents.size() == 2)
            epilogue = repitch(epilogue, ub(acc.name), op->extents[0], Expr(int(acc.pitch)));
        Stmt mine = Allocate::make(ub(acc.name), op->type, Halide::MemoryType::Auto,
                                   {Expr(int(acc.elements))}, const_true(), epilogue);
        if (!h.first(i))
            return mine;
        return block({ir::make_cross_core_wait(kStored + h.parity()),
                      IfThenElse::make(h.parity() == ir::core_id() % 2, mine, read()),
                      ir::make_advance(h.counter)});
    }
    Stmt visit(const ProducerConsumer *op) override {
        const int i = h.index(op->name);
        if (i < 0 || !op->is_producer)
            return Side::visit(op);
        const Handoff::Acc &acc = h.accs[i];
        ir::CopyOp c;
        c.dst = ub(acc.name);
        c.src = h.workspace;
        c.dst_offset = 0;
        c.src_offset = h.offset(aic()) + int(acc.offset);
        c.dims = {{int(acc.elements), 1, 1}};
        c.barrier = ir::full_barrier(ub(acc.name));
        c.slot = 0;
        std::vector<Stmt> load = {ProducerConsumer::make(
            ub(acc.name), true, block({ir::make_copy(c), ir::make_wait({c.barrier, 0})}))};
        // The slot is read once every accumulator is: their producers may follow each other or
        // nest (Halide's compute_with fuses their K loops).
        if (++loaded == int(h.accs.size()))
            load.push_back(read());
        load.push_back(mutate(op->body));
        return block(load);
    }

    int loaded = 0; // accumulators of the current tile loaded from the workspace
};

/** tandem_core_id() -> tandem_core_id() / 2: on a vector core, the index of its AIC. */
class AicIndex : public IRMutator {
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        if (ir::is_core_id(op))
            return Expr(op) / 2;
        return IRMutator::visit(op);
    }
};

/** The accumulator's allocations (Halide's tiles): the most elements, the widest row, the most
 * rows (constants). */
/** Whether an accumulator Halide allocated with one extent, whose stores step 1 along one loop,
 * is one row: that loop runs along the Func's first dimension (its columns). Loop names are
 * Halide's: <func>.s<stage>.<dimension>[.<split>...]. */
bool one_row(const Allocate *op, const CompileContext &ctx) {
    const std::set<std::string> loops = unit_step_loops(op->body, op->name, ctx);
    const Halide::Internal::Function &acc = ctx.functions.at(op->name);
    const std::string columns = acc.args().empty() ? "" : acc.args()[0];
    bool row = !loops.empty();
    for (const std::string &l : loops) {
        const size_t stage = l.find(".s", op->name.size());
        const size_t dim = stage == std::string::npos ? stage : l.find('.', stage + 2);
        row = row && dim != std::string::npos && l.compare(dim + 1, columns.size(), columns) == 0 &&
              (l.size() == dim + 1 + columns.size() || l[dim + 1 + columns.size()] == '.');
    }
    return row;
}

class AccumulatorSize : public LoopScopedVisitor {
public:
    AccumulatorSize(const std::string &acc, const CompileContext &ctx) : acc(acc), ctx(ctx) {}
    int64_t width = 0, rows = 0;
    bool two_dimensional = true; // every allocation has rows (Halide's two extents, or folded ones)
    int allocations = 0;

private:
    using IRVisitor::visit;
    const std::string &acc;
    const CompileContext &ctx;
    void visit(const Allocate *op) override {
        if (op->name == acc) {
            allocations++;
            int64_t w = constant_upper_bound(op->extents[0], loops), r = 1;
            for (size_t d = 1; d < op->extents.size(); d++) {
                int64_t b = constant_upper_bound(op->extents[d], loops);
                r = (b < 0 || r < 0) ? -1 : r * std::max<int64_t>(b, 1);
            }
            int64_t folded =
                op->extents.size() == 1 && w > 0 ? folded_row_width(op->body, acc, ctx) : -1;
            if (folded == 0 && one_row(op, ctx))
                folded = w;
            if (folded > 0)
                r = (w + folded - 1) / folded, w = folded;
            // (One extent with no row step may be a row or a column: the MMA's shape decides,
            // which this does not see, so such an accumulator keeps Halide's layout.)
            two_dimensional = two_dimensional && (op->extents.size() == 2 || folded > 0);
            width = (w < 0 || width < 0) ? -1 : std::max(width, w);
            rows = (r < 0 || rows < 0) ? -1 : std::max(rows, r);
        }
        IRVisitor::visit(op);
    }
};

/** The accumulators' order of nesting, outermost first; throws where one is allocated outside
 * another's allocation in one place and inside it in another. */
class Nesting : public IRVisitor {
public:
    explicit Nesting(const std::set<std::string> &accs) : accs(accs) {}
    std::vector<std::string> order;

private:
    using IRVisitor::visit;
    const std::set<std::string> &accs;
    std::vector<std::string> open;
    void visit(const Allocate *op) override {
        if (!accs.count(op->name))
            return IRVisitor::visit(op);
        if (open.size() == order.size())
            order.push_back(op->name);
        if (order[open.size()] != op->name) {
            throw Error("Func '" + op->name.substr(0, op->name.find('$')) +
                        "', directive tile_mma(): on ascend the accumulators an epilogue reads "
                        "go to the vector cores together, one inside the other; this one is "
                        "computed outside " +
                        (open.empty() ? order[0] : open.back()) +
                        " (compute_at both at the output's tile loop)");
        }
        open.push_back(op->name);
        IRVisitor::visit(op);
        open.pop_back();
    }
};

} // namespace

Stmt split_mix_kernel(const Stmt &s, CompileContext &ctx) {
    EpilogueReads reads(ctx);
    s.accept(&reads);
    for (const auto &[operand, acc] : reads.operands) {
        if (reads.vector_writes.count(operand)) {
            const std::string name = acc.substr(0, acc.find('$'));
            throw Error("Func '" + name +
                        "', directive tile_mma(): not supported on ascend: its operand " +
                        operand.substr(0, operand.find('$')) +
                        " is computed by vector code (a matmul chain's second operand, made "
                        "from the first's accumulator), which would go from the vector cores "
                        "back to the cube cores through GM; Tandem's mix kernels hand "
                        "accumulators to the vector cores only. Load the operand from a tensor "
                        "(the chain as two kernels)");
        }
    }
    if (reads.accumulators.empty())
        return s;
    Nesting nesting(reads.accumulators);
    s.accept(&nesting);
    Handoff h;
    h.counter = nesting.order.at(0) + ".tile";
    h.workspace = nesting.order.at(0) + ".workspace";
    h.async = ctx.of(ctx.output).async_copy;
    for (const std::string &acc : nesting.order) {
        AccumulatorSize size(acc, ctx);
        s.accept(&size);
        if (size.allocations == 0 || size.width <= 0 || size.rows <= 0) {
            throw Error("Func '" + acc.substr(0, acc.find('$')) +
                        "', directive tile_mma(): on ascend an epilogue reads "
                        "the accumulator through a GM workspace sized by its tile, but " +
                        acc +
                        " has no allocation of constant size (compute_at the output's tile loop)");
        }
        // Rows on 32-byte blocks (f32: 8 elements), so that the vector side's instructions and
        // copies see the tile as its other UB tiles (AscendRows.h); one-dimensional tiles keep
        // theirs. Rows as wide as the output's staging rows (AscendRows.h), so that a cast to a
        // narrower output type keeps the elements where they are: 16 f32 elements for a bfloat16
        // output.
        const int64_t per_block =
            32 / std::min(4, ctx.functions.at(ctx.output).output_types()[0].bytes());
        Handoff::Acc a;
        a.name = acc;
        a.offset = h.slot;
        // (A one-column accumulator stays contiguous: per-row values to the vector instructions.)
        a.pitch = size.two_dimensional && size.width > 1
                      ? (size.width + per_block - 1) / per_block * per_block
                      : 0;
        a.elements =
            ((a.pitch > 0 ? a.pitch : size.width) * size.rows + 7) / 8 * 8; // whole 32-byte blocks
        h.slot += a.elements;
        h.accs.push_back(a);
    }
    std::set<std::string> cube = reads.cube;
    cube.insert(reads.accumulators.begin(), reads.accumulators.end());
    CubeSide cube_mutator(cube, h);
    Stmt cube_side = cube_mutator.mutate(s);
    if (cube_mutator.handoffs == 0) {
        throw Error("Func '" + ctx.output +
                    "', directive tile_mma(): on ascend the accumulators an epilogue reads go to "
                    "the vector cores together, but no statement consumes all of " +
                    std::to_string(h.accs.size()) + " (compute_at each at the output's tile loop)");
    }
    // The last two slots' reads, so that every counter ends at zero.
    cube_side = block(
        {cube_side, IfThenElse::make(h.tile() >= 2, ir::make_cross_core_wait(kRead + h.parity())),
         IfThenElse::make(h.tile() >= 1, ir::make_cross_core_wait(kRead + (h.tile() + 1) % 2))});
    Stmt vector_side = VectorSide(cube, h, ctx).mutate(AicIndex().mutate(s));
    ctx.mix = true;
    ctx.workspaces.push_back(
        {h.workspace, Halide::Float(32), {int(int64_t(ctx.grid) * 2 * h.slot)}, false, {}, {}});
    std::string names;
    for (const Handoff::Acc &a : h.accs)
        names += (names.empty() ? "" : " and ") + a.name;
    ctx.notes.push_back(
        "ascend mix kernel: " + names + (h.accs.size() > 1 ? " go" : " goes") +
        " from the cube cores to the vector cores through " + h.workspace +
        " (two tiles per AIC in GM); the two AIVs of an AIC take its tiles in turn");
    return ir::make_mix(LetStmt::make(h.counter, 0, cube_side),
                        LetStmt::make(h.counter, 0, vector_side));
}

} // namespace tandem::lower
