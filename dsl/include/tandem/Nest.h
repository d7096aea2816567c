#ifndef TANDEM_NEST_H
#define TANDEM_NEST_H

/** \file
 * Helpers shared by the recognition passes: perfect loop nests around one Store, and the affine
 * form of an index inside such a nest. Not a pass.
 */

#include "Halide.h"
#include "tandem/Kernel.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tandem::lower {

using Halide::Expr;
using Halide::Internal::Stmt;

struct Loop {
    std::string name;
    Expr min, extent;
};

/** A perfect nest: loops (outermost first) directly around one Store. */
struct Nest {
    std::vector<Loop> loops;
    const Halide::Internal::Store *store = nullptr;
};

/** True if `s` is For* around exactly one Store (a bare Store is a nest with no loops). */
bool as_perfect_nest(const Stmt &s, Nest *nest);

/** d e / d var if `e` is affine in `var` with a step that does not depend on `var`, else an
 * undefined Expr. */
Expr affine_step(const Expr &e, const std::string &var);

/** `e` with every loop var of the nest at its loop's min. */
Expr at_loop_mins(const Expr &e, const std::vector<Loop> &loops);

/** Product of the loop extents. */
Expr trip_count(const std::vector<Loop> &loops);

/** Intervals of the enclosing loop variables, for bounding sizes that depend on them. */
using LoopScope = Halide::Internal::Scope<Halide::Internal::Interval>;
void push_loop(LoopScope &scope, const Halide::Internal::For *loop);

/** Visitor and mutator bases that keep `loops`: the intervals of the loops around what they
 * visit (for constant_upper_bound). */
class LoopScopedVisitor : public Halide::Internal::IRVisitor {
protected:
    using Halide::Internal::IRVisitor::visit;
    LoopScope loops;
    void visit(const Halide::Internal::For *op) override;
};
class LoopScopedMutator : public Halide::Internal::IRMutator {
protected:
    using Halide::Internal::IRMutator::visit;
    LoopScope loops;
    Stmt visit(const Halide::Internal::For *op) override;
};

/** A constant upper bound of `e` given the enclosing loops (the core id is in [0, 2^16)), or -1
 * if none can be found. */
int64_t constant_upper_bound(const Expr &e, const LoopScope &scope = LoopScope::empty_scope());
/** A constant lower bound of `e` given the enclosing loops, if one can be found. */
std::optional<int64_t> constant_lower_bound(const Expr &e,
                                            const LoopScope &scope = LoopScope::empty_scope());

/** A constant upper bound of the elements of an allocation: of their product or else the product
 * of its extents' bounds (an extent is never negative: a tile of a runtime shape is
 * min(tile, rest), at most the tile, where the product's bound is unknown), or -1. */
int64_t allocation_bound(const Halide::Internal::Allocate *op,
                         const LoopScope &scope = LoopScope::empty_scope());

bool provably_zero(const Expr &e);

/** `e` with tandem_core_id() replaced by a variable, for bounds and modulus analysis. */
Expr core_id_as_variable(const Expr &e);

/** The name CoreMapping gives the loop it spreads over the cores, and the test for it. */
std::string core_loop_name(const std::string &tile_loop);
bool is_core_loop(const std::string &loop_name);

/** Whether an Expr divides (a Div or a Mod in it). */
bool has_division(const Expr &e);

/** An Int(32) variable. */
Expr int_var(const std::string &name);

/** The statements of a block in order (nested blocks flattened, no-ops dropped), and back. */
std::vector<Stmt> flatten(const Stmt &s);
Stmt block(const std::vector<Stmt> &parts);

/** The buffers a statement or an expression loads from. */
std::set<std::string> loaded(const Stmt &s);
std::set<std::string> loaded(const Expr &e);
/** Whether `e` is the constant -inf. */
bool is_minus_infinity(const Expr &e);
/** The buffers a statement stores to. */
std::set<std::string> stored(const Stmt &s);
/** The variables an expression reads. */
std::set<std::string> variables(const Expr &e);
/** Whether two sets of names share one. */
bool meets(const std::set<std::string> &a, const std::set<std::string> &b);

/** Drops no-op statements (Evaluate of a constant) from blocks. */
Stmt remove_no_ops(const Stmt &s);

/** Drops the guards every call passes: an if whose condition holds (or fails) whenever each of
 * `at_least_one` (the runtime extents, >= 1 at every call) is at least 1 becomes its then (or
 * else) branch. A guard left in the code it only costs a branch, but a guard around a wgmma
 * wait makes ptxas serialise the warpgroup's MMAs (it cannot tell the branch is uniform). */
Stmt drop_guards_every_call_passes(const Stmt &s, const std::vector<std::string> &at_least_one);

/** Prepends `before` to the first statement of `s` in program order that touches `buffer` (only
 * writes if `writes_only`). Descends through blocks, producer/consumer markers and lets; loops,
 * ifs and ops count as one statement - except, with `into_branches`, an if whose then-branch alone
 * touches the buffer: `before` goes inside it (a wait that pairs with a release inside the branch
 * must not run when the branch does not). */
Stmt insert_before_first_access(const Stmt &s, const std::string &buffer, bool writes_only,
                                const Stmt &before, bool into_branches = false);

// Mix kernels (ir::make_mix: Ascend's cube and vector sides) as the passes see them.

/** Whether `name` is a kernel's store target: its output or one of its workspaces. */
bool is_store_target(const CompileContext &ctx, const std::string &name);

/** Applies `f` to each side of a mix kernel (or to the whole body of another kernel). */
Halide::Internal::Stmt
each_side(const Halide::Internal::Stmt &s,
          const std::function<Halide::Internal::Stmt(const Halide::Internal::Stmt &)> &f);

/** Appends `tail` to the side of a mix kernel that touches `buffer` (to the body otherwise). */
Halide::Internal::Stmt append_where_used(const Halide::Internal::Stmt &s,
                                         const Halide::Internal::Stmt &tail,
                                         const std::string &buffer);

} // namespace tandem::lower

#endif
