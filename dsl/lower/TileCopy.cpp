#include "TileCopy.h"
#include "Targets.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

std::string where(const std::string &func, const char *directive) {
    return "Func '" + func + "', directive " + directive + ": ";
}

/** The copy box of `nest` (innermost dim first), or false if an index is not affine. */
bool copy_box(const Nest &nest, const Expr &dst_index, const Expr &src_index, ir::CopyOp *op) {
    op->dims.clear();
    for (auto l = nest.loops.rbegin(); l != nest.loops.rend(); ++l) {
        Expr ds = affine_step(dst_index, l->name), ss = affine_step(src_index, l->name);
        if (!ds.defined() || !ss.defined())
            return false;
        op->dims.push_back({l->extent, ds, ss});
    }
    op->dst_offset = at_loop_mins(dst_index, nest.loops);
    op->src_offset = at_loop_mins(src_index, nest.loops);
    return true;
}

/** The box with one dim per dim of the tensor's copy view (innermost first), so that every
 * backend sees the same rank whatever loops Halide removed: loop dims are matched to view dims
 * by global stride, a view dim no loop moves gets extent 1 (and the on-chip stride of the next
 * matched dim), and a dim of extent 1 outside the view is dropped. A box that does not walk the
 * tensor's dims (a transposing copy) is left as it is. */
void conform_to_tensor(ir::CopyOp *op, const KernelArg *arg, bool global_is_src) {
    if (!arg)
        return;
    std::vector<KernelArg::Dim> view = arg->copy_view();
    std::vector<ir::CopyDim> dims(view.size());
    std::vector<bool> matched(view.size(), false);
    for (const ir::CopyDim &dim : op->dims) {
        const Expr stride = global_is_src ? dim.src_stride : dim.dst_stride;
        size_t d = 0;
        while (d < view.size() && (matched[d] || !can_prove(stride == view[d].stride)))
            d++;
        if (d < view.size()) {
            dims[d] = dim;
            matched[d] = true;
        } else if (!is_const_one(simplify(dim.extent))) {
            return;
        }
    }
    Expr on_chip_next; // the on-chip stride of the next matched dim outwards
    for (size_t d = view.size(); d-- > 0;) {
        if (matched[d]) {
            on_chip_next = global_is_src ? dims[d].dst_stride : dims[d].src_stride;
            continue;
        }
        Expr on_chip = on_chip_next.defined() ? on_chip_next : Expr(1);
        Expr global = view[d].stride;
        dims[d] = {1, global_is_src ? on_chip : global, global_is_src ? global : on_chip};
    }
    op->dims = dims;
}

class RecognizeCopies : public IRMutator {
public:
    explicit RecognizeCopies(CompileContext &ctx) : ctx(ctx), out(ctx.of(ctx.output)) {}

private:
    using IRMutator::visit;
    CompileContext &ctx;
    const Directives out;
    int loop_depth = 0;
    int stores_out = 0;
    std::set<std::string> copied_in; // tiles this pass made copies into

    const KernelArg *arg(const std::string &name) const {
        for (const KernelArg &a : ctx.args) {
            if (a.name == name)
                return &a;
        }
        return nullptr; // a pass test that gives no tensor shapes
    }

    bool is_input(const std::string &name) const {
        return std::find(ctx.inputs.begin(), ctx.inputs.end(), name) != ctx.inputs.end();
    }

    Stmt visit(const ProducerConsumer *op) override {
        if (op->is_producer)
            produced.insert(op->name);
        if (!op->is_producer || op->name == ctx.output)
            return IRMutator::visit(op);
        const Directives d = ctx.of(op->name);
        // A copy Halide guards as a whole (a window that reads one row in some tiles and none in
        // the others: the loop of one iteration became an if) copies an empty box where the guard
        // fails, so that its waits and versions stay those of every tile.
        Stmt producer = op->body;
        Expr guard;
        while (const IfThenElse *i = producer.as<IfThenElse>()) {
            if (i->else_case.defined())
                break;
            const Expr c = remove_likelies(i->condition);
            guard = guard.defined() ? guard && c : c;
            producer = i->then_case;
        }
        Nest nest;
        const Load *load = nullptr;
        if (as_perfect_nest(producer, &nest))
            load = nest.store->value.as<Load>();
        bool copy = load && is_input(load->name) && load->type == nest.store->value.type() &&
                    nest.store->name == op->name;
        if (!copy) {
            if (d.async_copy) {
                throw Error(
                    where(op->name, "async_copy()") + op->name +
                    " is not a plain copy of an input (its definition computes or converts "
                    "values); async_copy applies to copy stages such as A.in(consumer) - the "
                    "DMA engine moves bytes, it does not convert types");
            }
            return IRMutator::visit(op);
        }
        if (loop_depth > 0)
            produced_in_loop.insert(op->name);
        copied_in.insert(op->name);
        ir::CopyOp c;
        if (!copy_box(nest, nest.store->index, load->index, &c)) {
            throw Error(where(op->name, d.async_copy ? "async_copy()" : "compute_at") + op->name +
                        " does not read an affine box of " + load->name +
                        ", so no DMA can copy it");
        }
        if (guard.defined()) {
            if (c.dims.empty())
                c.dims.push_back({1, 1, 1});
            c.dims.back().extent = select(guard, c.dims.back().extent, 0);
        }
        c.dst = op->name;
        c.src = load->name;
        conform_to_tensor(&c, arg(load->name), true);
        c.barrier = ir::full_barrier(op->name);
        c.slot = 0;
        Stmt body = Block::make(ir::make_copy(c), ir::make_wait({c.barrier, 0}));
        return ProducerConsumer::make(op->name, true, body);
    }

    Stmt visit(const For *op) override {
        Nest nest;
        // A loop spread over the cores is the tile loop, never part of a tile's store nest.
        bool tile_loop = is_core_loop(op->name);
        if (!tile_loop && as_perfect_nest(op, &nest) && nest.store->name == ctx.output)
            return store_out(nest);
        loop_depth++;
        push_loop(loops, op);
        Stmt s = IRMutator::visit(op);
        loops.pop(op->name);
        loop_depth--;
        return s;
    }
    LoopScope loops;

    Stmt visit(const Store *op) override {
        Nest nest;
        if (op->name == ctx.output && as_perfect_nest(op, &nest))
            return store_out(nest);
        return IRMutator::visit(op);
    }

    /** The output's store nest: through a staging tile unless it is a plain copy of an
     * on-chip buffer. */
    Stmt store_out(const Nest &nest) {
        const Store *st = nest.store;
        const Load *load = st->value.as<Load>();
        // On Hopper the accumulator is in registers and TMA stores from shared memory: always
        // stage. On Ascend the Fixpipe stores an MMA accumulator (L0C) to GM converting its type.
        // A tile copied in from DRAM is not stored straight back out (out = a): its versions
        // belong to the input's ring, so the store goes through a staging tile.
        const TargetLowering &target = lowering_of(ctx.target);
        bool direct = !target.always_stage_store && load && load->type == st->value.type() &&
                      !is_input(load->name) && load->name != ctx.output &&
                      !copied_in.count(load->name);
        if (target.store_casts_accumulator && !direct) {
            // A cast of an f32 accumulator to a float type is the Fixpipe's own; any other
            // epilogue runs on the vector cores of a mix kernel (AscendMix.h), staged like on
            // the other targets.
            const Cast *cast = st->value.as<Cast>();
            const Load *acc = cast ? cast->value.as<Load>() : nullptr;
            if (acc && ctx.of(acc->name).tile_mma && acc->type.is_float() &&
                cast->type.is_float()) {
                load = acc;
                direct = true;
            }
        }
        std::string source = direct ? load->name : ctx.output + "_stage";
        ir::CopyOp c;
        // The staging tile is laid out in loop order with the constant pitch of a full tile:
        // stage[sum (v - min) * stride], innermost first (a tail tile uses part of each row).
        // On Ascend its rows start on 32-byte blocks, like every UB tile's (AscendRows.h).
        Expr stage_index = 0;
        int64_t elements = 1;
        // One loop that does not step along the output's rows is a column: each element a row
        // of its own block.
        const int per_block =
            std::max(1, target.block_bytes / std::max(1, st->value.type().bytes()));
        const bool column = per_block > 1 && nest.loops.size() == 1 && [&] {
            Expr step = affine_step(st->index, nest.loops.back().name);
            return !step.defined() || !can_prove(step == 1);
        }();
        if (column)
            elements = per_block;
        for (auto l = nest.loops.rbegin(); l != nest.loops.rend(); ++l) {
            stage_index =
                stage_index + (Variable::make(Halide::Int(32), l->name) - l->min) * int(elements);
            int64_t bound = constant_upper_bound(l->extent, loops);
            if (!direct && bound < 0) {
                throw Error(where(ctx.output, "tile") + "the extent of loop " + l->name +
                            " has no constant bound, so its staging tile cannot be sized");
            }
            if (l == nest.loops.rbegin() && nest.loops.size() > 1 && !column)
                bound = (bound + per_block - 1) / per_block * per_block;
            elements *= std::max<int64_t>(bound, 1);
        }
        stage_index = simplify(stage_index);
        if (!copy_box(nest, st->index, direct ? load->index : stage_index, &c)) {
            throw Error(where(ctx.output, "async_copy()") + "the store of " + ctx.output +
                        " does not write an affine box");
        }
        c.dst = ctx.output;
        c.src = source;
        conform_to_tensor(&c, arg(ctx.output), false);
        c.barrier = ir::empty_barrier(source);
        c.slot = 0;
        stores_out++;
        Stmt store = ir::make_copy(c);
        if (!out.async_copy)
            store = Block::make(store, ir::make_wait({c.barrier, 0}));
        if (direct)
            return store;
        Stmt compute =
            Store::make(source, st->value, stage_index, st->param, st->predicate, st->alignment);
        for (auto l = nest.loops.rbegin(); l != nest.loops.rend(); ++l) {
            compute = For::make(l->name, l->min, l->extent, ForType::Serial,
                                Halide::DeviceAPI::None, compute);
        }
        return Allocate::make(source, st->value.type(), Halide::MemoryType::Auto,
                              {Expr(int(elements))}, const_true(), Block::make(compute, store));
    }

    bool computed_inline(const std::string &f) const {
        auto it = ctx.functions.find(f);
        if (it == ctx.functions.end())
            return false;
        try {
            return it->second.schedule().compute_level().is_inlined();
        } catch (const Halide::CompileError &) {
            return false;
        } catch (const Halide::InternalError &) {
            return false;
        }
    }

    bool computed_at_root(const std::string &f) const {
        auto it = ctx.functions.find(f);
        if (it == ctx.functions.end())
            return false;
        Halide::LoopLevel level = it->second.schedule().compute_level();
        try {
            return level.is_root();
        } catch (const Halide::CompileError &) {
            return false; // not locked: Halide never resolved it, so it is not the root
        } catch (const Halide::InternalError &) {
            return false;
        }
    }

public:
    std::set<std::string> produced, produced_in_loop, read;
    Expr visit(const Load *op) override {
        read.insert(op->name);
        return IRMutator::visit(op);
    }
    void check_done() {
        for (const std::string &f : ctx.funcs) {
            if (f == ctx.output || !ctx.of(f).async_copy)
                continue;
            if (!produced.count(f) && !read.count(f) && !computed_inline(f)) {
                // At this shape nothing depends on it (a window that reads no row): at another
                // the same schedule copies.
                ctx.notes.push_back(f + " is never read at this shape (Halide found that nothing "
                                        "depends on it): nothing to copy");
                continue;
            }
            if (!produced.count(f)) {
                throw Error(where(f, "async_copy()") + f +
                            " is computed inline, so it has no storage to copy into; "
                            "schedule it with compute_at(consumer, var)");
            }
            // A copy outside every loop is fine if Halide removed a loop of one iteration (or left
            // a partitioned tail); it is an error if the Func is computed at the root.
            if (!produced_in_loop.count(f) && computed_at_root(f)) {
                throw Error(where(f, "async_copy()") + f +
                            " is computed outside every loop of its consumer, so there is nothing "
                            "to overlap; "
                            "compute it inside a loop with compute_at(consumer, var)");
            }
        }
        if (stores_out == 0) {
            throw Error("Func '" + ctx.output +
                        "': no store of the output was found after lowering");
        }
    }
};

} // namespace

Stmt recognize_tile_copies(const Stmt &s, CompileContext &ctx) {
    RecognizeCopies r(ctx);
    Stmt result = r.mutate(s);
    r.check_done();
    return result;
}

} // namespace tandem::lower
