#include "AscendVector.h"

#include "Nest.h"
#include "tandem/AsyncIR.h"

#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;
using Halide::Expr;

namespace {

struct Loop {
    std::string var;
    Expr min, extent;
};

/** A value of the tree: a tensor (buffer, offset) or a scalar. */
struct Operand {
    bool scalar = false;
    Expr value; // scalar
    std::string buffer;
    Expr offset;
};

class Select {
public:
    /** private_tiles: the UB tiles only this op reads (nothing else reads them before the ring
     * takes them back), which may hold intermediate results once the op has read them. */
    Select(const std::vector<Loop> &loops, const Expr &count, const std::set<std::string> &private_tiles)
        : loops(loops), count(count), private_tiles(private_tiles) {}

    std::vector<ir::VectorInstruction> instructions;
    bool ok = true;

    /** Counts the reads of each tile (before gen). */
    void count_reads(const Expr &e) {
        if (const Load *l = e.as<Load>()) {
            Expr base;
            if (coefficients(l->index, &base)) {
                auto [it, fresh] = tiles.insert({l->name, Tile{base}});
                if (!fresh && !can_prove(it->second.base == base)) it->second.one_region = false;
                it->second.reads++;
            }
            return;
        }
        for (const Expr &child : children(e)) count_reads(child);
    }

    /** The tensor a load reads, when it reads element i of the tile where the store writes i. */
    bool coefficients(const Expr &index, Expr *base) const {
        Expr expected = 1;
        Expr rest = index;
        for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
            Expr v = Variable::make(Halide::Int(32), it->var);
            Expr step = simplify(substitute(it->var, v + 1, index) - index);
            if (!can_prove(step == expected)) return false;
            rest = substitute(it->var, it->min, rest);
            expected = simplify(expected * it->extent);
        }
        *base = simplify(rest);
        for (const Loop &l : loops) {
            if (expr_uses_var(*base, l.var)) return false;
        }
        return true;
    }

    Operand gen(const Expr &e, const Operand &into) {
        if (!ok) return {};
        if (const Load *l = e.as<Load>()) {
            Operand t;
            if (l->type != Halide::Float(32) || !coefficients(l->index, &t.offset)) return fail();
            t.buffer = l->name;
            return t;
        }
        if (const FloatImm *f = e.as<FloatImm>()) {
            if (f->type != Halide::Float(32)) return fail();
            Operand c;
            c.scalar = true;
            c.value = e;
            return c;
        }
        Expr a, b;
        std::string op;
        if (const Add *x = e.as<Add>()) a = x->a, b = x->b, op = "Add";
        else if (const Sub *x = e.as<Sub>()) a = x->a, b = x->b, op = "Sub";
        else if (const Mul *x = e.as<Mul>()) a = x->a, b = x->b, op = "Mul";
        else if (const Div *x = e.as<Div>()) a = x->a, b = x->b, op = "Div";
        else if (const Min *x = e.as<Min>()) a = x->a, b = x->b, op = "Min";
        else if (const Max *x = e.as<Max>()) a = x->a, b = x->b, op = "Max";
        else return fail();
        if (e.type() != Halide::Float(32)) return fail();
        const bool leaf_a = a.as<Load>() || a.as<FloatImm>(), leaf_b = b.as<Load>() || b.as<FloatImm>();
        Operand x, y;
        if (leaf_a || !leaf_b) {
            x = gen(a, into);
            y = leaf_b ? gen(b, into) : gen(b, temp());
        } else { // only b needs instructions: compute it into `into`, then combine with the leaf a
            y = gen(b, into);
            x = gen(a, into);
        }
        if (!ok) return {};
        if (x.scalar && y.scalar) return fail();
        if (!x.scalar && !y.scalar) {
            emit(op, into, {x, y});
        } else if (op == "Add" || op == "Mul" || op == "Max" || op == "Min") {
            const Operand &t = x.scalar ? y : x, &c = x.scalar ? x : y;
            emit(op + "s", into, {t}, c.value);
        } else if (op == "Sub" && y.scalar) { // t - c = t + (-c), exactly
            emit("Adds", into, {x}, simplify(-y.value));
        } else if (op == "Sub") { // c - t = c + (-1 * t), exactly
            emit("Muls", into, {y}, Expr(-1.0f));
            emit("Adds", into, {into}, x.value);
        } else { // Div with a scalar side: the scalar as a tile, then Div (the same rounding)
            Operand c = temp();
            emit("Duplicate", c, {}, (x.scalar ? x : y).value);
            emit("Div", into, {x.scalar ? c : x, y.scalar ? c : y});
        }
        return into;
    }

    void fill(const Operand &dst, const Expr &value) { emit("Duplicate", dst, {}, value); }

    /** A tile for an intermediate result: a private input tile the op has finished reading. */
    Operand temp() {
        for (auto &[name, tile] : tiles) {
            if (tile.reads == 0 && tile.one_region && !tile.holds && private_tiles.count(name)) {
                tile.holds = true;
                Operand t;
                t.buffer = name;
                t.offset = tile.base;
                return t;
            }
        }
        return fail();
    }

private:
    struct Tile {
        Expr base;
        int reads = 0;          // reads of it the instructions have not made yet
        bool one_region = true; // every read at `base`
        bool holds = false;     // it holds an intermediate result
    };
    const std::vector<Loop> &loops;
    Expr count;
    const std::set<std::string> &private_tiles;
    std::map<std::string, Tile> tiles;

    static std::vector<Expr> children(const Expr &e) {
        if (const Add *x = e.as<Add>()) return {x->a, x->b};
        if (const Sub *x = e.as<Sub>()) return {x->a, x->b};
        if (const Mul *x = e.as<Mul>()) return {x->a, x->b};
        if (const Div *x = e.as<Div>()) return {x->a, x->b};
        if (const Min *x = e.as<Min>()) return {x->a, x->b};
        if (const Max *x = e.as<Max>()) return {x->a, x->b};
        return {};
    }

    Operand fail() {
        ok = false;
        return {};
    }

    void emit(const std::string &op, const Operand &dst, const std::vector<Operand> &srcs, const Expr &scalar = Expr()) {
        if (!ok) return;
        ir::VectorInstruction v;
        v.op = op;
        v.dst = dst.buffer;
        v.dst_offset = dst.offset;
        v.count = count;
        for (const Operand &s : srcs) {
            v.srcs.push_back({s.buffer, s.offset});
            auto tile = tiles.find(s.buffer);
            if (tile != tiles.end() && !tile->second.holds) tile->second.reads--; // read it now
        }
        v.scalar = scalar;
        instructions.push_back(v);
    }
};

/** Whether a buffer is read anywhere in an Expr. */
class Reads : public IRVisitor {
public:
    explicit Reads(const std::string &buffer) : buffer(buffer) {}
    bool found = false;

private:
    using IRVisitor::visit;
    const std::string &buffer;
    void visit(const Load *l) override {
        found |= l->name == buffer;
        IRVisitor::visit(l);
    }
};

bool reads(const Expr &e, const std::string &buffer) {
    Reads r(buffer);
    e.accept(&r);
    return r.found;
}

/** How many vector ops read each buffer, and which buffers copies read. */
class Readers : public IRVisitor {
public:
    std::map<std::string, int> vector_reads;
    std::set<std::string> copied;

private:
    using IRVisitor::visit;
    void visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(Stmt(op), &v, &body)) {
            for (const ir::Region &r : v.regions) {
                if (!r.write) vector_reads[r.buffer]++;
            }
            return;
        }
        IRVisitor::visit(op);
    }
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (ir::as_copy(Stmt(op), &c)) copied.insert(c.src);
    }
};

class Instructions : public IRMutator {
public:
    explicit Instructions(const Readers &readers) : readers(readers) {}

private:
    const Readers &readers;
    using IRMutator::visit;

    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (!ir::as_vector_op(Stmt(op), &v, &body)) return IRMutator::visit(op);
        std::vector<Loop> loops;
        Stmt s = body;
        while (const For *f = s.as<For>()) {
            loops.push_back({f->name, f->min, f->extent});
            s = f->body;
        }
        const Store *store = s.as<Store>();
        if (!store || loops.empty() || store->value.type() != Halide::Float(32) || reads(store->value, store->name))
            return op;
        Expr count = 1;
        for (const Loop &l : loops) count = count * l.extent;
        count = simplify(count);
        std::set<std::string> private_tiles;
        for (const ir::Region &r : v.regions) {
            auto n = readers.vector_reads.find(r.buffer);
            if (!r.write && n != readers.vector_reads.end() && n->second == 1 && !readers.copied.count(r.buffer))
                private_tiles.insert(r.buffer);
        }
        Select select(loops, count, private_tiles);
        Operand dst;
        if (!select.coefficients(store->index, &dst.offset)) return op;
        dst.buffer = store->name;
        select.count_reads(store->value);
        Operand value = select.gen(store->value, dst);
        if (select.ok && value.scalar) select.fill(dst, value.value); // a constant tile: Duplicate
        if (!select.ok || select.instructions.empty()) return op;
        // A barrier before each instruction that touches what an earlier one of the op wrote, or
        // writes what one read: the V pipe overlaps its instructions otherwise.
        std::vector<Stmt> sequence;
        std::set<std::string> written, read;
        for (const ir::VectorInstruction &i : select.instructions) {
            bool depends = written.count(i.dst) || read.count(i.dst);
            for (const auto &src : i.srcs) depends |= written.count(src.first) > 0;
            if (depends && !sequence.empty()) sequence.push_back(ir::make_pipe_barrier("V"));
            sequence.push_back(ir::make_vector_instruction(i));
            written.insert(i.dst);
            for (const auto &src : i.srcs) read.insert(src.first);
        }
        // Its regions stay: a tile holding an intermediate result is V's until the ring's flag
        // releases it after the op, as before.
        return ir::make_vector_op(v, Block::make(sequence));
    }
};

} // namespace

Stmt select_vector_instructions(const Stmt &s) {
    Readers readers;
    s.accept(&readers);
    return Instructions(readers).mutate(s);
}

} // namespace tandem::lower
