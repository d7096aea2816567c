#include "AscendVector.h"
#include "AscendVectorSelection.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"
#include "tandem/params/Ascend.h"

#include <map>
#include <set>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;
using Halide::Expr;

namespace {

/** The loops of an element nest, outermost first, into `loops`; its store, or null when the nest
 * is not one store in a loop nest. */
const Store *peel_loops(const Stmt &body, std::vector<ascend_vector::Loop> &loops) {
    Stmt s = body;
    while (const For *f = s.as<For>()) {
        loops.push_back({f->name, f->min, f->extent});
        s = f->body;
    }
    return s.as<Store>();
}

using ascend_vector::GatherTable;
using ascend_vector::GatherTables;
using ascend_vector::Group;
using ascend_vector::kGatherOffsets;
using ascend_vector::Kind;
using ascend_vector::kLanes;
using ascend_vector::kMask;
using ascend_vector::kPerBlock;
using ascend_vector::kScratch;
using ascend_vector::loads_in;
using ascend_vector::Loop;
using ascend_vector::Scratch;
using ascend_vector::Selection;
using ascend_vector::Shape;
using ascend_vector::Value;

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

/** Which tiles each vector op may use as scratch: per buffer, the copies into it and the vector
 * ops' reads and writes of it in program order, each with its innermost loop. */
class Readers : public IRVisitor {
public:
    /** A tile op `op` reads may hold its intermediate results when no copy reads the tile, a copy
     * filled it just before the op in the op's own loop, and the next access to it (in program
     * order) is a copy refilling it: then no other op reads the fill the op clobbers (a tile
     * loaded once for many iterations, or an accumulator, may not). */
    bool scratch_for(const std::string &buffer, const LetStmt *op) const {
        auto all = events.find(buffer);
        if (copied.count(buffer) || all == events.end())
            return false;
        const std::vector<Event> &e = all->second;
        for (size_t i = 0; i < e.size(); i++) {
            if (e[i].op != op || e[i].kind != Event::Read)
                continue;
            return i > 0 && e[i - 1].kind == Event::Fill && e[i - 1].loop == e[i].loop &&
                   (i + 1 == e.size() || e[i + 1].kind == Event::Fill);
        }
        return false;
    }

private:
    struct Event {
        enum Kind { Fill, Read, Write } kind;
        std::string loop;
        const LetStmt *op = nullptr;
    };
    std::map<std::string, std::vector<Event>> events;
    std::set<std::string> copied;
    std::vector<std::string> loops{""};

    using IRVisitor::visit;
    void visit(const For *op) override {
        loops.push_back(op->name);
        IRVisitor::visit(op);
        loops.pop_back();
    }
    void visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(Stmt(op), &v, &body)) {
            for (const ir::Region &r : v.regions)
                if (!r.write)
                    events[r.buffer].push_back({Event::Read, loops.back(), op});
            for (const ir::Region &r : v.regions)
                if (r.write)
                    events[r.buffer].push_back({Event::Write, loops.back(), op});
            return;
        }
        IRVisitor::visit(op);
    }
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(Stmt(op), &c))
            return;
        copied.insert(c.src);
        events[c.dst].push_back({Event::Fill, loops.back(), nullptr});
    }
};

/** The row step of the first tile the value reads along the columns (a reduction's rows). */
Expr row_pitch_read(const Expr &value, const Loop &rows, const Loop &cols) {
    Expr x = Variable::make(Halide::Int(32), cols.var),
         r = Variable::make(Halide::Int(32), rows.var);
    for (const Load *l : loads_in(value)) {
        if (can_prove(simplify(substitute(cols.var, x + 1, l->index) - l->index) == 1))
            return simplify(substitute(rows.var, r + 1, l->index) - l->index);
    }
    return Expr();
}

/** The step of the first tile the value reads at a multiple of 32 bytes along `rows` (the
 * padded rows of a column). */
Expr column_pitch_read(const Expr &value, const Loop &rows) {
    for (const Load *l : loads_in(value)) {
        Expr step = affine_step(l->index, rows.var);
        const int64_t *p = step.defined() ? as_const_int(step) : nullptr;
        if (p && *p >= kPerBlock && *p % kPerBlock == 0)
            return step;
    }
    return Expr();
}

Shape flat_shape(const std::vector<Loop> &loops);

/** The nest's shape, or none (rows = 0) when its extents have no constant bounds. */
Shape shape_of(const std::vector<Loop> &loops, const Store *store) {
    Shape s;
    s.loops = loops;
    // Row-wise: two loops, the store dense over both, or one value per row (a reduction). Rows
    // `pitch` apart, wider than any row of the nest and a multiple of 32 bytes, are padded rows:
    // the instructions cover them whole. A row count known only at run time (a tail) is bounded:
    // the count form takes the count, the repeat form runs over the bound's rows (inside the
    // tiles; nothing past the count is stored).
    auto rowwise = [&s](const Expr &rows, int64_t pitch, const Expr &width) {
        s.rowwise = true;
        s.rows = constant_upper_bound(rows);
        s.cols = pitch;
        s.width = width;
        if (!as_const_int(rows))
            s.count = simplify(rows * int(pitch));
        return s;
    };
    const int64_t rows = loops.empty() ? 0 : constant_upper_bound(loops[0].extent);
    if (loops.size() == 2) {
        const int64_t width = constant_upper_bound(loops[1].extent);
        Expr x = Variable::make(Halide::Int(32), loops[1].var),
             r = Variable::make(Halide::Int(32), loops[0].var);
        Expr col = simplify(substitute(loops[1].var, x + 1, store->index) - store->index);
        Expr row = simplify(substitute(loops[0].var, r + 1, store->index) - store->index);
        Expr pitch = can_prove(col == 1) ? row
                     : is_const_zero(col) && can_prove(row == 1)
                         ? row_pitch_read(store->value, loops[0], loops[1])
                         : Expr();
        const int64_t *p = pitch.defined() ? as_const_int(pitch) : nullptr;
        const int64_t *exact = as_const_int(loops[1].extent);
        if (rows >= 1 && width >= 1 && p &&
            ((exact && *p == *exact) || (*p % kPerBlock == 0 && *p >= width)))
            return rowwise(loops[0].extent, *p, loops[1].extent);
    }
    // A column: one loop over padded rows one element wide; the store one element per row, or
    // one value per row (a reduction) of a tile read so.
    if (loops.size() == 1) {
        // (A cast to a narrower type: the rows are its f32 values', a block each where it reads
        // no tile so.)
        const Expr stored = affine_step(store->index, loops[0].var);
        const bool narrowing = store->value.type() != Halide::Float(32);
        Expr step = stored;
        if ((step.defined() && is_const_one(step)) || narrowing)
            step = column_pitch_read(store->value, loops[0]);
        if (!step.defined() && narrowing && stored.defined() && !is_const_one(stored))
            step = kPerBlock;
        const int64_t *p = step.defined() ? as_const_int(step) : nullptr;
        if (rows >= 1 && p && *p >= kPerBlock && *p % kPerBlock == 0)
            return rowwise(loops[0].extent, *p, 1);
    }
    return flat_shape(loops);
}

/** The nest as one flat run of elements: one loop of a count known at run time (a tail), whose
 * instructions take the count while the tiles hold its bound, or constant extents. */
Shape flat_shape(const std::vector<Loop> &loops) {
    Shape s;
    s.loops = loops;
    if (loops.size() == 1 && !as_const_int(loops[0].extent)) {
        const int64_t bound = constant_upper_bound(loops[0].extent);
        if (bound < 1)
            return Shape{{}, false, 0, 0, Expr(), Expr()};
        s.cols = bound;
        s.count = s.width = loops[0].extent;
        return s;
    }
    std::vector<int64_t> extents;
    for (const Loop &l : loops) {
        const int64_t *e = as_const_int(l.extent);
        if (!e || *e < 1)
            return Shape{{}, false, 0, 0, Expr(), Expr()};
        extents.push_back(*e);
    }
    s.cols = 1;
    for (int64_t e : extents)
        s.cols *= e;
    s.width = Expr(int(s.cols));
    return s;
}

/** The groups of one chunk, once per chunk: every operand outside the scratch moves by the
 * chunk's offset (the scratch and the mask are the chunk's own, reused). */
std::vector<Group> repeat_in_chunks(const std::vector<Group> &one, int64_t parts, int64_t chunk) {
    std::vector<Group> all;
    for (int64_t k = 0; k < parts; k++) {
        for (Group g : one) {
            for (ir::VectorInstruction &i : g.instructions) {
                auto shift = [&](const std::string &buffer, Expr &offset) {
                    if (buffer != kScratch && buffer != kMask)
                        offset = simplify(offset + int(k * chunk));
                };
                shift(i.dst, i.dst_offset);
                for (auto &[buffer, offset] : i.srcs)
                    shift(buffer, offset);
            }
            all.push_back(g);
        }
    }
    return all;
}

/** Whether the store is an update self = self op f (op Add, Max or Min; self read where it is
 * written, f not reading it): then `op` and `f`. */
bool self_update(const Store *store, std::string *op, Expr *f) {
    auto self = [&](const Expr &e) {
        const Load *l = e.as<Load>();
        return l && l->name == store->name && equal(l->index, store->index);
    };
    Expr a, b;
    if (const Add *x = store->value.as<Add>())
        a = x->a, b = x->b, *op = "Add";
    else if (const Max *x = store->value.as<Max>())
        a = x->a, b = x->b, *op = "Max";
    else if (const Min *x = store->value.as<Min>())
        a = x->a, b = x->b, *op = "Min";
    else
        return false;
    if (!self(a))
        std::swap(a, b);
    if (!self(a) || reads(b, store->name))
        return false;
    *f = b;
    return true;
}

/** The op's instructions in order, a barrier before each group that touches what an
 * earlier one wrote, or writes what one read (the V pipe overlaps its instructions
 * otherwise). */
std::vector<Stmt> in_order(const std::vector<Group> &groups) {
    std::vector<Stmt> sequence;
    std::set<std::string> written, read;
    for (const Group &g : groups) {
        bool depends = false;
        for (const ir::VectorInstruction &i : g.instructions) {
            depends |= written.count(i.dst) || read.count(i.dst);
            for (const auto &src : i.srcs)
                depends |= written.count(src.first) > 0;
        }
        if (depends && !sequence.empty())
            sequence.push_back(ir::make_pipe_barrier("V"));
        for (const ir::VectorInstruction &i : g.instructions)
            sequence.push_back(ir::make_vector_instruction(i));
        for (const ir::VectorInstruction &i : g.instructions) {
            written.insert(i.dst);
            for (const auto &src : i.srcs)
                read.insert(src.first);
        }
    }
    return sequence;
}

class Instructions : public IRMutator {
public:
    Instructions(const Readers &readers, Scratch &scratch, GatherTables &tables)
        : readers(readers), scratch(scratch), tables(tables) {}

private:
    const Readers &readers;
    Scratch &scratch;
    GatherTables &tables;
    using IRMutator::visit;

    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (!ir::as_vector_op(Stmt(op), &v, &body))
            return IRMutator::visit(op);
        out_of_room = false;
        Stmt mapped = instructions(op, v, body);
        if (!mapped.defined() && !out_of_room)
            mapped = each_store(v, body);
        if (mapped.defined()) {
            tables.commit();
            return mapped;
        }
        tables.rollback();
        const std::string func = "Func '" + user_name(v.label) + "', directive compute_at(): ";
        if (out_of_room) {
            throw Error(func + "on ascend the vector instructions of " + v.label + " need " +
                        std::to_string(scratch.bytes()) +
                        " bytes of UB for their intermediate results, but the tiles take " +
                        std::to_string(scratch.capacity - scratch.free_bytes) + " of its " +
                        std::to_string(scratch.capacity) + " bytes (" + scratch.largest +
                        " the most); use smaller tiles or fewer versions (multi_buffer)");
        }
        throw Error(
            func + "not supported on ascend: " + unsupported(body) +
            ". AscendVector maps f32 maps over tiles, padded rows and columns (+, -, *, /, "
            "min, max, abs, sqrt, exp, log, tanh, selects, row sums, maxima and minima, "
            "sums, maxima and minima down columns, casts to bfloat16 and float16), every operand "
            "starting on a 32-byte block or gathered (an index affine in the element "
            "loops with steps >= 0: a transposed or shifted read)");
    }

    bool out_of_room = false; // the last op mapped, but its temporaries did not fit

    /** A buffer's name as the user wrote the Func: `in` for Halide's `in_im$25_in_out$25$0`. */
    static std::string user_name(const std::string &buffer) {
        std::string n = buffer.substr(0, buffer.find('$'));
        if (n.size() > 3 && n.compare(n.size() - 3, 3, "_im") == 0)
            n.resize(n.size() - 3);
        return n;
    }

    /** What in the element nest `body` AscendC's vector instructions cannot do, in the user's
     * words. */
    static std::string unsupported(const Stmt &body) {
        std::vector<Loop> loops;
        const Store *store = peel_loops(body, loops);
        if (!store)
            return "an element nest that is not one store in a loop nest";
        if (store->value.type() != Halide::Float(32) && store->value.type() != Halide::BFloat(16) &&
            store->value.type() != Halide::Float(16))
            return std::string(store->value.type().is_int() ? "an " : "a ") +
                   type_name(store->value.type()) +
                   " result (the vector path computes in float32 and casts to bfloat16 or "
                   "float16 only)";
        class Find : public IRVisitor {
        public:
            const std::vector<Loop> &loops;
            std::string found;
            explicit Find(const std::vector<Loop> &loops) : loops(loops) {}

        private:
            using IRVisitor::visit;
            void note(const std::string &what) {
                if (found.empty())
                    found = what;
            }
            void visit(const Call *c) override {
                static const std::set<std::string> known = {"sqrt_f32", "exp_f32", "log_f32",
                                                            "tanh_f32"};
                // (promise_clamped and likely annotate an index or a condition, and integer
                // calls such as the core's id compute addresses: not operations on the values)
                const bool annotation = c->is_intrinsic(Call::promise_clamped) ||
                                        c->is_intrinsic(Call::unsafe_promise_clamped) ||
                                        c->is_intrinsic(Call::likely) ||
                                        c->is_intrinsic(Call::likely_if_innermost) ||
                                        !c->type.is_float();
                if (!annotation && !c->is_intrinsic(Call::abs) && !known.count(c->name))
                    note("the function " + c->name.substr(0, c->name.find("_f")));
                IRVisitor::visit(c);
            }
            void visit(const Mod *m) override {
                if (m->type.is_float())
                    note("%");
                IRVisitor::visit(m);
            }
            void visit(const GT *) override { note("a comparison >"); }
            void visit(const GE *) override { note("a comparison >="); }
            void visit(const LE *c) override { position(c->a, c->b); }
            void visit(const LT *c) override { position(c->a, c->b); }
            /** A condition on the element's position (a causal mask: key <= query). */
            void position(const Expr &a, const Expr &b) {
                // (a condition on the element's position, such as a causal mask, compares
                // index tensors: Selection::position)
                a.accept(this);
                b.accept(this);
            }
            void visit(const Load *l) override {
                const std::string name = "'" + user_name(l->name) + "'";
                if (l->type != Halide::Float(32))
                    return note("a read of " + name + ", of " + type_name(l->type));
                Expr base = l->index;
                std::vector<Expr> steps;
                for (const Loop &loop : loops) {
                    Expr x = Variable::make(Halide::Int(32), loop.var);
                    steps.push_back(simplify(substitute(loop.var, x + 1, l->index) - l->index));
                    base = substitute(loop.var, loop.min, base);
                }
                for (const Expr &step : steps) {
                    if (!is_const(step))
                        return note("a read of " + name +
                                    " whose index is not affine in the element loops (such as "
                                    "in(2 * (x / 2), y)): no vector instruction or Gather "
                                    "takes it");
                }
                const Expr *inner = steps.empty() ? nullptr : &steps.back();
                if (inner && !is_const_zero(*inner) && !is_const_one(*inner)) {
                    for (size_t i = 0; i + 1 < steps.size(); i++)
                        if (is_const_one(steps[i]))
                            return note("a transposed read of " + name +
                                        " (its elements along the output's rows are not "
                                        "contiguous in its tile)");
                }
                if (ascend_vector::misaligned(simplify(base)))
                    return note("a read of " + name +
                                " that starts inside a 32-byte block (a shifted window, such "
                                "as in(x + 1, y)): AscendC's vector operands start on 32-byte "
                                "boundaries");
                // (its index is Tandem's: not the user's operation)
            }
            static std::string type_name(Halide::Type t) {
                std::ostringstream os;
                os << t;
                return os.str();
            }
        } find(loops);
        // A recurrence (a scan: each element reads one its own nest wrote before it) first: the
        // lanes of one instruction are computed at once.
        class Recurrence : public IRVisitor {
        public:
            explicit Recurrence(const Store *store) : store(store) {}
            const Store *store;
            bool found = false;

        private:
            using IRVisitor::visit;
            void visit(const Load *l) override {
                found |= l->name == store->name && !equal(l->index, store->index);
                IRVisitor::visit(l);
            }
        } recurrence(store);
        store->value.accept(&recurrence);
        if (recurrence.found)
            return "a recurrence along the nest (each element of '" + user_name(store->name) +
                   "' reads one computed before it, as a running sum does): the lanes of AscendC's "
                   "vector instructions are computed at once";
        store->value.accept(&find);
        return find.found.empty() ? "the element nest of " + user_name(store->name) + " (" +
                                        std::to_string(loops.size()) + " loops)"
                                  : find.found;
    }

    static std::string type_name(Halide::Type t) {
        std::ostringstream os;
        os << t;
        return os.str();
    }

    /** A reduction down the columns into one row (self[x] = self[x] op f[r, x], op Add, Max or
     * Min): f as a tile, then a loop over the rows (a count known at run time in a tail), each
     * row one instruction into self behind a barrier: the element loops' order. None when the
     * nest is not one. */
    Stmt column_reduction(const LetStmt *op, const ir::VectorOp &v, std::vector<Loop> loops,
                          const Store *store) {
        // (One loop: a column one element wide, its rows a block each.)
        if (loops.empty() || loops.size() > 2 || store->value.type() != Halide::Float(32))
            return Stmt();
        // The columns' loop outside the rows' (mx(x) = max(mx(x), in(x, k)) as Halide orders a
        // reduction's update): each column's accumulation depends on no other column, so the
        // loops interchange without changing any column's order (the same bits).
        if (loops.size() == 2 && !expr_uses_var(store->index, loops[1].var) &&
            expr_uses_var(store->index, loops[0].var)) {
            for (const Load *l : loads_in(store->value)) {
                if (l->name == store->name && !equal(l->index, store->index))
                    return Stmt();
            }
            std::swap(loops[0], loops[1]);
        }
        const bool column = loops.size() == 1;
        Expr r = Variable::make(Halide::Int(32), loops[0].var);
        Expr col = 1;
        if (!column) {
            Expr x = Variable::make(Halide::Int(32), loops[1].var);
            col = simplify(substitute(loops[1].var, x + 1, store->index) - store->index);
        }
        Expr row = simplify(substitute(loops[0].var, r + 1, store->index) - store->index);
        std::string reduce_op;
        Expr f;
        if (!is_const_zero(row) || !can_prove(col == 1) || !self_update(store, &reduce_op, &f))
            return Stmt();
        Expr pitch =
            column ? column_pitch_read(f, loops[0]) : row_pitch_read(f, loops[0], loops[1]);
        const int64_t *p = pitch.defined() ? as_const_int(pitch) : nullptr;
        const int64_t rows = constant_upper_bound(loops[0].extent),
                      width = column ? 1 : constant_upper_bound(loops[1].extent);
        if (!p || rows < 1 || width < 1 || *p % kPerBlock != 0 || *p < width)
            return Stmt();
        Shape shape;
        shape.loops = loops;
        shape.rowwise = true;
        shape.rows = rows;
        shape.cols = *p;
        shape.width = column ? Expr(1) : loops[1].extent;
        if (!as_const_int(loops[0].extent))
            shape.count = simplify(loops[0].extent * int(*p));
        std::set<std::string> private_tiles;
        for (const ir::Region &reg : v.regions)
            if (!reg.write && readers.scratch_for(reg.buffer, op))
                private_tiles.insert(reg.buffer);
        scratch.floats = 0;
        scratch.mask_bytes = 0;
        Selection select(shape, private_tiles, scratch, tables);
        Expr stored = Load::make(Halide::Float(32), store->name, store->index, Halide::Buffer<>(),
                                 Halide::Internal::Parameter(), const_true(), ModulusRemainder());
        const Value self = select.classify(stored.as<Load>());
        const Value tile = select.column_operand(f);
        if (!select.ok || self.kind != Kind::Row || !can_prove(self.offset % kPerBlock == 0))
            return Stmt();
        scratch.reserved = tables.bytes();
        if (!scratch.fits()) {
            out_of_room = true;
            return Stmt();
        }
        scratch.max_floats = std::max(scratch.max_floats, scratch.floats);
        scratch.max_mask_bytes = std::max(scratch.max_mask_bytes, scratch.mask_bytes);
        std::vector<Stmt> sequence = in_order(select.groups);
        // Row by row, in order: each instruction reads what the one before wrote.
        const std::string row_var = loops[0].var;
        ir::VectorInstruction i;
        i.op = reduce_op;
        i.dst = store->name;
        i.dst_offset = self.offset;
        i.srcs = {{store->name, self.offset},
                  {tile.buffer, simplify(tile.offset + Variable::make(Halide::Int(32), row_var) *
                                                           int(shape.cols))}};
        i.count = shape.width;
        Stmt body = Block::make(ir::make_pipe_barrier("V"), ir::make_vector_instruction(i));
        sequence.push_back(
            For::make(row_var, 0, loops[0].extent, ForType::Serial, Halide::DeviceAPI::None, body));
        return ir::make_vector_op(v, Block::make(sequence));
    }

    /** A nest of several stores (RowStatistics' running max, sum and rescale factors), each
     * store in a nest of its own, in order, each with its instructions; none where one does not
     * map or the split would reorder an element's reads and writes: every store must write
     * distinct elements in distinct iterations (each loop steps its index) and every read of a
     * buffer the nest writes must be at that buffer's store index (the same element). */
    Stmt each_store(const ir::VectorOp &v, const Stmt &body) {
        std::vector<Loop> loops;
        Stmt s = body;
        while (const For *f = s.as<For>()) {
            loops.push_back({f->name, f->min, f->extent});
            s = f->body;
        }
        std::vector<const Store *> stores;
        std::vector<Stmt> pending = {s};
        while (!pending.empty()) {
            Stmt x = pending.front();
            pending.erase(pending.begin());
            if (const Block *b = x.as<Block>()) {
                pending.insert(pending.begin(), {b->first, b->rest});
            } else if (const Store *st = x.as<Store>()) {
                stores.push_back(st);
            } else {
                return Stmt();
            }
        }
        if (stores.size() < 2)
            return Stmt();
        std::map<std::string, Expr> index; // each written buffer's store index
        for (const Store *st : stores) {
            if (index.count(st->name) && !equal(index[st->name], st->index))
                return Stmt();
            index[st->name] = st->index;
            for (const Loop &l : loops) {
                Expr x = Variable::make(Halide::Int(32), l.var);
                if (is_const_zero(simplify(substitute(l.var, x + 1, st->index) - st->index)))
                    return Stmt();
            }
        }
        bool same_element = true;
        for (const Store *st : stores) {
            for (const Load *l : loads_in(st->value)) {
                auto w = index.find(l->name);
                same_element = same_element && (w == index.end() || equal(w->second, l->index));
            }
        }
        if (!same_element)
            return Stmt();
        std::vector<Stmt> parts;
        for (const Store *st : stores) {
            Stmt nest = st;
            for (size_t i = loops.size(); i-- > 0;)
                nest = For::make(loops[i].var, loops[i].min, loops[i].extent, ForType::Serial,
                                 Halide::DeviceAPI::None, nest);
            ir::VectorOp part = v;
            part.label = st->name;
            part.regions.clear();
            for (const ir::Region &r : v.regions) {
                bool read = false;
                for (const Load *l : loads_in(st->value))
                    read = read || l->name == r.buffer;
                if ((r.write && r.buffer == st->name) || (!r.write && read))
                    part.regions.push_back(r);
            }
            part.flops = simplify(v.flops / int(stores.size()));
            // (no tile is scratch for a part: the next part may read it)
            Stmt mapped = instructions(nullptr, part, nest);
            if (!mapped.defined())
                return Stmt();
            parts.push_back(mapped);
        }
        return block(parts);
    }

    /** The op with its AscendC instructions, or none. */
    Stmt instructions(const LetStmt *op, const ir::VectorOp &v, const Stmt &body) {
        std::vector<Loop> loops;
        const Store *store = peel_loops(body, loops);
        // A bfloat16 or float16 store of a float value: the value in f32, then a Cast
        // (CAST_RINT: ties to even, as Halide's cast rounds).
        const Cast *to_bf16 = store ? store->value.as<Cast>() : nullptr;
        // An int32 value (an int8 matmul's sums) goes through f32: exact below 2^24, beyond
        // which a half is infinite anyway.
        Expr through_f32;
        if (to_bf16 && to_bf16->value.type() == Halide::Int(32)) {
            through_f32 = Cast::make(to_bf16->type, Cast::make(Halide::Float(32), to_bf16->value));
            to_bf16 = through_f32.as<Cast>();
        }
        if (to_bf16 &&
            ((to_bf16->type != Halide::BFloat(16) && to_bf16->type != Halide::Float(16)) ||
             to_bf16->value.type() != Halide::Float(32)))
            to_bf16 = nullptr;
        if (!store || (store->value.type() != Halide::Float(32) && !to_bf16))
            return Stmt();
        if (Stmt down = column_reduction(op, v, loops, store); down.defined())
            return down;
        Shape shape = shape_of(loops, store);
        if (shape.rows == 0)
            return Stmt();
        std::set<std::string> private_tiles;
        for (const ir::Region &r : v.regions)
            if (!r.write && readers.scratch_for(r.buffer, op))
                private_tiles.insert(r.buffer);
        // The store as a value of the nest: a tile, or one value per row (a reduction).
        Expr stored = Load::make(Halide::Float(32), store->name, store->index, Halide::Buffer<>(),
                                 Halide::Internal::Parameter(), const_true(), ModulusRemainder());
        std::vector<Group> groups;
        scratch.floats = 0;
        scratch.mask_bytes = 0;
        Value dst = Selection(shape, private_tiles, scratch, tables).classify(stored.as<Load>());
        std::string reduce_op;
        Expr reduced; // self[r] = self[r] op reduced
        if (dst.kind == Kind::PerRow && !to_bf16 && !self_update(store, &reduce_op, &reduced) &&
            shape.rowwise) {
            // One value per padded row that is not a reduction (a transposed tile one column
            // wide, out[x] = in[x * 8]): a flat run, its reads gathered.
            shape = flat_shape(loops);
            if (shape.rows == 0)
                return Stmt();
            dst = Selection(shape, private_tiles, scratch, tables).classify(stored.as<Load>());
        }
        // self[r] = self[r] + f: a sum over the columns.
        const bool reduction = dst.kind == Kind::PerRow && !to_bf16;
        if (reduction) {
            if (!self_update(store, &reduce_op, &reduced))
                return Stmt();
            if (!can_prove(dst.offset % kPerBlock == 0))
                return Stmt();
        }
        if (reduction || dst.kind == Kind::Tile || to_bf16) {
            // A dense map into the destination tile. A bfloat16 store: its f32 value in a tile
            // (scratch unless an operand tile holds it), then one Cast into the dense bfloat16
            // destination (32-byte aligned: 16 elements); a column's bfloat16 rows (32 bytes: 16
            // elements) are narrower than its f32 rows, so a Cast per row.
            const Expr value = to_bf16 ? to_bf16->value : store->value;
            const Expr step =
                shape.loops.size() == 1 ? affine_step(store->index, shape.loops[0].var) : Expr();
            const bool per_row = to_bf16 && shape.rowwise && step.defined() && is_const(step) &&
                                 !can_prove(step == int(shape.cols));
            const Expr at =
                per_row ? simplify(substitute(shape.loops[0].var, shape.loops[0].min, store->index))
                        : dst.offset;
            if (to_bf16 &&
                ((!per_row && dst.kind != Kind::Tile) || (per_row && !can_prove(step % 16 == 0)) ||
                 !can_prove(at % 16 == 0) || reads(value, store->name)))
                return Stmt();
            // An update (dst = dst + f) reads each element where it writes it, and leaves the
            // destination alone until the last instruction.
            const bool update = reads(value, store->name);
            for (const Load *l : loads_in(value))
                if (l->name == store->name && !equal(l->index, store->index))
                    return Stmt();
            auto map = [&](Selection &select) {
                const Value dst = select.classify(stored.as<Load>());
                if (reduction) {
                    select.count_reads(reduced);
                    return select.reduce(dst, reduced, reduce_op);
                }
                select.count_reads(value);
                // (a store of a gathered read: the Gather writes the destination)
                const Load *whole = value.as<Load>();
                if (!to_bf16 && !update && whole && dst.kind == Kind::Tile && dst.pitch == 0 &&
                    select.gatherable(whole))
                    return (void)select.gather(whole, dst);
                if (!to_bf16 && update)
                    return select.assign_update(dst, select.gen(value, Value()));
                if (!to_bf16)
                    return select.assign(dst, select.gen(value, dst));
                Value f = select.gen(value, Value());
                if (select.ok && (f.kind != Kind::Tile || (!per_row && f.pitch != 0))) {
                    Value t = select.temp();
                    select.assign(t, f);
                    f = t;
                }
                if (!select.ok)
                    return;
                Group casts;
                for (int64_t r = 0; r < (per_row ? select.rows() : 1); r++) {
                    ir::VectorInstruction cast;
                    cast.op = "Cast";
                    cast.dst = store->name;
                    cast.dst_offset = per_row ? simplify(at + step * int(r)) : dst.offset;
                    const int64_t pitch = f.pitch > 0 ? f.pitch : shape.cols;
                    cast.srcs = {
                        {f.buffer, per_row ? simplify(f.offset + int(r * pitch)) : f.offset}};
                    cast.count = per_row ? Expr(1) : select.count();
                    cast.mode = 1; // RoundMode::CAST_RINT
                    casts.instructions.push_back(cast);
                }
                select.groups.push_back(casts);
            };
            // A map that needs more scratch than UB has left goes in chunks: of whole (maybe
            // padded) rows, any divisor of the rows, each chunk's operands where its rows are
            // (a row the same for all, a per-row value its rows'); else of a flat tile, halving.
            // A chunk runs over its bound (a runtime count's lanes past it stay in the tiles).
            const int64_t n = shape.rows * shape.cols;
            std::vector<int64_t> splits;
            for (int64_t parts = 1; parts <= (per_row         ? 1
                                              : shape.rowwise ? shape.rows
                                                              : 64);
                 parts = shape.rowwise ? parts + 1 : parts * 2)
                if (!shape.rowwise || shape.rows % parts == 0)
                    splits.push_back(parts);
            for (int64_t parts : splits) {
                if (!groups.empty())
                    break;
                Shape piece = shape;
                if (parts > 1)
                    piece.count = Expr();
                if (parts > 1 && shape.rowwise) {
                    piece.rows = shape.rows / parts;
                } else if (parts > 1) { // every operand a dense tile here: one flat row, in chunks
                    if (n % (parts * kLanes) != 0)
                        break;
                    piece.rows = 1;
                    piece.cols = n / parts;
                }
                std::vector<Group> chunks;
                bool mapped = true, fits = true, per_row_values = false;
                tables.rollback(); // (a table only this split's chunks read)
                int64_t floats = 0, mask_bytes = 0;
                for (int64_t k = 0; k < (shape.rowwise ? parts : 1) && mapped; k++) {
                    piece.first_row = k * piece.rows;
                    scratch.floats = 0;
                    scratch.mask_bytes = 0;
                    Selection select(piece, private_tiles, scratch, tables);
                    map(select);
                    // (a flat chunk's gathered operand would move by its own steps, not the
                    // chunk's)
                    mapped = select.ok && !select.groups.empty() &&
                             !(select.gathers && parts > 1 && !shape.rowwise);
                    scratch.reserved = tables.bytes();
                    // (a chunk's per-row values start on a 32-byte block: whole blocks of rows)
                    const bool aligned = piece.first_row % kPerBlock == 0 ||
                                         (!select.per_row_operands && !reduction);
                    fits = fits && scratch.fits() && aligned;
                    per_row_values |= select.per_row_values;
                    floats = std::max(floats, scratch.floats);
                    mask_bytes = std::max(mask_bytes, scratch.mask_bytes);
                    chunks.insert(chunks.end(), select.groups.begin(), select.groups.end());
                }
                scratch.floats = floats;
                scratch.mask_bytes = mask_bytes;
                if (!mapped)
                    break; // it cannot be mapped at all
                out_of_room = !fits;
                if (fits)
                    groups = parts > 1 && !shape.rowwise
                                 ? repeat_in_chunks(chunks, parts, piece.rows * piece.cols)
                                 : chunks;
                else if (per_row_values && !shape.rowwise)
                    break;
            }
        }
        if (groups.empty())
            return Stmt();
        scratch.max_floats = std::max(scratch.max_floats, scratch.floats);
        scratch.max_mask_bytes = std::max(scratch.max_mask_bytes, scratch.mask_bytes);
        const std::vector<Stmt> sequence = in_order(groups);
        // Its regions stay: a tile holding an intermediate result is V's until the ring's flag
        // releases it after the op, as before.
        return ir::make_vector_op(v, Block::make(sequence));
    }
};

/** The Gather offset tables, computed once at the kernel's start (V, int32_t): zeros, each
 * table's first row (CreateVecIndex, Muls: the column steps in bytes, over the nest's width; the
 * padding keeps 0), then the rows by doubling (rows [k, 2k) = rows [0, k) + k * row step bytes,
 * Adds), each stage behind a barrier. */
Stmt gather_offsets_op(const GatherTables &tables) {
    ir::VectorInstruction i;
    i.dst = kGatherOffsets;
    auto instruction = [&](const std::string &op, int64_t at, int64_t scalar, int64_t count,
                           int64_t src) {
        i.op = op;
        i.dst_offset = Expr(int(at));
        i.scalar = Expr(int(scalar));
        i.count = Expr(int(count));
        i.srcs.clear();
        if (src >= 0)
            i.srcs.push_back({kGatherOffsets, Expr(int(src))});
        return i;
    };
    Group zeros, index, scale;
    int64_t most_rows = 1;
    for (const auto &[t, at] : tables.committed) {
        zeros.instructions.push_back(instruction("Duplicate", at, 0, t.elements(), -1));
        if (t.col_step != 0 && t.width > 1) {
            index.instructions.push_back(instruction("CreateVecIndex", at, 0, t.width, -1));
            scale.instructions.push_back(instruction("Muls", at, 4 * t.col_step, t.width, at));
        }
        most_rows = std::max(most_rows, t.rows);
    }
    std::vector<Group> groups = {zeros, index, scale};
    for (int64_t k = 1; k < most_rows; k *= 2) {
        Group rows;
        for (const auto &[t, at] : tables.committed)
            if (k < t.rows && t.row_step != 0)
                rows.instructions.push_back(instruction("Adds", at + k * t.pitch,
                                                        4 * t.row_step * k,
                                                        std::min(k, t.rows - k) * t.pitch, at));
        groups.push_back(rows);
    }
    std::vector<Group> stages;
    for (const Group &g : groups)
        if (!g.instructions.empty())
            stages.push_back(g);
    ir::VectorOp v;
    v.label = kGatherOffsets;
    v.flops = 0;
    v.regions = {{kGatherOffsets, Expr(0), Expr(int(tables.elements)), true}};
    return ir::make_vector_op(v, Block::make(in_order(stages)));
}

} // namespace

Stmt select_vector_instructions(const Stmt &s, CompileContext &ctx,
                                std::vector<SramBuffer> &buffers) {
    const sim::ascend::AscendParams p = sim::ascend::AscendParams::from(ctx.target.lookup());
    int64_t used = 0;
    for (const SramBuffer &b : buffers) {
        if (b.ascend_mem == sim::ascend::Mem::UB)
            used = std::max(used, (b.offset_bytes + b.bytes() + 31) / 32 * 32);
    }
    Readers readers;
    s.accept(&readers);
    Scratch scratch;
    scratch.free_bytes = p.ub_bytes - used;
    scratch.capacity = p.ub_bytes;
    const SramBuffer *largest = nullptr;
    for (const SramBuffer &b : buffers) {
        if (b.ascend_mem == sim::ascend::Mem::UB && (!largest || b.bytes() > largest->bytes()))
            largest = &b;
    }
    if (largest)
        scratch.largest = largest->name + ": " + std::to_string(largest->bytes()) + " bytes";
    GatherTables tables;
    Stmt result = Instructions(readers, scratch, tables).mutate(s);
    // The instructions' intermediate results: UB beyond the tiles.
    auto add = [&](const char *name, Halide::Type type, int64_t elements) {
        SramBuffer b;
        b.name = name;
        b.ascend_mem = sim::ascend::Mem::UB;
        b.type = type;
        b.slot_elements = elements;
        b.offset_bytes = used;
        used += (b.bytes() + 31) / 32 * 32;
        buffers.push_back(b);
    };
    if (scratch.max_floats > 0)
        add(kScratch, Halide::Float(32), scratch.max_floats);
    if (scratch.max_mask_bytes > 0)
        add(kMask, Halide::UInt(8), (scratch.max_mask_bytes + 31) / 32 * 32);
    if (tables.elements > 0) {
        add(kGatherOffsets, Halide::Int(32), tables.elements);
        if (used > p.ub_bytes)
            throw Error("on ascend the Gather offsets of transposed or shifted reads (" +
                        std::to_string(tables.bytes()) +
                        " bytes) do not fit in UB with the tiles and the vector instructions' "
                        "scratch; smaller tiles or fewer stages leave more");
        result = Block::make(gather_offsets_op(tables), result);
        ctx.notes.push_back("ascend: " + std::to_string(tables.committed.size()) +
                            " Gather offset table(s), " + std::to_string(tables.bytes()) +
                            " bytes of UB, computed once at the kernel's start");
    }
    if (scratch.max_floats > 0 || scratch.max_mask_bytes > 0) {
        ctx.notes.push_back("ascend: UB " + std::to_string(used) + " of " +
                            std::to_string(p.ub_bytes) +
                            " bytes with the vector instructions' scratch (" +
                            std::to_string(scratch.max_floats * 4) + " bytes f32, " +
                            std::to_string(scratch.max_mask_bytes) + " bytes of compare masks)");
    }
    return result;
}

} // namespace tandem::lower
