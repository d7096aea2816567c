#include "SkipMaskedBlocks.h"

#include "tandem/Nest.h"

#include <cmath>
#include <map>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** The first block from which `max_store` (bmax = max(bmax, select(...))) sees only masked keys
 * at every iteration of the loops between it and `block` (inclusive of its own nest), or an
 * undefined Expr. */
Expr first_masked_block(const Store *st, const std::vector<const For *> &inside, const For *block) {
    const Max *m = st->value.as<Max>();
    const Select *sel = m ? m->b.as<Select>() : nullptr;
    if (!sel && m)
        sel = m->a.as<Select>();
    if (!sel)
        return Expr();
    Expr masked;
    if (is_minus_infinity(sel->true_value))
        masked = sel->condition;
    else if (is_minus_infinity(sel->false_value))
        masked = !sel->condition;
    else
        return Expr();
    Scope<Interval> varying;
    for (const For *f : inside)
        varying.push(f->name, Interval(f->min, simplify(f->min + f->extent - 1)));
    const Expr all = simplify(and_condition_over_domain(simplify(masked), varying));
    if (expr_uses_vars(all, varying))
        return Expr();
    const Interval where = solve_for_inner_interval(all, block->name);
    if (!where.has_lower_bound() || where.has_upper_bound())
        return Expr();
    return simplify(where.min);
}

class Skip : public IRMutator {
public:
    explicit Skip(const std::map<std::string, std::string> &loops) : loops(loops) {}
    std::vector<std::string> notes;

private:
    using IRMutator::visit;
    const std::map<std::string, std::string> &loops; // block loop -> its block max's buffer

    Stmt visit(const For *op) override {
        auto it = loops.find(op->name);
        if (it == loops.end())
            return IRMutator::visit(op);
        // The block max's update and the loops between it and the block loop.
        struct Find : IRVisitor {
            const std::string &buffer;
            explicit Find(const std::string &b) : buffer(b) {}
            std::vector<const For *> stack;
            std::vector<std::pair<const Store *, std::vector<const For *>>> found;
            using IRVisitor::visit;
            void visit(const For *f) override {
                stack.push_back(f);
                IRVisitor::visit(f);
                stack.pop_back();
            }
            void visit(const Store *s) override {
                if (s->name == buffer && s->value.as<Max>())
                    found.emplace_back(s, stack);
                IRVisitor::visit(s);
            }
        } find(it->second);
        op->body.accept(&find);
        Stmt body = mutate(op->body);
        if (find.found.size() != 1)
            return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
        const Expr c0 = first_masked_block(find.found[0].first, find.found[0].second, op);
        if (!c0.defined()) {
            notes.push_back("masked blocks: the key blocks of " + op->name +
                            " that the mask hides whole are computed (no bound found)");
            return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
        }
        const Expr extent = simplify(Halide::min(op->extent, Halide::max(c0 - op->min, 0)));
        notes.push_back("masked blocks: the loop over " + op->name + " ends where the mask hides " +
                        "every key of the tile's rows (" + ir_text(extent) + " blocks)");
        return For::make(op->name, op->min, extent, op->for_type, op->device_api, body);
    }

    static std::string ir_text(const Expr &e) {
        std::ostringstream os;
        os << e;
        return os.str();
    }
};

} // namespace

Stmt skip_masked_blocks(const Stmt &s, CompileContext &ctx) {
    std::map<std::string, std::string> loops;
    for (const auto &[name, d] : ctx.directives) {
        if (!d.masked_block_max.empty())
            loops[d.masked_block_max] = name;
    }
    if (loops.empty())
        return s;
    Skip skip(loops);
    Stmt result = skip.mutate(s);
    ctx.notes.insert(ctx.notes.end(), skip.notes.begin(), skip.notes.end());
    return result;
}

} // namespace tandem::lower
