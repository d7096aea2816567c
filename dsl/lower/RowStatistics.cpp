#include "RowStatistics.h"

#include "tandem/Nest.h"

#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** Why the buffers stay per element. */
struct Kept {
    std::string why;
};

/** A buffer held per row: its first `columns` dimensions (of `count` elements in all) go. */
struct RowBuffer {
    int columns = 0;
    int64_t count = 1;
};

/** Calls a function on every node of type T of what it visits. */
template <class T> class Each : public IRVisitor {
public:
    explicit Each(std::function<void(const T *)> f) : f(std::move(f)) {}

private:
    using IRVisitor::visit;
    std::function<void(const T *)> f;
    void visit(const T *op) override {
        f(op);
        IRVisitor::visit(op);
    }
};

template <class T, class Node> void each(const Node &node, std::function<void(const T *)> f) {
    Each<T> visitor(std::move(f));
    node.accept(&visitor);
}

/** The values a row's column statements compute that are the same along the columns: largest
 * float subexpressions that call a function (exp), read no variable of a loop or let inside the
 * statements and no buffer they write; each replaced by a load of a buffer of its own (`found`:
 * its name and the value), at the row. */
class RowValues : public IRMutator {
public:
    RowValues(const Stmt &columns, const std::string &prefix, int first, const Expr &row)
        : written(stored(columns)), prefix(prefix), first(first), row(row) {
        each<For>(columns, [&](const For *f) { inner.insert(f->name); });
        each<LetStmt>(columns, [&](const LetStmt *l) { inner.insert(l->name); });
    }
    std::vector<std::pair<std::string, Expr>> found;

    using IRMutator::mutate;
    Expr mutate(const Expr &e) override {
        if (!per_row(e))
            return IRMutator::mutate(e);
        for (const auto &[name, value] : found) {
            if (equal(value, e))
                return load(name, e.type());
        }
        found.emplace_back(prefix + std::to_string(first + int(found.size())), e);
        return load(found.back().first, e.type());
    }

private:
    std::set<std::string> written, inner;
    std::string prefix;
    int first;
    Expr row;

    Expr load(const std::string &name, Halide::Type t) const {
        return Load::make(t, name, row, Halide::Buffer<>(), Parameter(), const_true(),
                          ModulusRemainder());
    }
    bool per_row(const Expr &e) const {
        if (!e.type().is_float() || e.type().lanes() != 1 || e.as<Load>())
            return false;
        bool calls = false, other = false;
        each<Call>(e, [&](const Call *c) { calls = calls || c->call_type == Call::PureExtern; });
        each<Variable>(e, [&](const Variable *v) { other = other || inner.count(v->name); });
        each<Load>(e, [&](const Load *l) { other = other || written.count(l->name); });
        return calls && !other;
    }
};

/** The rows' stores with the row values computed before them (RowValues' factors) read from
 * their buffers, where a store reads such a value before any store to what the value reads (the
 * running sum's update reads the rescale factors of the running max it replaces). */
class ReuseRowValues : public IRMutator {
public:
    ReuseRowValues(const std::vector<std::pair<std::string, Expr>> &found, const Expr &row)
        : found(found), row(row) {}

private:
    using IRMutator::visit;
    const std::vector<std::pair<std::string, Expr>> &found;
    Expr row;
    std::set<std::string> stored_so_far;

    Stmt visit(const Store *op) override {
        Expr value = op->value;
        for (const auto &[name, computed] : found) {
            bool reads_stored = false;
            each<Load>(computed, [&](const Load *l) {
                reads_stored = reads_stored || stored_so_far.count(l->name);
            });
            if (!reads_stored)
                value = substitute(computed,
                                   Load::make(computed.type(), name, row, Halide::Buffer<>(),
                                              Parameter(), const_true(), ModulusRemainder()),
                                   value);
        }
        stored_so_far.insert(op->name);
        return Store::make(op->name, value, op->index, op->param, op->predicate, op->alignment);
    }
};

/** The row buffers' indices divided by their column counts, and their stores moved out of the
 * column loops. */
class PerRow : public IRMutator {
public:
    explicit PerRow(std::map<std::string, RowBuffer> rows) : rows(std::move(rows)) {}

private:
    using IRMutator::visit;
    std::map<std::string, RowBuffer> rows;
    LoopScope bounds;
    std::vector<Expr> row_extents; // the row buffers' (the innermost allocated)
    int factors = 0;               // row factors made so far (their names)
    // The column loops each store of a row buffer leaves, by the store's buffer and row.
    std::map<std::string, std::set<std::string>> columns_of;

    static std::string key(const Store *st) {
        std::ostringstream os;
        os << st->name << "[" << st->index << "]";
        return os.str();
    }

    Expr row_of(const Expr &index, const RowBuffer &b) {
        return simplify(index / Expr(int(b.count)), true, bounds);
    }

    Stmt visit(const Allocate *op) override {
        auto it = rows.find(op->name);
        if (it == rows.end())
            return IRMutator::visit(op);
        std::vector<Expr> extents = op->extents;
        if (int(extents.size()) < it->second.columns)
            throw Kept{op->name + " has fewer dimensions than its columns"};
        for (int d = 0; d < it->second.columns; d++)
            extents[d] = 1;
        row_extents = extents;
        return Allocate::make(op->name, op->type, op->memory_type, extents, mutate(op->condition),
                              mutate(op->body), op->new_expr, op->free_function);
    }

    Expr visit(const Load *op) override {
        auto it = rows.find(op->name);
        if (it == rows.end())
            return IRMutator::visit(op);
        return Load::make(op->type, op->name, row_of(mutate(op->index), it->second), op->image,
                          op->param, mutate(op->predicate), ModulusRemainder());
    }

    Stmt visit(const Store *op) override {
        auto it = rows.find(op->name);
        if (it == rows.end())
            return IRMutator::visit(op);
        const Expr index = mutate(op->index);
        const Expr row = row_of(index, it->second);
        // The index must be the row times the column count plus a column the loops it loses give.
        std::set<std::string> columns;
        for (const std::string &v : variables(index)) {
            if (bounds.contains(v) && !variables(row).count(v))
                columns.insert(v);
        }
        const Expr column = simplify(index - row * Expr(int(it->second.count)), true, bounds);
        for (const std::string &v : variables(column)) {
            if (!columns.count(v))
                throw Kept{"a store of " + op->name + " whose column is not its loops'"};
        }
        Stmt s = Store::make(op->name, mutate(op->value), row, op->param, mutate(op->predicate),
                             ModulusRemainder());
        if (!columns.empty())
            columns_of[key(s.as<Store>())].insert(columns.begin(), columns.end());
        return s;
    }

    /** How a store leaves the loop `loop`: not (0), as a column loop (1: once, after it), or as a
     * row loop around the column loops it left (2: in a loop of its own after it). */
    int leaves(const Store *st, const std::string &loop) const {
        auto it = columns_of.find(key(st));
        if (it == columns_of.end())
            return 0;
        return it->second.count(loop) ? 1 : expr_uses_var(st->index, loop) ? 2 : 0;
    }

    Stmt visit(const For *op) override {
        const Expr min = mutate(op->min), extent = mutate(op->extent);
        push_loop(bounds, op);
        const Stmt body = mutate(op->body);
        bounds.pop(op->name);
        auto loop = [&](const Stmt &b) {
            return For::make(op->name, min, extent, op->for_type, op->device_api, b);
        };
        std::set<int> how;
        each<Store>(body, [&](const Store *st) {
            if (int l = leaves(st, op->name))
                how.insert(l);
        });
        if (how.empty())
            return loop(body);
        if (how.size() > 1)
            throw Kept{"a loop is a column of some running values and a row of others"};
        Stmt kept, moved;
        split(body, op->name, &kept, &moved);
        if (*how.begin() == 1) {
            // The stores that lose this loop run after it, at its first iteration.
            moved = substitute(op->name, min, moved);
            return kept.defined() ? Block::make(loop(kept), moved) : moved;
        }
        // A row loop: the columns' statements, then the rows' stores, each in a loop of its own.
        if (!kept.defined())
            return loop(body);
        const Expr row = one_row_per_iteration(body, op->name);
        return factored(kept, moved, row, loop);
    }

    /** The columns' statements `kept` and the rows' stores `moved` of a row loop (`loop` makes
     * one), with the values of the columns' statements that are the same along their columns
     * and call a function (the output's rescale factors, exp(m - m') and exp(m_block - m')),
     * computed once per row before them, into buffers of the rows' shape, at `row`. */
    Stmt factored(const Stmt &kept, const Stmt &moved, const Expr &row,
                  const std::function<Stmt(const Stmt &)> &loop) {
        const Store *some = nullptr;
        each<Store>(moved, [&](const Store *st) { some = some ? some : st; });
        RowValues values(kept, some->name.substr(0, some->name.rfind('.')) + "_factor", factors,
                         row);
        const Stmt uses = values.mutate(kept);
        if (values.found.empty())
            return Block::make(loop(kept), loop(moved));
        factors += int(values.found.size());
        const Stmt rows_stores = ReuseRowValues(values.found, row).mutate(moved);
        std::vector<Stmt> factors;
        for (const auto &[name, value] : values.found)
            factors.push_back(
                Store::make(name, value, row, Parameter(), const_true(), ModulusRemainder()));
        // The factors read the running values before they are stored; where the columns read
        // them only through the factors, the rows' stores follow the factors in one loop.
        Stmt s = meets(loaded(uses), stored(moved))
                     ? block({loop(block(factors)), loop(uses), loop(rows_stores)})
                     : block({loop(block({block(factors), rows_stores})), loop(uses)});
        for (const auto &[name, value] : values.found)
            s = Allocate::make(name, value.type(), Halide::MemoryType::Auto, row_extents,
                               const_true(), s);
        return s;
    }

    /** Whether `s` has a store that leaves the loop `loop`. */
    bool moves_out_of(const Stmt &s, const std::string &loop) const {
        bool found = false;
        each<Store>(s, [&](const Store *st) { found = found || leaves(st, loop); });
        return found;
    }

    /** `s` parted into what stays in the loop `loop` and the stores that leave it, each in the
     * loops and lets around it, in their order; throws Kept where that would change a read. */
    void split(const Stmt &s, const std::string &loop, Stmt *kept, Stmt *moved) {
        if (const Store *st = s.as<Store>()) {
            if (leaves(st, loop))
                *moved = s;
            else
                *kept = s;
            return;
        }
        if (!moves_out_of(s, loop)) {
            *kept = s;
            return;
        }
        if (const Block *b = s.as<Block>()) {
            Stmt k1, m1, k2, m2;
            split(b->first, loop, &k1, &m1);
            split(b->rest, loop, &k2, &m2);
            // What stays after a moved store must not read what it stored (it read the new value).
            if (m1.defined() && k2.defined() && meets(loaded(k2), stored(m1)))
                throw Kept{"a statement reads the running values after they are stored"};
            *kept = k1.defined() && k2.defined() ? Block::make(k1, k2) : k1.defined() ? k1 : k2;
            *moved = m1.defined() && m2.defined() ? Block::make(m1, m2) : m1.defined() ? m1 : m2;
        } else if (const For *f = s.as<For>()) {
            // Another loop (a row): its iterations must each touch their own row.
            Stmt k, m;
            split(f->body, loop, &k, &m);
            one_row_per_iteration(f->body, f->name);
            if (k.defined())
                *kept = For::make(f->name, f->min, f->extent, f->for_type, f->device_api, k);
            *moved = For::make(f->name, f->min, f->extent, f->for_type, f->device_api, m);
        } else if (const LetStmt *l = s.as<LetStmt>()) {
            Stmt k, m;
            split(l->body, loop, &k, &m);
            if (k.defined())
                *kept = stmt_uses_var(k, l->name) ? LetStmt::make(l->name, l->value, k) : k;
            *moved = stmt_uses_var(m, l->name) ? LetStmt::make(l->name, l->value, m) : m;
        } else {
            throw Kept{"a store of the running values under a condition"};
        }
        // The moved stores must not read what stays (they would read its last iteration's).
        if (kept->defined() && meets(loaded(*moved), stored(*kept)))
            throw Kept{"the running values read a value of the columns"};
    }

    /** The row buffers `body` touches, at one index that differs in every iteration of `loop`:
     * that index. */
    Expr one_row_per_iteration(const Stmt &body, const std::string &loop) const {
        std::vector<Expr> indices;
        each<Load>(body, [&](const Load *l) {
            if (rows.count(l->name))
                indices.push_back(l->index);
        });
        each<Store>(body, [&](const Store *st) {
            if (rows.count(st->name))
                indices.push_back(st->index);
        });
        for (const Expr &i : indices) {
            const Expr step =
                simplify(substitute(loop, Variable::make(Halide::Int(32), loop) + 1, i) - i);
            if (!equal(i, indices[0]) || !is_const(step) || is_const_zero(step))
                throw Kept{"the rows' loop " + loop + " does not take one row per iteration"};
        }
        return indices.empty() ? Expr() : indices[0];
    }
};

} // namespace

Stmt row_statistics(const Stmt &s, CompileContext &ctx) {
    // The buffers: the components after the first of each Func with row statistics.
    std::map<std::string, int> columns;
    for (const auto &[name, d] : ctx.directives) {
        auto f = ctx.functions.find(name);
        if (d.row_statistics <= 0 || f == ctx.functions.end())
            continue;
        for (int i = 1; i < f->second.outputs(); i++)
            columns[name + "." + std::to_string(i)] = d.row_statistics;
    }
    if (columns.empty())
        return s;
    // Their column counts (constant, the same wherever Halide allocates them).
    std::map<std::string, RowBuffer> rows;
    std::string why;
    each<Allocate>(s, [&](const Allocate *a) {
        auto c = columns.find(a->name);
        if (c != columns.end() && int(a->extents.size()) >= c->second) {
            RowBuffer b{c->second, 1};
            for (int d = 0; d < c->second; d++) {
                const int64_t *e = as_const_int(simplify(a->extents[d]));
                b.count = e ? b.count * *e : -1;
                if (!e)
                    why = "the columns of " + a->name + " are not a constant extent";
            }
            auto [it, fresh] = rows.emplace(a->name, b);
            if (!fresh && it->second.count != b.count)
                why = a->name + " is allocated with different extents";
        }
    });
    for (auto it = rows.begin(); it != rows.end();)
        it = it->second.count == 1 ? rows.erase(it) : std::next(it);
    if (rows.empty())
        return s;
    try {
        if (!why.empty())
            throw Kept{why};
        return PerRow(rows).mutate(s);
    } catch (const Kept &k) {
        ctx.notes.push_back("the running max and sum stay per element, not per row (" + k.why +
                            ")");
        return s;
    }
}

} // namespace tandem::lower
