#include "AscendMix.h"

#include "AscendRowSplit.h"
#include "AscendRows.h"
#include "lower/MultiBuffer.h"
#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

// Cross-core flag ids, each + the parity of its slot: a group's tile stored in its workspace slot
// (cube -> vector) and that slot read (vector -> cube), the first group's at 0 / 2, the next at
// 8 / 10 and 12 / 14; an operand the vector cores made handed back (vector -> cube) and its slot
// taken (cube -> vector) at 4 / 6. AscendC keeps 16 ids.
constexpr int kHanded = 4, kTaken = 6;
constexpr int kGroupFlags[][2] = {{0, 2}, {8, 10}, {12, 14}};

/** The tile_mma Funcs an epilogue reads (a Load of an accumulator: MMAs name theirs in calls). */
class EpilogueReads : public IRVisitor {
public:
    explicit EpilogueReads(const CompileContext &ctx) : ctx(ctx) {}
    std::set<std::string> accumulators, cube;    // cube: the accumulators and the MMAs' operands
    std::map<std::string, std::string> operands; // the MMAs' operands, each to its accumulator
    std::set<std::string> vector_writes;         // what vector ops write
    std::vector<std::set<std::string>> read_together; // the accumulators one vector op reads

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
            std::set<std::string> read;
            for (const ir::Region &r : v.regions) {
                if (r.write)
                    vector_writes.insert(r.buffer);
                else if (ctx.of(r.buffer).tile_mma)
                    read.insert(r.buffer);
            }
            if (read.size() > 1)
                read_together.push_back(read);
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
    if (ir::as_copy(s, &c)) // (from a cube buffer: an accumulator no epilogue reads, by Fixpipe)
        return cube.count(c.dst) > 0 || cube.count(c.src) > 0;
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

/** A buffer's copy in UB on the vector side (an accumulator's, or an operand's the AIVs make). */
std::string ub(const std::string &buffer) {
    return buffer + ".ub";
}

/** What both sides share: the groups of accumulators the vector code reads (those one statement
 * reads together go together), each with its tile counter, its workspace (two slots per AIC, each
 * holding every accumulator of the group's tile) and its flags; the operands handed back; and
 * the allocation whose tiles the two AIVs of a cube core take in turn. */
struct Handoff {
    struct Acc {
        std::string name;
        int64_t offset = 0;   // elements before it in a slot
        int64_t elements = 0; // its part of a slot (its tile, rounded to 32 bytes)
        int64_t pitch = 0;    // > 0: its row pitch in the workspace and its .ub (the widest row
                              // on 32 bytes)
    };
    /** Accumulators handed to the vector cores in one statement per tile (outermost allocation
     * first): attention's scores; then, later in the same key block, its P V sums. */
    struct Group {
        std::vector<Acc> accs;
        std::string counter, workspace;
        int stored = 0, read = 0; // flag ids, + the tile's parity
        int64_t slot = 0;         // elements of a workspace slot: every accumulator of one tile
        Expr tile() const { return Variable::make(Halide::Int(32), counter); }
        Expr parity() const { return tile() % 2; }
        /** The workspace slot of this tile: two per AIC. */
        Expr offset(const Expr &aic) const { return (aic * 2 + parity()) * int(slot); }
        /** Where a tile is stored, once the slot two tiles before was read. */
        Stmt wait_read() const {
            return IfThenElse::make(tile() >= 2, ir::make_cross_core_wait(read + parity()));
        }
        /** The last two slots' reads, so that every counter ends at zero. */
        Stmt wait_last_reads() const {
            return block(
                {wait_read(),
                 IfThenElse::make(tile() >= 1, ir::make_cross_core_wait(read + (tile() + 1) % 2))});
        }
    };
    std::vector<Group> groups;
    /** An MMA operand the vector cores compute (a chain's second operand, made from the
     * accumulators of the tile that encloses it), handed back to the cube through a workspace of
     * its own type: two slots per AIC, rows `pitch` apart. */
    struct Operand {
        std::string name, workspace;
        std::string counter; // its tiles handed back: both sides count them (slot = parity)
        Halide::Type type;
        int64_t width = 0, rows = 0; // the largest tile Halide allocated with rows and columns
        int64_t line = 0;            // the longest allocated with one extent (a row or column)
        int64_t pitch = 0; // the rows in .ub on 32-byte blocks, as the accumulators' there (0:
                           // Halide's, as theirs)
        int64_t slot() const { return (std::max(width * rows, line) + 15) / 16 * 16; }
        int64_t ub_elements() const { // (a column: `line` rows at the pitch)
            return std::max({std::max(pitch, width) * rows, (line + 15) / 16 * 16, pitch * line});
        }
        Expr tile() const { return Variable::make(Halide::Int(32), counter); }
        Expr parity() const { return tile() % 2; }
    };
    std::vector<Operand> operands;
    Halide::Type type = Halide::Float(32); // the accumulators' (int32 for int8 matmuls)
    bool async = true;
    /** The allocation whose tiles the AIVs take in turn: the first group's first accumulator, or
     * a state the vector code carries from one of its tiles to the next (attention's running
     * max, sum and output), which one AIV keeps in its UB. Its own counter, on the vector side. */
    std::string turn, turn_counter;
    Expr turns() const { return Variable::make(Halide::Int(32), turn_counter); }
    const Operand *operand(const std::string &name) const {
        for (const Operand &o : operands)
            if (o.name == name)
                return &o;
        return nullptr;
    }
    /** Accumulator `name`'s group and place in it, or {-1, -1}. */
    std::pair<int, int> find(const std::string &name) const {
        for (size_t g = 0; g < groups.size(); g++)
            for (size_t i = 0; i < groups[g].accs.size(); i++)
                if (groups[g].accs[i].name == name)
                    return {int(g), int(i)};
        return {-1, -1};
    }
};

/** The rows of an operand tile (Halide's extents: its columns, then its rows; or one extent, a
 * line) between its workspace slot (rows `workspace_pitch` apart) and its tile: in L1 Halide's
 * layout (dense rows), in UB rows `ub_pitch` apart (defined: the copy from UB into the slot). */
std::vector<ir::CopyDim> handback_dims(const std::vector<Expr> &extents,
                                       const Expr &workspace_pitch, const Expr &ub_pitch) {
    const Expr &columns = extents[0];
    if (extents.size() == 1) // a line, dense everywhere
        return {{columns, 1, 1}};
    const Expr &rows = extents[1];
    const Expr tile_pitch = ub_pitch.defined() ? ub_pitch : columns;
    if (ub_pitch.defined()) // UB -> GM: dst the slot, src the tile
        return {{columns, 1, 1}, {simplify(rows), workspace_pitch, tile_pitch}};
    return {{columns, 1, 1}, {simplify(rows), tile_pitch, workspace_pitch}};
}

std::vector<Expr> operand_sides(const Allocate *op, const CompileContext &ctx);
bool steps_along(const Allocate *op, const CompileContext &ctx, size_t d);

/** The cube side: the MMAs, then each group's accumulators stored to its workspace by the
 * Fixpipe; the vector cores are told once the group's last one is there. */
class CubeSide : public Side {
public:
    CubeSide(const std::set<std::string> &cube, const Handoff &h, const CompileContext &ctx)
        : Side(cube, true), h(h), ctx(ctx), handoffs(h.groups.size()), consumers(h.groups.size()),
          handed(h.groups.size()) {}

private:
    const Handoff &h;
    const CompileContext &ctx;
    std::map<std::string, ir::MmaOp> mma; // each accumulator's first MMA in its current tile

    Stmt visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (ir::as_mma(op, &m) && h.find(m.acc).first >= 0 && !mma.count(m.acc))
            mma[m.acc] = m;
        return Side::visit(op);
    }
    Stmt visit(const Allocate *op) override {
        const auto [g, i] = h.find(op->name);
        if (g >= 0)
            mma.erase(op->name); // a tile of its own (a partitioned tail: its own extents)
        if (h.operand(op->name))
            extents[op->name] = operand_sides(op, ctx);
        const bool tile = g >= 0 && i == 0;
        const bool handed_before = tile && handed[g];
        if (tile)
            handed[g] = false; // a new tile: not handed off yet
        Stmt body = mutate(op->body);
        if (tile)
            handed[g] = handed_before;
        if (g < 0)
            return allocation(op, body);
        Stmt a =
            Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition, body);
        return tile ? block({a, ir::make_advance(h.groups[g].counter)}) : a;
    }
    Stmt visit(const ProducerConsumer *op) override {
        if (const Handoff::Operand *o = h.operand(op->name); o && !op->is_producer)
            return take(*o, mutate(op->body));
        const int g = h.find(op->name).first;
        if (g < 0 || op->is_producer)
            return Side::visit(op);
        const Handoff::Group &group = h.groups[g];
        // Halide nests the accumulators' consumers; inside the innermost every one is computed.
        if (++consumers[g] < int(group.accs.size())) {
            Stmt s = Side::visit(op);
            consumers[g]--;
            return s;
        }
        consumers[g]--;
        // The tile goes to the vector cores once, at its first consumer (attention's row max
        // and exp both read the scores: one handoff, which the vector side reads once).
        if (handed[g])
            return Side::visit(op);
        handed[g] = true;
        handoffs[g]++;
        // The slot is free again once both AIVs have read what the tile two before left there.
        std::vector<Stmt> store = {group.wait_read()};
        for (const Handoff::Acc &acc : group.accs) {
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
            c.dst = group.workspace;
            c.src = acc.name;
            c.dst_offset = group.offset(ir::core_id()) + int(acc.offset);
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
        store.push_back(ir::make_cross_core_set("FIX", group.stored + group.parity()));
        return ProducerConsumer::make(op->name, false, block(store));
    }

public:
    std::vector<int> handoffs; // per group, its innermost consumers reached: where its tiles go

private:
    std::vector<int> consumers; // per group, its accumulators' consumers open here
    std::vector<bool> handed;   // per group, its current tile went to the vector cores
    std::map<std::string, std::vector<Expr>> extents; // each operand's current tile

    /** An operand the vector cores made, from its workspace slot into L1 (Nd2Nz), once both AIVs
     * said it is there, for its consumer; the slot is free again once the copy is done. */
    Stmt take(const Handoff::Operand &o, const Stmt &consumer) const {
        const Expr q = o.parity();
        ir::CopyOp c;
        c.dst = o.name;
        c.src = o.workspace;
        c.dst_offset = 0;
        c.src_offset = (ir::core_id() * 2 + q) * int(o.slot());
        c.dims = handback_dims(extents.at(o.name), Expr(int(o.width)), /*ub_pitch=*/Expr());
        c.barrier = ir::full_barrier(o.name);
        c.slot = 0;
        // (A copy's produce node and its consumer, as the flags pass reads a ring: it joins
        // MTE2 and LoadData.)
        return block({ir::make_cross_core_wait(kHanded + q),
                      ProducerConsumer::make_produce(
                          o.name, block({ir::make_copy(c), ir::make_wait({c.barrier, 0})})),
                      ProducerConsumer::make_consume(
                          o.name, block({ir::make_cross_core_set("MTE2", kTaken + q), consumer})),
                      ir::make_advance(o.counter)});
    }
};

/** The leaves of a side in program order: its Evaluate statements (copies, MMAs, waits, flags,
 * advances); a vector op or a store between them holds none. */
class Leaves : public IRVisitor {
public:
    std::vector<Stmt> leaves;

private:
    using IRVisitor::visit;
    void visit(const Evaluate *op) override { leaves.push_back(op); }
};

int count_leaves(const Stmt &s) {
    Leaves l;
    s.accept(&l);
    return int(l.leaves.size());
}

/** The buffers a statement reads and writes: loads and stores, copies, MMAs, vector op regions. */
class Accesses : public IRVisitor {
public:
    std::set<std::string> reads, writes;
    std::set<std::string> copied; // a copy's source or destination

private:
    using IRVisitor::visit;
    void visit(const Load *op) override {
        reads.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        writes.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        ir::MmaOp m;
        if (ir::as_copy(op, &c)) {
            writes.insert(c.dst);
            reads.insert(c.src);
            copied.insert({c.dst, c.src});
        } else if (ir::as_mma(op, &m)) {
            writes.insert(m.acc);
            reads.insert({m.acc, m.a, m.b});
        }
    }
    void visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(Stmt(op), &v, &body))
            for (const ir::Region &r : v.regions)
                (r.write ? writes : reads).insert(r.buffer);
        IRVisitor::visit(op);
    }
};

/** Whether an Expr reads the core's index (tandem_core_id()). */
bool uses_core_id(const Expr &e) {
    class Finds : public IRVisitor {
    public:
        bool found = false;

    private:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            found = found || ir::is_core_id(op);
            IRVisitor::visit(op);
        }
    } finds;
    e.accept(&finds);
    return finds.found;
}

/** A key loop skewed across a round trip between the cube and the vector cores: the part of an
 * iteration before a given leaf (A) runs one iteration ahead of the rest (B), so that the side
 * does iteration c + 1's A while the other side answers iteration c:
 *
 *   for c: A(c); B(c)     ->    A(first); for c: { if (c + 1 < end) A(c + 1); B(c) }
 *
 * The cube computes block c + 1's scores while the vector cores make block c's P (the split
 * after the scores' handoff); the vector cores make block c + 1's P while the cube computes
 * block c's P V (the split before the wait for the P V sums). A buffer allocated in the iteration
 * that both parts use (the block's max and exponentials, written by A and read by B) gets two
 * versions, by the parity of c, allocated around the loop. The skew is refused (the loop stays)
 * where the split point lies in an inner loop or a condition, where B writes what A reads, or A
 * writes what B uses outside the iteration's own buffers. A counter that only A uses advances
 * in A. */
class Skew : public IRMutator {
public:
    /** `split_at`: the ordinal of the leaf B starts with, among a loop body's leaves (-1: none). */
    explicit Skew(const std::function<int(const std::vector<Stmt> &)> &split_at)
        : split_at(split_at) {}
    int skewed = 0;

private:
    using IRMutator::visit;
    const std::function<int(const std::vector<Stmt> &)> &split_at;
    std::vector<const Allocate *> shared; // allocations both parts use
    bool crossed = false;                 // the split point lies in a loop or a condition

    /** `s` as A, its first `k` leaves (and what lies between them), then B. */
    std::pair<Stmt, Stmt> split(const Stmt &s, int k) {
        const int n = count_leaves(s);
        if (k >= n && !s.as<Block>())
            return {s, Evaluate::make(0)};
        if (const Block *b = s.as<Block>()) {
            const int first = count_leaves(b->first);
            if (k < first) {
                auto [a, rest] = split(b->first, k);
                return {a, block({rest, b->rest})};
            }
            auto [a, rest] = split(b->rest, k - first);
            return {block({b->first, a}), rest};
        }
        if (k == 0 && (s.as<For>() || s.as<IfThenElse>() || s.as<Evaluate>()))
            return {Evaluate::make(0), s};
        if (const Allocate *op = s.as<Allocate>()) {
            auto [a, rest] = split(op->body, k);
            const bool in_a = ir::touches(a, op->name), in_b = ir::touches(rest, op->name);
            auto wrap = [&](const Stmt &body) {
                return Allocate::make(op->name, op->type, op->memory_type, op->extents,
                                      op->condition, body);
            };
            if (in_a && in_b)
                shared.push_back(op);
            else if (in_b)
                return {a, wrap(rest)};
            else if (in_a)
                return {wrap(a), rest};
            return {a, rest};
        }
        if (const LetStmt *op = s.as<LetStmt>()) {
            auto [a, rest] = split(op->body, k);
            auto wrap = [&](const Stmt &body) {
                return is_no_op(body) ? body : LetStmt::make(op->name, op->value, body);
            };
            return {wrap(a), wrap(rest)};
        }
        if (const ProducerConsumer *op = s.as<ProducerConsumer>()) {
            auto [a, rest] = split(op->body, k);
            auto wrap = [&](const Stmt &body) {
                return is_no_op(body) ? body
                                      : ProducerConsumer::make(op->name, op->is_producer, body);
            };
            return {wrap(a), wrap(rest)};
        }
        crossed = true; // a loop or a condition around the split point
        return {s, Evaluate::make(0)};
    }

    /** The counters whose advances in B only A reads: they count A's work. */
    static std::pair<Stmt, Stmt> move_advances(Stmt a, Stmt b) {
        Leaves in_b;
        b.accept(&in_b);
        for (const Stmt &leaf : in_b.leaves) {
            std::string counter;
            if (!ir::as_advance(leaf, &counter) || !stmt_uses_var(a, counter))
                continue;
            class Drop : public IRMutator {
            public:
                explicit Drop(const std::string &c) : c(c) {}
                bool used = false;

            private:
                using IRMutator::visit;
                const std::string &c;
                Stmt visit(const Evaluate *op) override {
                    std::string x;
                    return ir::as_advance(op, &x) && x == c ? Evaluate::make(0) : Stmt(op);
                }
            } drop(counter);
            Stmt rest = drop.mutate(b);
            if (stmt_uses_var(rest, counter))
                continue; // B reads it too: it stays where it is
            a = block({a, leaf});
            b = rest;
        }
        return {a, b};
    }

    Stmt visit(const For *op) override {
        const int inner = skewed;
        Stmt body = mutate(op->body);
        Leaves leaves;
        body.accept(&leaves);
        const int k = split_at(leaves.leaves);
        const auto keep = [&] {
            return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
        };
        // (a loop around a skewed one keeps its order; so does the loop over a core's tiles:
        // the round trips are those of the blocks of one tile. A key loop whose extent is its
        // tile's, a causal one's, is skewed: both sides run the same count.)
        if (k <= 0 || k >= int(leaves.leaves.size()) || skewed > inner || is_core_loop(op->name) ||
            uses_core_id(op->min))
            return keep();
        shared.clear();
        crossed = false;
        auto [a, b] = split(body, k);
        if (crossed)
            return keep();
        std::tie(a, b) = move_advances(a, b);
        // A(c + 1) runs before B(c): B must not write what A reads, nor A write what B uses,
        // but in the buffers that get a version per iteration.
        Accesses in_a, in_b;
        a.accept(&in_a);
        b.accept(&in_b);
        std::set<std::string> versioned;
        for (const Allocate *s : shared)
            versioned.insert(s->name);
        for (const std::string &w : in_b.writes)
            if (in_a.reads.count(w) && !versioned.count(w))
                return keep();
        for (const std::string &w : in_a.writes)
            if ((in_b.reads.count(w) || in_b.writes.count(w)) && !versioned.count(w))
                return keep();
        // Two versions of each shared buffer, by the parity of c.
        const Expr c = Variable::make(Halide::Int(32), op->name);
        std::vector<std::pair<const Allocate *, int64_t>> versions;
        for (const Allocate *s : shared) {
            Expr elements = 1;
            for (const Expr &e : s->extents)
                elements = elements * e;
            const int64_t *n = as_const_int(simplify(elements));
            // (a copy's buffer would need its barriers versioned too)
            if (!n || in_a.copied.count(s->name) || in_b.copied.count(s->name))
                return keep();
            const int64_t pitch = (*n + 15) / 16 * 16; // (32-byte blocks of any element type)
            versions.push_back({s, pitch});
            a = rebase_buffer(a, s->name, (c % 2) * int(pitch), 0);
            b = rebase_buffer(b, s->name, (c % 2) * int(pitch), 0);
        }
        skewed++;
        const Expr end = op->min + op->extent;
        Stmt next = IfThenElse::make(c + 1 < end, substitute(op->name, c + 1, a));
        Stmt result = block({IfThenElse::make(op->extent > 0, substitute(op->name, op->min, a)),
                             For::make(op->name, op->min, op->extent, op->for_type, op->device_api,
                                       block({next, b}))});
        for (const auto &[s, pitch] : versions)
            result = Allocate::make(s->name, s->type, s->memory_type, {Expr(int(2 * pitch))},
                                    s->condition, result);
        return result;
    }
};

/** A cross-core flag's constant part (its id before the slot's parity), or -1. */
int flag_base(const Expr &flag) {
    if (const IntImm *i = flag.as<IntImm>())
        return int(i->value);
    const Add *add = flag.as<Add>();
    const IntImm *i = add ? add->a.as<IntImm>() : nullptr;
    return i ? int(i->value) : -1;
}

/** The cube side's skew (Skew): B starts after the first handoff of a group's tile (its
 * stored-flag, set on FIX), where an operand is taken later in the iteration (a wait for it). */
int after_handoff(const std::vector<Stmt> &leaves) {
    int split = -1;
    for (size_t i = 0; i < leaves.size(); i++) {
        std::string pipe;
        Expr flag;
        if (split < 0 && ir::as_cross_core_set(leaves[i], &pipe, &flag) && pipe == "FIX")
            split = int(i) + 1;
        else if (split >= 0 && ir::as_cross_core_wait(leaves[i], &flag) &&
                 flag_base(flag) == kHanded)
            return split;
    }
    return -1;
}

/** The vector side's skew (Skew): B starts at the first wait for a group's tile after an operand
 * was handed back (attention: the P V sums, after P). */
int before_answer(const std::vector<Stmt> &leaves) {
    bool handed = false;
    for (size_t i = 0; i < leaves.size(); i++) {
        std::string pipe;
        Expr flag;
        if (ir::as_cross_core_set(leaves[i], &pipe, &flag) && flag_base(flag) == kHanded) {
            handed = true;
        } else if (handed && ir::as_cross_core_wait(leaves[i], &flag)) {
            const int base = flag_base(flag);
            for (const auto &ids : kGroupFlags)
                if (base == ids[0])
                    return int(i);
        }
    }
    return -1;
}

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
    Stmt visit(const Store *op) override {
        Stmt s = IRMutator::visit(op);
        if (op->name != from)
            return s;
        const Store *st = s.as<Store>();
        return Store::make(to, st->value, st->index, st->param, st->predicate, st->alignment);
    }
    Stmt visit(const ProducerConsumer *op) override {
        Stmt b = mutate(op->body);
        return ProducerConsumer::make(op->name == from ? to : op->name, op->is_producer, b);
    }
};

/** What the AIV whose turn it is not does: every cross-core wait and set of the other's code (both
 * AIVs pass each wait and answer each flag, mode 2), the counters' advances and the loops and
 * conditions around them; no copy, vector op or store. */
class Handshakes : public Side {
public:
    explicit Handshakes(const std::set<std::string> &cube) : Side(cube, false) {}

private:
    Stmt visit(const Evaluate *op) override {
        std::string name;
        Expr flag;
        if (ir::as_cross_core_wait(op, &flag) || ir::as_cross_core_set(op, &name, &flag) ||
            ir::as_advance(op, &name))
            return op;
        return Evaluate::make(0);
    }
    Stmt visit(const Store *) override { return Evaluate::make(0); }
    Stmt visit(const Allocate *op) override { return mutate(op->body); }
    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(op, &v, &body))
            return Evaluate::make(0);
        return Side::visit(op);
    }
};

/** The vector side: per group tile of its AIC, wait until it is stored, load its accumulators
 * and say the slot was read; the AIV whose turn the enclosing tile is runs the epilogue, the
 * other only passes the same waits and answers the same flags (Handshakes). */
class VectorSide : public Side {
public:
    VectorSide(const std::set<std::string> &cube, const Handoff &h, const CompileContext &ctx,
               bool split_rows)
        : Side(cube, false), h(h), ctx(ctx), split_rows(split_rows), loaded(h.groups.size()) {}
    int split = 0;       // turn tiles whose rows the AIVs share (AscendRowSplit.h)
    std::string unsplit; // why a turn tile's rows could not be shared

private:
    const Handoff &h;
    const CompileContext &ctx;
    const bool split_rows;

    Expr aic() const { return ir::core_id() / 2; }

    Stmt visit(const Allocate *op) override {
        const bool turn = op->name == h.turn;
        in_turn += turn;
        Stmt s = allocate(op);
        in_turn -= turn;
        if (!turn)
            return s;
        if (split_rows) {
            std::string why;
            Stmt rows = split_rows_between_aivs(s, ir::core_id() % 2, &why);
            if (rows.defined()) {
                split++;
                return rows;
            }
            unsplit = why;
        }
        return block(
            {IfThenElse::make(h.turns() % 2 == ir::core_id() % 2, s, Handshakes(cube).mutate(s)),
             ir::make_advance(h.turn_counter)});
    }
    Stmt allocate(const Allocate *op) {
        if (const Handoff::Operand *o = h.operand(op->name))
            return operand(op, *o);
        const auto [g, i] = h.find(op->name);
        if (g < 0)
            return allocation(op, mutate(op->body));
        if (in_turn == 0) {
            throw Error("Func '" + user_text(op->name) +
                        "', directive tile_mma(): not supported on ascend: the vector code "
                        "carries " +
                        user_text(h.turn) +
                        " from one tile of it to the next, but its tiles lie outside that "
                        "state's allocation, so no one vector core keeps it (compute_at " +
                        user_text(h.turn) + " outside the loop over the tiles of " +
                        user_text(op->name) + ")");
        }
        const bool tile = i == 0;
        if (tile)
            loaded[g] = 0; // a tile (or a partitioned tail's tile) of its own
        Stmt body = mutate(op->body);
        const Handoff::Acc &acc = h.groups[g].accs[i];
        // acc.ub's rows on 32-byte blocks, one pitch for every tile (AscendRows.h): the Fixpipe
        // wrote them so.
        Stmt epilogue = Rename(acc.name, ub(acc.name)).mutate(body);
        // (One row stays as it is; a column's rows take the pitch as any tile's.)
        const int64_t folded =
            op->extents.size() == 1 ? folded_row_width(op->body, acc.name, ctx) : 0;
        const bool column = op->extents.size() == 1 && folded == 0 && !steps_along(op, ctx, 0) &&
                            steps_along(op, ctx, 1);
        if (acc.pitch > 0 && (folded > 0 || column))
            epilogue = refold(epilogue, ub(acc.name), column ? 1 : folded, acc.pitch);
        else if (acc.pitch > 0 && operand_sides(op, ctx).size() == 2) // (unit batch sides too)
            epilogue = repitch(epilogue, ub(acc.name), op->extents[0], Expr(int(acc.pitch)));
        Stmt mine = Allocate::make(ub(acc.name), op->type, Halide::MemoryType::Auto,
                                   {Expr(int(acc.elements))}, const_true(), epilogue);
        return tile ? block({mine, ir::make_advance(h.groups[g].counter)}) : mine;
    }
    /** An operand the vector cores make: computed in `.ub` (rows on 32-byte blocks, as the
     * accumulators' there), then handed back where the cube consumes it. */
    Stmt operand(const Allocate *op, const Handoff::Operand &o) {
        const std::vector<Expr> sides = operand_sides(op, ctx);
        extents[o.name] = sides;
        // A column (Halide's one extent, stored along the second dimension) takes the pitch as
        // rows of one element, as the accumulator it is made from (accumulator_width); known
        // before the body, whose handback copies it.
        const bool column =
            o.pitch > 0 && sides.size() == 1 && !steps_along(op, ctx, 0) && steps_along(op, ctx, 1);
        if (column)
            columns.insert(o.name);
        else
            columns.erase(o.name);
        Stmt body = Rename(o.name, ub(o.name)).mutate(mutate(op->body));
        if (o.pitch > 0 && op->extents.size() == 2)
            body = repitch(body, ub(o.name), op->extents[0], Expr(int(o.pitch)));
        else if (o.pitch > 0 && sides.size() == 2) // Halide's one extent: rows folded into it
            body = refold(body, ub(o.name), *as_const_int(sides[0]), o.pitch);
        else if (column)
            body = refold(body, ub(o.name), 1, o.pitch);
        return Allocate::make(ub(o.name), op->type, Halide::MemoryType::Auto,
                              {Expr(int(o.ub_elements()))}, const_true(), body);
    }
    /** The operand of the tile just handed, from UB into this AIC's slot by the AIV whose turn it
     * was; both AIVs say so, once the slot's previous operand was taken. */
    Stmt hand_back(const Handoff::Operand &o) {
        const Expr q = o.parity();
        ir::CopyOp c;
        c.dst = o.workspace;
        c.src = ub(o.name);
        c.dst_offset = (aic() * 2 + q) * int(o.slot());
        c.src_offset = 0;
        const std::vector<Expr> &sides = extents.at(o.name);
        if (columns.count(o.name)) // rows of one element in UB, dense in the workspace
            c.dims = {{1, 1, 1}, {sides[0], 1, int(o.pitch)}};
        else
            c.dims = handback_dims(sides, Expr(int(o.width)),
                                   o.pitch > 0 ? Expr(int(o.pitch)) : sides[0]);
        c.barrier = ir::empty_barrier(c.src);
        c.slot = 0;
        // An asynchronous store's version is waited for before it is written again, as the
        // accumulators' (MultiBuffer); the flag set behind the copy on MTE3 fires after it.
        Stmt copy =
            h.async ? ir::make_copy(c) : block({ir::make_copy(c), ir::make_wait({c.barrier, 0})});
        if (in_turn == 0) // after the turn's tile: the AIV whose turn it was
            copy = IfThenElse::make((h.turns() + 1) % 2 == ir::core_id() % 2, copy);
        return block({IfThenElse::make(o.tile() >= 2, ir::make_cross_core_wait(kTaken + q)), copy,
                      ir::make_cross_core_set("MTE3", kHanded + q), ir::make_advance(o.counter)});
    }

    Stmt visit(const ProducerConsumer *op) override {
        if (const Handoff::Operand *o = h.operand(op->name); o && !op->is_producer)
            return ProducerConsumer::make(op->name, false, hand_back(*o));
        const auto [g, i] = h.find(op->name);
        if (g < 0 || !op->is_producer)
            return Side::visit(op);
        const Handoff::Group &group = h.groups[g];
        const Handoff::Acc &acc = group.accs[i];
        ir::CopyOp c;
        c.dst = ub(acc.name);
        c.src = group.workspace;
        c.dst_offset = 0;
        c.src_offset = group.offset(aic()) + int(acc.offset);
        c.dims = {{int(acc.elements), 1, 1}};
        c.barrier = ir::full_barrier(ub(acc.name));
        c.slot = 0;
        // What the producer's body leaves on the vector side first: an operand handed back for
        // the MMA (attention's P, for the P V sums), a nested producer (Halide's compute_with
        // fuses the K loops of two accumulators).
        std::vector<Stmt> load = {mutate(op->body)};
        if (loaded[g] == 0) // the group's tile is there
            load.push_back(ir::make_cross_core_wait(group.stored + group.parity()));
        load.push_back(ProducerConsumer::make(
            ub(acc.name), true, block({ir::make_copy(c), ir::make_wait({c.barrier, 0})})));
        // The slot is read once every accumulator is: their producers may follow each other or
        // nest (Halide's compute_with fuses their K loops).
        if (++loaded[g] == int(group.accs.size()))
            load.push_back(ir::make_cross_core_set("MTE2", group.read + group.parity()));
        return block(load);
    }

    std::vector<int> loaded; // per group, accumulators of its current tile loaded
    int in_turn = 0;         // inside the turn's allocation
    std::map<std::string, std::vector<Expr>> extents; // each operand's current tile
    std::set<std::string> columns;                    // operands whose current tile is one column
};

/** How many of the operands' handbacks (where the cube consumes them) lie outside the turn's
 * allocation: the AIVs can share the turn's tiles by rows only where none does. */
class HandedBackInside : public IRVisitor {
public:
    explicit HandedBackInside(const Handoff &h) : h(h) {}
    int outside = 0;

private:
    using IRVisitor::visit;
    const Handoff &h;
    int in_turn = 0;
    void visit(const Allocate *op) override {
        const bool turn = op->name == h.turn;
        in_turn += turn;
        IRVisitor::visit(op);
        in_turn -= turn;
    }
    void visit(const ProducerConsumer *op) override {
        if (!op->is_producer && h.operand(op->name) && in_turn == 0)
            outside++;
        IRVisitor::visit(op);
    }
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
/** Whether the stores into a tile Halide allocated with one extent step 1 only along loops of
 * the Func's dimension `d` (0: the tile is one row; 1: one column). Loop names are Halide's:
 * <func>.s<stage>.<dimension>[.<split>...]. */
bool steps_along(const Allocate *op, const CompileContext &ctx, size_t d) {
    const std::set<std::string> loops = unit_step_loops(op->body, op->name, ctx);
    const Halide::Internal::Function &f = ctx.functions.at(op->name);
    if (f.args().size() <= d)
        return false;
    const std::string &dimension = f.args()[d];
    bool along = !loops.empty();
    for (const std::string &l : loops) {
        const size_t stage = l.find(".s", op->name.size());
        const size_t at = stage == std::string::npos ? stage : l.find('.', stage + 2);
        along = along && at != std::string::npos &&
                l.compare(at + 1, dimension.size(), dimension) == 0 &&
                (l.size() == at + 1 + dimension.size() || l[at + 1 + dimension.size()] == '.');
    }
    return along;
}

/** An accumulator tile Halide allocated with one extent, as rows: its width (the stores' row
 * step; the whole tile for one row; 1 for one column), 0 where its stores do not say. */
int64_t accumulator_width(const Allocate *op, const CompileContext &ctx, int64_t elements) {
    const int64_t folded = folded_row_width(op->body, op->name, ctx);
    if (folded != 0)
        return std::max<int64_t>(folded, 0);
    if (steps_along(op, ctx, 0))
        return elements;
    return steps_along(op, ctx, 1) ? 1 : 0;
}

/** An operand tile's sides as the handback copies it: {columns, rows}, or {elements} of one row
 * or column, dense in the workspace and L1; Halide's one extent unfolded by the tile's stores.
 * Empty where the rows have a width known only at run time. */
std::vector<Expr> operand_sides(const Allocate *op, const CompileContext &ctx) {
    if (op->extents.size() != 1) {
        // (the unit sides of a batch or a head, one per tile, say nothing of the matrix)
        std::vector<Expr> sides = op->extents;
        while (sides.size() > 2 && is_const_one(sides.back()))
            sides.pop_back();
        return sides;
    }
    const Expr &elements = op->extents[0];
    const int64_t folded = folded_row_width(op->body, op->name, ctx);
    if (folded < 0)
        return {};
    if (folded > 0)
        return {Expr(int(folded)), simplify(elements / int(folded))};
    return {elements}; // a row, or a column (VectorSide::column_pitch)
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
            const int64_t folded =
                op->extents.size() == 1 && w > 0 ? accumulator_width(op, ctx, w) : -1;
            if (folded > 0)
                r = (w + folded - 1) / folded, w = folded;
            // (One extent whose stores say neither rows nor a column keeps Halide's layout: the
            // MMA's shape would decide, which this does not see.)
            // (a batch's or a head's unit sides beyond the rows say nothing of the matrix)
            size_t sides = op->extents.size();
            while (sides > 2 && is_const_one(op->extents[sides - 1]))
                sides--;
            two_dimensional = two_dimensional && (sides == 2 || folded > 0);
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

/** An operand's tiles as Halide allocated them: the largest with rows and columns, the longest
 * with one extent; sized = false where an extent has no constant bound or a tile more sides. */
class OperandTiles : public LoopScopedVisitor {
public:
    OperandTiles(Handoff::Operand &o, const CompileContext &ctx) : o(o), ctx(ctx) {}
    bool sized = true;

private:
    using IRVisitor::visit;
    Handoff::Operand &o;
    const CompileContext &ctx;
    void visit(const Allocate *op) override {
        if (op->name == o.name) {
            std::vector<int64_t> bound;
            for (const Expr &e : operand_sides(op, ctx))
                bound.push_back(constant_upper_bound(e, loops));
            sized = sized && !bound.empty() && bound.size() <= 2 &&
                    std::all_of(bound.begin(), bound.end(), [](int64_t b) { return b > 0; });
            if (sized && bound.size() == 2) {
                o.width = std::max(o.width, bound[0]);
                o.rows = std::max(o.rows, bound[1]);
            } else if (sized) {
                o.line = std::max(o.line, bound[0]);
            }
        }
        IRVisitor::visit(op);
    }
};

/** Checks that the vector ops writing each operand handed back lie inside the tile of a group
 * (its first accumulator's allocation): there the AIV whose turn the tile is computes it. */
class OperandWriters : public IRVisitor {
public:
    OperandWriters(const std::set<std::string> &operands, const std::vector<std::string> &firsts)
        : operands(operands), firsts(firsts) {}

private:
    using IRVisitor::visit;
    const std::set<std::string> &operands;
    const std::vector<std::string> &firsts; // each group's first accumulator
    int inside = 0;                         // group tiles open here
    void visit(const Allocate *op) override {
        const bool tile = std::count(firsts.begin(), firsts.end(), op->name) > 0;
        inside += tile;
        IRVisitor::visit(op);
        inside -= tile;
    }
    void visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (inside == 0 && ir::as_vector_op(Stmt(op), &v, &body)) {
            for (const ir::Region &r : v.regions) {
                if (r.write && operands.count(r.buffer)) {
                    throw Error("Func '" + user_text(r.buffer) +
                                "', directive tile_mma(): not supported on ascend: the vector "
                                "cores compute this MMA operand outside the tile of " +
                                user_text(firsts[0]) +
                                ", the matmul it is made from; Tandem hands an operand back to "
                                "the cube cores from inside that tile (compute_at " +
                                user_text(firsts[0]) + " inside the loop where " +
                                user_text(r.buffer) + " is computed)");
                }
            }
        }
        IRVisitor::visit(op);
    }
};

/** What the vector code keeps beyond a group's tile (Handoff::turn): the outermost allocation of
 * a buffer that a vector op writes inside a group's tile but that is allocated outside it
 * (attention's running max, sum and output, carried from key block to key block and read after
 * the last); empty where there is none. */
class CarriedState : public IRVisitor {
public:
    CarriedState(const std::set<std::string> &tiles, const std::set<std::string> &cube)
        : tiles(tiles), cube(cube) {}
    std::string buffer;

private:
    using IRVisitor::visit;
    const std::set<std::string> &tiles; // the groups' first accumulators
    const std::set<std::string> &cube;
    std::vector<std::string> allocations; // open here, outermost first
    size_t innermost_tile = 0;            // 1 + the index of the innermost open tile, or 0
    size_t depth = SIZE_MAX;              // the index of `buffer`'s allocation

    void visit(const Allocate *op) override {
        const size_t outer_tile = innermost_tile;
        allocations.push_back(op->name);
        if (tiles.count(op->name))
            innermost_tile = allocations.size();
        IRVisitor::visit(op);
        allocations.pop_back();
        innermost_tile = outer_tile;
    }
    void visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (innermost_tile > 0 && ir::as_vector_op(Stmt(op), &v, &body) &&
            !is_cube_op(Stmt(op), cube)) {
            for (const ir::Region &r : v.regions) {
                const auto at = std::find(allocations.begin(), allocations.end(), r.buffer);
                const size_t k = size_t(at - allocations.begin());
                if (r.write && at != allocations.end() && k + 1 < innermost_tile && k < depth) {
                    depth = k;
                    buffer = r.buffer;
                }
            }
        }
        IRVisitor::visit(op);
    }
};

/** The accumulators the same vector op reads go to the vector cores together: the groups, each
 * in the order of `nesting` (outermost allocation first), the groups by their first. */
std::vector<std::vector<std::string>> handoff_groups(const EpilogueReads &reads,
                                                     const std::vector<std::string> &nesting) {
    std::map<std::string, std::string> parent;
    for (const std::string &acc : nesting)
        parent[acc] = acc;
    std::function<std::string(const std::string &)> root = [&](const std::string &a) {
        return parent[a] == a ? a : parent[a] = root(parent[a]);
    };
    for (const std::set<std::string> &together : reads.read_together)
        for (const std::string &acc : together)
            if (parent.count(acc) && parent.count(*together.begin()))
                parent[root(acc)] = root(*together.begin());
    std::vector<std::vector<std::string>> groups;
    std::map<std::string, size_t> index; // each root's group
    for (const std::string &acc : nesting) {
        const std::string r = root(acc);
        if (!index.count(r)) {
            index[r] = groups.size();
            groups.emplace_back();
        }
        groups[index[r]].push_back(acc);
    }
    return groups;
}

} // namespace

Stmt split_mix_kernel(const Stmt &s, CompileContext &ctx) {
    EpilogueReads reads(ctx);
    s.accept(&reads);
    std::set<std::string> handed_back; // MMA operands the vector cores compute
    for (const auto &[operand, acc] : reads.operands)
        if (reads.vector_writes.count(operand))
            handed_back.insert(operand);
    if (reads.accumulators.empty() && !handed_back.empty()) {
        const std::string &operand = *handed_back.begin();
        throw Error("Func '" + user_text(operand) +
                    "', directive tile_mma(): not supported on ascend: the MMA of " +
                    user_text(reads.operands[operand]) +
                    " reads it as an operand, but the vector cores compute it from no "
                    "accumulator; Tandem hands an operand back to the cube cores only inside "
                    "the tile of the matmul it is made from (a chain). Load it from a tensor");
    }
    if (reads.accumulators.empty())
        return s;
    Nesting nesting(reads.accumulators);
    s.accept(&nesting);
    Handoff h;
    h.async = ctx.of(ctx.output).async_copy;
    const std::vector<std::vector<std::string>> groups = handoff_groups(reads, nesting.order);
    if (groups.size() > std::size(kGroupFlags)) {
        throw Error("Func '" + user_text(groups.back()[0]) +
                    "', directive tile_mma(): not supported on ascend: the vector code reads " +
                    std::to_string(groups.size()) +
                    " accumulators of one tile in different statements, and a mix kernel has "
                    "cross-core flags for " +
                    std::to_string(std::size(kGroupFlags)) +
                    " (read them in fewer statements, or compute them in separate kernels)");
    }
    std::vector<std::string> firsts;
    for (const std::vector<std::string> &g : groups)
        firsts.push_back(g[0]);
    OperandWriters writers(handed_back, firsts);
    s.accept(&writers);
    // Rows as wide as the narrowest type's 32-byte block: a cast keeps elements in place.
    int narrowest = std::min(4, ctx.functions.at(ctx.output).output_types()[0].bytes());
    for (const std::string &operand : handed_back)
        narrowest = std::min(narrowest, ctx.functions.at(operand).output_types()[0].bytes());
    const int64_t per_block = 32 / narrowest;
    for (const std::string &operand : handed_back) {
        Handoff::Operand o;
        o.name = operand;
        o.workspace = operand + ".workspace";
        o.type = ctx.functions.at(operand).output_types()[0];
        o.counter = operand + ".tile";
        OperandTiles tiles(o, ctx);
        s.accept(&tiles);
        if (!tiles.sized || (o.width == 0 && o.line == 0)) {
            throw Error("Func '" + user_text(operand) +
                        "', directive tile_mma(): on ascend an operand the vector cores compute "
                        "goes back to the cube cores through a GM workspace sized by its tile, "
                        "but its tile has no allocation of constant size in rows and columns "
                        "(compute_at it inside the reduction loop of " +
                        user_text(reads.operands[operand]) + ")");
        }
        h.operands.push_back(o);
    }
    for (size_t g = 0; g < groups.size(); g++) {
        Handoff::Group group;
        group.counter = groups[g][0] + ".tile";
        group.workspace = groups[g][0] + ".workspace";
        group.stored = kGroupFlags[g][0];
        group.read = kGroupFlags[g][1];
        for (const std::string &acc : groups[g]) {
            AccumulatorSize size(acc, ctx);
            s.accept(&size);
            if (size.allocations == 0 || size.width <= 0 || size.rows <= 0) {
                throw Error("Func '" + acc.substr(0, acc.find('$')) +
                            "', directive tile_mma(): on ascend an epilogue reads "
                            "the accumulator through a GM workspace sized by its tile, but " +
                            acc +
                            " has no allocation of constant size (compute_at the output's tile "
                            "loop)");
            }
            // Rows on 32-byte blocks (f32: 8 elements), so that the vector side's instructions
            // and copies see the tile as its other UB tiles (AscendRows.h); one-dimensional
            // tiles keep theirs. Rows as wide as the output's staging rows (AscendRows.h) and the
            // operands handed back, so that a cast to a narrower type keeps the elements where
            // they are: 16 f32 elements for a bfloat16 output.
            const Halide::Type type = ctx.functions.at(acc).output_types()[0];
            if ((g > 0 || !group.accs.empty()) && type != h.type) {
                throw Error("Func '" + acc.substr(0, acc.find('$')) +
                            "', directive tile_mma(): not supported on ascend: an epilogue reads "
                            "accumulators of different types (float32 and int32), which go to "
                            "the vector cores through workspaces of one type");
            }
            h.type = type;
            Handoff::Acc a;
            a.name = acc;
            a.offset = group.slot;
            // (A one-column accumulator stays contiguous: per-row values to the vector
            // instructions.)
            a.pitch = size.two_dimensional && size.width > 1
                          ? (size.width + per_block - 1) / per_block * per_block
                          : 0;
            a.elements = ((a.pitch > 0 ? a.pitch : size.width) * size.rows + 7) / 8 *
                         8; // whole 32-byte blocks
            group.slot += a.elements;
            group.accs.push_back(a);
        }
        h.groups.push_back(group);
    }
    // Operand rows padded as the accumulators' they are made from, or Halide's where those are.
    bool padded = true;
    for (const Handoff::Group &g : h.groups)
        for (const Handoff::Acc &a : g.accs)
            padded = padded && a.pitch > 0;
    for (Handoff::Operand &o : h.operands)
        o.pitch = padded ? (o.width + per_block - 1) / per_block * per_block : 0;
    std::set<std::string> cube = reads.cube;
    cube.insert(reads.accumulators.begin(), reads.accumulators.end());
    for (const std::string &operand : handed_back)
        cube.erase(operand); // the vector cores write it, the cube reads a copy
    // The AIVs take turns by the tiles of a state the vector code carries across group tiles,
    // else by the first group's.
    const std::set<std::string> tiles(firsts.begin(), firsts.end());
    CarriedState carried(tiles, cube);
    s.accept(&carried);
    h.turn = carried.buffer.empty() ? firsts[0] : carried.buffer;
    h.turn_counter = h.turn + ".turn";
    CubeSide cube_mutator(cube, h, ctx);
    Stmt cube_side = cube_mutator.mutate(s);
    for (size_t g = 0; g < h.groups.size(); g++) {
        if (cube_mutator.handoffs[g] > 0)
            continue;
        std::string names;
        for (const Handoff::Acc &a : h.groups[g].accs)
            names += (names.empty() ? "" : " and ") + user_text(a.name);
        throw Error("Func '" + ctx.output +
                    "', directive tile_mma(): not supported on ascend: the vector code reads the "
                    "accumulators " +
                    names +
                    " in one statement, but they are consumed apart; a mix kernel hands the "
                    "accumulators one statement reads to the vector cores together (compute_at "
                    "each at the output's tile loop)");
    }
    // Each side's key loop skewed across the round trip (Skew).
    const std::function<int(const std::vector<Stmt> &)> cube_split = after_handoff,
                                                        vector_split = before_answer;
    Skew cube_skew(cube_split), vector_skew(vector_split);
    cube_side = cube_skew.mutate(cube_side);
    // Where the cube waits for the vector side at every block (an operand's round trip), the AIVs
    // share each tile by rows rather than take tiles in turn (AscendRowSplit.h).
    HandedBackInside inside(h);
    s.accept(&inside);
    VectorSide vector(cube, h, ctx, !h.operands.empty() && inside.outside == 0);
    Stmt vector_side = vector_skew.mutate(vector.mutate(AicIndex().mutate(s)));
    if (cube_skew.skewed > 0 || vector_skew.skewed > 0) {
        ctx.notes.push_back(
            "ascend mix kernel: key loops skewed across the round trip (the cube computes block "
            "c + 1's " +
            h.groups[0].accs[0].name +
            " while the vector cores make block c's operand: " + std::to_string(cube_skew.skewed) +
            " loop(s); the vector cores make block c + 1's operand while the cube answers block "
            "c: " +
            std::to_string(vector_skew.skewed) + " loop(s))");
    }
    for (const Handoff::Group &g : h.groups)
        cube_side = block({cube_side, g.wait_last_reads()});
    for (const Handoff::Operand &o : h.operands) { // the last two slots' takes
        const Expr tile = o.tile();
        vector_side = block(
            {vector_side, IfThenElse::make(tile >= 2, ir::make_cross_core_wait(kTaken + tile % 2)),
             IfThenElse::make(tile >= 1, ir::make_cross_core_wait(kTaken + (tile + 1) % 2))});
    }
    ctx.mix = true;
    for (const Handoff::Group &g : h.groups) {
        ctx.workspaces.push_back(
            {g.workspace, h.type, {int(int64_t(ctx.grid) * 2 * g.slot)}, false, {}, {}});
        std::string names;
        for (const Handoff::Acc &a : g.accs)
            names += (names.empty() ? "" : " and ") + a.name;
        ctx.notes.push_back("ascend mix kernel: " + names + (g.accs.size() > 1 ? " go" : " goes") +
                            " from the cube cores to the vector cores through " + g.workspace +
                            " (two tiles per AIC in GM)");
    }
    for (const Handoff::Operand &o : h.operands) {
        ctx.workspaces.push_back(
            {o.workspace, o.type, {int(int64_t(ctx.grid) * 2 * o.slot())}, false, {}, {}});
        ctx.notes.push_back("ascend mix kernel: " + o.name +
                            ", made by the vector cores, goes back to the cube cores through " +
                            o.workspace + " (two tiles per AIC in GM)");
    }
    const std::string carries =
        carried.buffer.empty()
            ? std::string()
            : " (the vector code carries it from one tile of " + firsts[0] + " to the next)";
    if (vector.split > 0)
        ctx.notes.push_back(
            "ascend mix kernel: the two AIVs of an AIC share each of its tiles of " + h.turn +
            " by rows" + carries);
    else
        ctx.notes.push_back(
            "ascend mix kernel: the two AIVs of an AIC take its tiles of " + h.turn + " in turn" +
            carries + (vector.unsplit.empty() ? "" : " (not by rows: " + vector.unsplit + ")"));
    for (const Handoff::Group &g : h.groups) {
        cube_side = LetStmt::make(g.counter, 0, cube_side);
        vector_side = LetStmt::make(g.counter, 0, vector_side);
    }
    for (const Handoff::Operand &o : h.operands) {
        cube_side = LetStmt::make(o.counter, 0, cube_side);
        vector_side = LetStmt::make(o.counter, 0, vector_side);
    }
    return ir::make_mix(cube_side, LetStmt::make(h.turn_counter, 0, vector_side));
}

} // namespace tandem::lower
