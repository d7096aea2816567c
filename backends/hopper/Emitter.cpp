#include "Emitter.h"

#include "tandem/Fp8.h"

#include "CodeGen.h"
#include "Host.h"
#include "Plan.h"
#include "common/Library.h"
#include "tandem/AsyncIR.h"

#include <optional>
#include <set>
#include <sstream>

namespace tandem::hopper_backend {

using namespace Halide::Internal;

namespace {

// ---------------------------------------------------------------------------------------------
// What a part of the control stream holds
// ---------------------------------------------------------------------------------------------

bool is_compute(const Stmt &op) {
    ir::MmaOp m;
    ir::VectorOp v;
    Stmt body;
    return ir::as_mma(op, &m) || ir::as_vector_op(op, &v, &body);
}

class UsesWarpgroup : public IRVisitor {
public:
    bool found = false;

private:
    using IRVisitor::visit;
    void visit(const Call *op) override {
        found = found || ir::is_warpgroup(op);
        IRVisitor::visit(op);
    }
};

bool uses_warpgroup(const Expr &e) {
    UsesWarpgroup u;
    e.accept(&u);
    return u.found;
}

bool contains_tma_load(const Stmt &s, const Kernel &k) {
    bool found = false;
    for_each_op(s, [&](const Stmt &op) {
        ir::CopyOp c;
        if (ir::as_copy(op, &c) && k.arg(c.src))
            found = true;
    });
    return found;
}

bool contains_compute(const Stmt &s) {
    bool found = false;
    for_each_op(s, [&](const Stmt &op) { found = found || is_compute(op); });
    return found;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The control stream (CodeGen.h; the element nests are ElementCode.cpp)
// ---------------------------------------------------------------------------------------------

void CodeGen::role_body(const Stmt &s) {
    compute_role = contains_compute(s);
    // The consumer role of a cooperative warp-specialized kernel, or a cooperative kernel's
    // one role (its software pipeline on two warpgroups).
    cooperative_role = kernel.consumer_warpgroups > 1 && (kernel.warpgroups == 1 || compute_role);
    synced =
        true; // the kernel's __syncthreads; no thread of the role has touched shared memory yet
    pending_sync = false;
    // A producer that only issues TMA loads is walked by its elected thread alone: the others
    // give up their registers (setmaxnreg is warpgroup-wide) and leave, so no thread spins
    // on the empty barriers a lap behind. A role with thread copies needs all its threads.
    lone_producer = kernel.warpgroups > 1 && !compute_role && contains_tma_load(s, kernel);
    bool setmaxnreg = false;
    for_each_op(s, [&](const Stmt &op) {
        ir::CopyOp c;
        int registers = 0;
        bool increase = false;
        if (ir::as_copy(op, &c) && plan.tiles.count(kernel.arg(c.src) ? c.dst : c.src) &&
            plan.tiles.at(kernel.arg(c.src) ? c.dst : c.src).threads())
            lone_producer = false;
        setmaxnreg = setmaxnreg || ir::as_setmaxnreg(op, &registers, &increase);
    });
    if (lone_producer && !setmaxnreg)
        leave_unless_elected();
    stmt(s);
    lone_producer = false;
}

void CodeGen::stmt(const Stmt &s) {
    if (!s.defined())
        return;
    if (const For *f = s.as<For>())
        return loop(f);
    if (const LetStmt *l = s.as<LetStmt>())
        return let(s, l);
    if (const IfThenElse *i = s.as<IfThenElse>())
        return branch(i);
    if (const Block *b = s.as<Block>()) {
        if (ir::is_fence_proxy_async(b->first) && thread_store(b->rest)) {
            // The threads read the tile through the generic proxy: no fence.proxy.async.
            stmt(b->rest);
            return;
        }
        stmt(b->first);
        stmt(b->rest);
        return;
    }
    if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
        os << line() << "// " << (pc->is_producer ? "produce " : "consume ") << pc->name << "\n";
        return stmt(pc->body);
    }
    if (s.as<Evaluate>())
        return intrinsic(s);
    internal_error << "hopper emitter: unexpected statement in the control stream\n" << s << "\n";
}

void CodeGen::sync() {
    if (cooperative_role)
        os << line() << "hopper::consumers_sync<" << role_threads()
           << ">(); // the cooperative consumer warpgroups\n";
    else
        os << line() << "hopper::warpgroup_sync(warpgroup);\n";
    synced = true;
    pending_sync = false;
}

bool CodeGen::thread_store(const Stmt &s) const {
    Stmt first = s;
    while (const Block *b = first.as<Block>())
        first = b->first;
    ir::CopyOp c;
    return ir::as_copy(first, &c) && kernel.arg(c.dst) && plan.tiles.count(c.src) &&
           plan.tiles.at(c.src).threads();
}

void CodeGen::loop(const For *f) {
    flush();
    if (ends_with(f->name, ".prologue"))
        os << line() << "// prologue: start the first copies of the pipeline\n";
    bool pure = !contains_compute(f->body);
    if (compute_role && pure && !synced && contains_tma_load(f->body, kernel)) {
        os << line() << "// the warpgroup is done reading the versions these loads overwrite\n";
        sync();
    }
    bool before = synced;
    loop_depth++;
    std::string v = c_name(f->name);
    open("for (int " + v + " = " + expr(f->min) + ", " + v + "_end = " + v + " + " +
         expr(f->extent) + "; " + v + " < " + v + "_end; " + v + "++) {");
    scopes.back().insert(v);
    synced = pure && before;
    const bool from_zero = expr.nonnegative(f->min) && expr.nonnegative_vars.insert(f->name).second;
    stmt(f->body);
    if (from_zero)
        expr.nonnegative_vars.erase(f->name);
    flush();
    close();
    loop_depth--;
    synced = pure && before;
}

void CodeGen::let(const Stmt &s, const LetStmt *l) {
    ir::VectorOp v;
    Stmt body;
    if (ir::as_vector_op(s, &v, &body))
        return vector_op(v, body);
    std::string name = c_name(l->name);
    bool counter = plan.counters.count(l->name) > 0;
    bool advanced = false;
    for_each_op(l->body, [&](const Stmt &op) {
        std::string c;
        advanced = advanced || (ir::as_advance(op, &c) && c == l->name);
    });
    if (!stmt_uses_var(l->body, l->name) && !advanced)
        return stmt(l->body); // this role never uses it
    bool braces = scopes.back().count(name) > 0;
    if (braces)
        open("{");
    if (ends_with(l->name, ".iteration")) {
        os << line()
           << "// steady state: issue the copies for a later iteration, wait for this one, "
              "compute\n";
    } else if (ends_with(l->name, ".slot")) {
        os << line() << "// stage: the version of the ring this step uses\n";
    }
    if (counter)
        os << line() << "// advanced by this role (tandem_advance)\n";
    os << line() << (counter ? "" : "const ") << expr.type_name(l->value.type()) << " " << name
       << " = " << expr(l->value) << ";\n";
    scopes.back().insert(name);
    // A counter only advances (+= 1) from its first value.
    const bool positive =
        expr.nonnegative(l->value) && expr.nonnegative_vars.insert(l->name).second;
    stmt(l->body);
    if (positive)
        expr.nonnegative_vars.erase(l->name);
    if (braces)
        close();
}

void CodeGen::branch(const IfThenElse *i) {
    flush();
    if (uses_warpgroup(i->condition))
        return roles(i);
    if (compute_role && !synced &&
        (contains_tma_load(i->then_case, kernel) || contains_tma_load(i->else_case, kernel))) {
        os << line() << "// the warpgroup is done reading the versions these loads overwrite\n";
        sync();
    }
    bool before = synced;
    open("if (" + condition(i->condition) + ") {");
    stmt(i->then_case);
    flush();
    bool after_then = synced;
    if (i->else_case.defined()) {
        synced = before;
        close("} else {");
        scopes.emplace_back();
        indent++;
        stmt(i->else_case);
        flush();
        synced = synced && after_then;
    } else {
        synced = before && after_then;
    }
    close();
}

void CodeGen::role_comment(const Stmt &s, const std::string &who) {
    bool loads = contains_tma_load(s, kernel), compute = contains_compute(s);
    std::string what = compute
                           ? "consumer: waits for full versions, computes, releases them, stores"
                       : loads ? "producer: one elected thread issues the TMA loads"
                               : "no work";
    os << line() << "// ---- " << who << ": " << what << " ----\n";
}

void CodeGen::roles(const IfThenElse *i) {
    open("if (" + condition(i->condition) + ") {");
    role_comment(i->then_case, CExpr::halide_text(i->condition));
    role_body(i->then_case);
    flush();
    Stmt rest = i->else_case;
    while (rest.defined()) {
        const IfThenElse *next = rest.as<IfThenElse>();
        if (next && uses_warpgroup(next->condition)) {
            close("} else if (" + condition(next->condition) + ") {");
            scopes.emplace_back();
            indent++;
            role_comment(next->then_case, CExpr::halide_text(next->condition));
            role_body(next->then_case);
            flush();
            rest = next->else_case;
        } else {
            close("} else {");
            scopes.emplace_back();
            indent++;
            role_comment(rest, "the other warpgroups");
            role_body(rest);
            flush();
            rest = Stmt();
        }
    }
    close();
    compute_role = false;
    cooperative_role = false;
}

bool CodeGen::is_mbarrier(const std::string &name) const {
    for (const BarrierDecl &b : kernel.barriers) {
        if (b.name == name)
            return true;
    }
    return false;
}

void CodeGen::intrinsic(const Stmt &s) {
    ir::CopyOp c;
    ir::WaitOp w;
    ir::ArriveOp a;
    ir::MmaOp m;
    Expr bytes;
    std::string counter;
    int registers = 0, pending = 0;
    bool increase = false;
    if (ir::as_expect(s, &a, &bytes)) {
        if (compute_role && !synced) {
            os << line() << "// the warpgroup is done reading the versions these loads overwrite\n";
            sync();
        }
        auto it = plan.expect_bytes.find(a.barrier);
        internal_assert(it != plan.expect_bytes.end())
            << "hopper emitter: nothing lands on " << a.barrier << "\n";
        os << line() << "// expect the full boxes (" << it->second << " bytes) on " << a.barrier;
        if (!proven(bytes == Halide::Expr(int(it->second))))
            os << "; a tail tile lands zero-filled at full size";
        os << "\n"
           << line() << "if (elected) hopper::mbarrier_arrive_expect_tx("
           << barrier(a.barrier, a.slot) << ", " << it->second << ");\n";
    } else if (ir::as_copy(s, &c)) {
        copy(c, s.get());
    } else if (ir::as_wait(s, &w)) {
        if (is_mbarrier(w.barrier) && w.parity.defined()) {
            os << line() << "hopper::mbarrier_wait_parity(" << barrier(w.barrier, w.slot) << ", "
               << expr(w.parity) << "); // parity from the ring's lap\n";
        } else if (is_mbarrier(w.barrier)) {
            os << line() << "hopper::mbarrier_wait(" << c_name(w.barrier) << ", " << expr(w.slot)
               << ", " << c_name(w.barrier) << "_phase);\n";
        } else {
            // The empty barrier of a store source: this thread's bulk stores finished reading
            // it.
            bool store_empty = false;
            for (const std::string &b : plan.store_sources)
                store_empty = store_empty || w.barrier == ir::empty_barrier(b);
            internal_assert(store_empty) << "hopper emitter: wait on " << w.barrier
                                         << ", neither an mbarrier nor a TMA store's\n";
            // Versions by tile parity, inside the tile loop: the stores of the other versions
            // (one bulk group each, or one per column block) may still be reading theirs.
            // Ping-pong consumers store only their own version; the drain waits for all.
            const std::string source = w.barrier.substr(0, w.barrier.rfind('.'));
            const Tile &t = plan.tiles.at(source);
            const bool by_consumer = kernel.warpgroups > 2 && kernel.consumer_warpgroups == 1;
            const int64_t groups =
                t.ring_blocks ? t.layout[0] * t.buffer->type.bytes() / swizzle_bytes : 1;
            const int64_t pending =
                loop_depth > 0 && !by_consumer ? (t.buffer->slots - 1) * groups : 0;
            os << line() << "// " << w.barrier
               << ": the TMA stores out of the tile finished reading it\n";
            if (pending > 0)
                os << line() << "if (elected) hopper::bulk_wait_group_read<" << pending
                   << ">(); // the stores of the other versions may still read theirs\n";
            else
                os << line() << "if (elected) hopper::bulk_wait_group_read_0();\n";
            pending_sync = true;
            synced = false;
        }
    } else if (ir::as_arrive(s, &a) && cooperative_role) {
        // Each cooperative warpgroup releases what it read (the barrier counts one arrival per
        // warpgroup): no barrier across them.
        flush();
        os << line() << "hopper::warpgroup_sync(warpgroup);\n";
        os << line() << "if (thread_in_warpgroup == 0) " << arrive(a) << " // arrive on "
           << a.barrier << (a.cluster > 1 ? " of every CTA of the cluster" : "")
           << " for this warpgroup\n";
    } else if (ir::as_arrive(s, &a)) {
        flush();
        if (!synced)
            sync();
        os << line() << "if (elected) " << arrive(a) << " // arrive on " << a.barrier
           << (a.cluster > 1 ? " of every CTA of the cluster" : "") << " for the warpgroup\n";
    } else if (ir::as_mma(s, &m)) {
        mma(m);
    } else if (std::string acc; ir::as_mma_wait(s, &acc, &pending)) {
        os << line() << "hopper::wgmma_wait_group<" << pending << ">();"
           << (pending ? " // the MMA just issued stays in flight\n" : "\n");
        os << line() << "hopper::fence_fragment(" << c_name(acc) << ");\n";
        synced = false;
    } else if (ir::is_fence_proxy_async(s)) {
        os << line()
           << "hopper::fence_proxy_async_shared(); // this thread's smem writes, before the "
              "async proxy (a TMA store, a wgmma operand) reads them\n";
        // Then a barrier before the async proxy reads what other threads wrote: a barrier
        // passed before the fence does not order their fenced writes.
        pending_sync = true;
        synced = false;
    } else if (ir::as_advance(s, &counter)) {
        os << line() << c_name(counter) << " += 1;\n";
    } else if (ir::as_setmaxnreg(s, &registers, &increase)) {
        os << line() << "hopper::setmaxnreg_" << (increase ? "inc" : "dec") << "<" << registers
           << ">();\n";
        if (lone_producer && !increase)
            leave_unless_elected();
    } else {
        const Evaluate *e = s.as<Evaluate>();
        internal_assert(e && is_const(e->value)) << "hopper emitter: unexpected op " << s << "\n";
    }
}

std::string CodeGen::address(const std::string &buffer, const Expr &offset) {
    const Tile &t = plan.tiles.at(buffer);
    const std::string bytes = std::to_string(t.buffer->type.bytes());
    if (!t.rebased())
        return c_name(buffer) + "_address + uint32_t(" + expr(offset) + ") * " + bytes;
    Expr within;
    Expr version = version_of(t, offset, &within);
    if (t.dynamic_layout && !is_const_zero(within)) {
        throw Error("hopper: a copy or MMA reaches into " + buffer +
                    " inside a version, whose layout differs on the GPU (full-tile rows)");
    }
    std::string r = c_name(buffer) + "_address";
    if (!is_const_zero(version))
        r += " + uint32_t(" + expr(version) + ") * " + std::to_string(t.slot_bytes);
    if (!is_const_zero(within))
        r += " + uint32_t(" + expr(within) + ") * " + bytes;
    return r;
}

std::string CodeGen::int_list(const std::vector<std::string> &v) {
    std::string s = "{";
    for (size_t i = 0; i < v.size(); i++)
        s += (i ? ", " : "") + v[i];
    return s + "}";
}

void CodeGen::thread_copy(const ir::CopyOp &c, bool load, const std::string &arg,
                          const std::string &buffer) {
    const Tile &tile = plan.tiles.at(buffer);
    flush();
    if (!synced)
        sync(); // the warpgroup is done with the version (a load) or wrote it (a store)
    os << line() << "// thread copy " << c.src << " -> " << c.dst << " by the warpgroup's "
       << "threads (TMA cannot: " << tile.thread_copy << ")"
       << (load ? "; completes on " + c.barrier : "") << "\n";
    const std::string global =
        c_name(arg) + "_global + (" + expr(load ? c.src_offset : c.dst_offset) + ")";
    if (cooperative_role)
        open("if (consumer == 0) { // one of the cooperative warpgroups copies");
    if (tile.kind != TileKind::Plain) {
        // A wgmma tile: swizzled, zero-filled past the copy (tile.role: copy dim -> layout
        // dim; a batch dim past the matrix's two takes one element, at the copy's offset).
        std::string extent[2] = {"1", "1"}, stride[2] = {"0", "0"};
        for (size_t d = 0; d < c.dims.size(); d++) {
            if (tile.role[d] >= 2)
                continue;
            extent[tile.role[d]] = expr(c.dims[d].extent);
            stride[tile.role[d]] = expr(c.dims[d].src_stride);
        }
        os << line() << "hopper::thread_copy_swizzled(" << address(buffer, c.dst_offset) << ", "
           << tile.layout[0] << ", " << tile.layout[1] << ", " << global << ", " << extent[0]
           << ", " << extent[1] << ", " << stride[0] << ", " << stride[1]
           << ", thread_in_warpgroup);\n";
    } else {
        std::vector<std::string> extents, dst_strides, src_strides;
        for (const ir::CopyDim &d : c.dims) {
            extents.push_back(expr(d.extent));
            dst_strides.push_back(expr(d.dst_stride));
            src_strides.push_back(expr(d.src_stride));
        }
        const std::string smem =
            c_name(buffer) + " + (" + expr(load ? c.dst_offset : c.src_offset) + ")";
        os << line() << "hopper::thread_copy" << (load ? "" : "<hopper::thread_store_batch>") << "("
           << (load ? smem : global) << ", " << (load ? global : smem) << ", " << int_list(extents)
           << ", " << int_list(dst_strides) << ", " << int_list(src_strides)
           << ", thread_in_warpgroup);\n";
    }
    if (load) {
        os << line() << "hopper::thread_copy_complete(" << barrier(c.barrier, c.slot) << ", "
           << tile.tx_bytes << ", warpgroup, elected);\n";
    }
    if (cooperative_role)
        close();
    synced = load && !cooperative_role;
}

std::string CodeGen::divisor(const Expr &d) {
    // Made of runtime extents alone: a constant once they are.
    std::map<std::string, Expr> ones;
    for (const std::string &name : kernel.runtime_extent_names())
        ones[name] = 1;
    if (!is_const(Halide::Internal::simplify(Halide::Internal::substitute(ones, d))))
        return "";
    const std::string text = expr(d);
    for (const auto &[code, name] : divisors) {
        if (code == text)
            return name;
    }
    const Halide::Internal::Variable *v = d.as<Halide::Internal::Variable>();
    divisors.emplace_back(text, v ? c_name(v->name) + "_divisor"
                                  : "divisor_" + std::to_string(divisors.size()));
    return divisors.back().second;
}

std::string CodeGen::quotient(const std::string &x, const Expr &d) {
    if (is_const_one(d))
        return x;
    const std::string prepared = is_const(d) ? "" : divisor(d);
    return prepared.empty() ? x + " / " + expr(d) : "hopper::fast_div(" + x + ", " + prepared + ")";
}

std::string CodeGen::remainder(const std::string &x, const Expr &d) {
    const std::string prepared = is_const(d) ? "" : divisor(d);
    return prepared.empty() ? x + " % " + expr(d) : "hopper::fast_mod(" + x + ", " + prepared + ")";
}

void CodeGen::copy(const ir::CopyOp &c, const IRNode *node) {
    bool load = kernel.arg(c.src) != nullptr;
    std::string arg = load ? c.src : c.dst, buffer = load ? c.dst : c.src;
    if (plan.tiles.at(buffer).threads())
        return thread_copy(c, load, arg, buffer);
    const TensorMap &map = plan.map(arg, buffer, load);
    std::string boxes = brace_list(map.box);
    if (map.blocks > 1)
        boxes +=
            " x " + std::to_string(map.blocks) + (map.swizzle ? " column blocks" : " side by side");
    const bool ring_store = !load && deferred.count(buffer);
    const int ring = plan.tiles.at(buffer).ring_blocks;
    if (load) {
        if (compute_role && !synced)
            sync();
        os << line() << "// TMA load " << arg << " -> " << buffer << " (box " << boxes
           << "), completes on " << c.barrier
           << (c.multicast > 1 ? " of each CTA of the cluster: the boxes dealt over the ranks, "
                                 "each multicast to all"
                               : "")
           << "\n";
    } else if (ring_store) {
        // The epilogue and the store one column block at a time, through the ring's blocks.
        const Epilogue e = deferred.at(buffer);
        deferred.erase(buffer);
        flush();
        os << line() << "// epilogue and TMA store of " << buffer << " -> " << arg
           << " one column block (box " << brace_list(map.box) << ") at a time, through a ring of "
           << ring << " column blocks\n";
        os << line() << "#pragma unroll\n";
        open("for (int column_block = 0; column_block < " + std::to_string(map.blocks) +
             "; column_block++) {");
        open("if (column_block >= " + std::to_string(ring) + ") {");
        os << line() << "// the store " << ring
           << " blocks back finished reading this block's slot\n";
        os << line() << "if (elected) hopper::bulk_wait_group_read<" << ring - 1 << ">();\n";
        sync();
        close();
        column_block = true;
        epilogue(e.op, e.nest, e.acc);
        column_block = false;
        os << line()
           << "hopper::fence_proxy_async_shared(); // this thread's smem writes, before the "
              "TMA store reads them\n";
        sync();
    } else {
        flush();
        if (!synced)
            sync();
        os << line() << "// TMA store " << buffer << " -> " << arg << " (box " << boxes
           << "), in this thread's bulk group\n";
    }
    open("if (elected) {");
    if (load && c.multicast > 1)
        os << line() << "int box = 0; // this rank issues boxes rank, rank + " << c.multicast
           << ", ...\n";
    // An offset known to be >= 0 is unsigned: its coordinates divide without sign fix-ups.
    const Expr &offset = load ? c.src_offset : c.dst_offset;
    os << line() << "const " << (expr.nonnegative(offset) ? "uint32_t" : "int")
       << " offset = " << expr(offset) << "; // element of " << arg << "\n";
    // Tail tiles: the box is full size and the part past the tile must lie past the edge.
    auto checks = plan.tail_checks.find(node);
    if (checks != plan.tail_checks.end()) {
        for (const TailCheck &t : checks->second) {
            checks_tails = true;
            os << line() << "hopper::check_tail(tails_ok, " << expr(c.dims[t.dim].extent) << ", "
               << t.reach << ", "
               << (t.outermost ? quotient("offset", t.view_stride)
                               : remainder(quotient("offset", t.view_stride), t.view_extent))
               << ", " << expr(t.edge) << ");\n";
        }
    }
    std::string smem = address(buffer, load ? c.dst_offset : c.src_offset);
    // Coordinates innermost first; a dim of extent 1 is always at 0.
    auto coordinates = [&](const std::string &block) { // block: the offset along dim 0
        std::string coords;
        for (size_t d = 0; d < map.extents.size(); d++) {
            std::string coordinate = "0";
            if (!is_const_one(map.extents[d])) {
                coordinate = quotient("offset", map.strides[d]);
                if (d + 1 < map.extents.size())
                    coordinate = remainder(coordinate, map.extents[d]);
            }
            if (d == 0 && !block.empty())
                coordinate = "(" + coordinate + ") + " + block;
            if (d == 1 && map.rows > 1)
                coordinate = "(" + coordinate + ") + row" +
                             (map.row_step > 1 ? " * " + std::to_string(map.row_step) : "");
            coords += ", " + coordinate;
        }
        return coords;
    };
    auto issue = [&](const std::string &destination, const std::string &coords,
                     const std::string &tensor_map) {
        if (load && c.multicast > 1) {
            os << line() << "if (box++ % " << c.multicast
               << " == int(hopper::cluster_rank())) hopper::tma_load_multicast(" << destination
               << ", &" << tensor_map << ", " << barrier(c.barrier, c.slot) << ", 0x" << std::hex
               << ((1 << c.multicast) - 1) << std::dec << coords << ");\n";
        } else if (load) {
            os << line() << "hopper::tma_load(" << destination << ", &" << tensor_map << ", "
               << barrier(c.barrier, c.slot) << coords << ");\n";
        } else {
            os << line() << "hopper::tma_store(&" << tensor_map << ", " << destination << coords
               << ");\n";
        }
    };
    if (map.rows > 1) {
        // A row of boxes per row of the tile, each row at the tile's row pitch.
        open("for (int row = 0; row < " + std::to_string(map.rows) + "; row++) {");
        smem += " + row * " + std::to_string(map.row_bytes);
    }
    const int full_blocks = map.last_box ? map.blocks - 1 : map.blocks;
    if (ring_store) {
        issue(smem + " + (column_block % " + std::to_string(ring) + ") * " +
                  std::to_string(map.block_bytes),
              coordinates("column_block * " + std::to_string(map.box[0])), map.name);
    } else if (full_blocks > 4) {
        open("for (int block = 0; block < " + std::to_string(full_blocks) + "; block++) {");
        issue(smem + " + block * " + std::to_string(map.block_bytes),
              coordinates("block * " + std::to_string(map.box[0])), map.name);
        close();
    } else {
        for (int block = 0; block < full_blocks; block++) {
            issue(smem + (block > 0 ? " + " + std::to_string(block * map.block_bytes) : ""),
                  coordinates(block > 0 ? std::to_string(block * map.box[0]) : ""), map.name);
        }
    }
    if (map.last_box && !ring_store) {
        issue(smem + " + " + std::to_string(full_blocks * map.block_bytes),
              coordinates(std::to_string(full_blocks * map.box[0])), map.last_name);
    }
    if (map.rows > 1)
        close();
    if (!load)
        os << line() << "hopper::bulk_commit_group();\n";
    close();
    if (ring_store)
        close(); // the column blocks
}

std::string CodeGen::arrive(const ir::ArriveOp &a) {
    if (a.cluster > 1)
        return "for (uint32_t rank = 0; rank < " + std::to_string(a.cluster) +
               "; rank++) hopper::mbarrier_arrive_cluster(" + barrier(a.barrier, a.slot) +
               ", rank);";
    return "hopper::mbarrier_arrive(" + barrier(a.barrier, a.slot) + ");";
}

std::string CodeGen::open_blocks(const Accumulator &a) {
    os << line() << "#pragma unroll\n";
    if (!cooperative_role) {
        open("for (int m64 = 0; m64 < " + std::to_string(a.m / 64) + "; m64++) {");
        return "m64";
    }
    open("for (int block = 0; block < " + std::to_string(blocks(a)) + "; block++) {");
    os << line() << "const int m64 = " << kernel.consumer_warpgroups
       << " * block + consumer; // this warpgroup's blocks alternate with the other's\n";
    if (a.m / 64 % kernel.consumer_warpgroups != 0)
        open("if (m64 < " + std::to_string(a.m / 64) +
             ") { // the tile's last block has one owner");
    return "block";
}

void CodeGen::mma(const ir::MmaOp &m) {
    flush();
    last_mma[m.acc] = m;
    const Accumulator &acc = plan.accumulators.at(m.acc);
    const Tile &a = plan.tiles.at(m.a), &b = plan.tiles.at(m.b);
    for (auto [name, offset, tile] :
         {std::tuple{m.a, m.a_offset, &a}, std::tuple{m.b, m.b_offset, &b}}) {
        if (!proven(offset % Halide::Expr(int(tile->buffer->slot_elements)) == 0)) {
            throw Error("hopper: the MMA into " + m.acc + " reads " + name +
                        " inside a version; wgmma tiles start at a version");
        }
    }
    const int64_t a_blocks_bytes = swizzle_bytes * acc.m, b_block_bytes = swizzle_bytes * acc.k;
    // Each wgmma takes 32 bytes of K: 16 bf16 or f16 (k16 steps), 32 int8 or FP8 (k32 steps);
    // four steps fill a 128-byte swizzle row. (The N- and M-major layouts are 16-bit only.)
    const bool eight_bit = a.buffer->type.bits() == 8;
    const int64_t step_k = 32 / a.buffer->type.bytes();
    const std::string k = "k" + std::to_string(step_k);
    os << line() << "// MMA " << m.acc << " += " << m.a << " * " << m.b << ": the full " << acc.m
       << " x " << acc.n << " x " << acc.k << " tile, " << acc.k / step_k << " " << k
       << " steps of " << acc.m / 64 << " m64n" << acc.n << " wgmma\n";
    os << line() << "hopper::fence_fragment(" << c_name(m.acc) << ");\n";
    os << line() << "hopper::wgmma_fence();\n";
    open("{");
    os << line() << "const uint32_t a_tile = " << address(m.a, m.a_offset) << ";\n";
    os << line() << "const uint32_t b_tile = " << address(m.b, m.b_offset) << ";\n";
    os << line() << "#pragma unroll\n";
    open("for (int " + k + " = 0; " + k + " < " + std::to_string(acc.k / step_k) + "; " + k +
         "++) {");
    if (acc.b_k_major) {
        os << line() << "// B, K-major: " << acc.n
           << " rows of 128 B per wgmma, SBO = 1024 B per 8 rows; " << k
           << " = 32 B inside a 128-byte block\n";
        os << line() << "const uint64_t b_descriptor = hopper::matrix_descriptor_128B(b_tile + ("
           << k << " / 4) * " << swizzle_bytes * acc.n << " + (" << k << " % 4) * 32, 16, 1024);\n";
    } else {
        os << line() << "// B, N-major: 16 k-rows of 128 B per step; LBO = " << b_block_bytes
           << " B between 64-column blocks, SBO = 1024 B per 8 k-rows\n";
        os << line()
           << "const uint64_t b_descriptor = hopper::matrix_descriptor_128B(b_tile + k16 * "
           << 16 * swizzle_bytes << ", " << b_block_bytes << ", 1024);\n";
    }
    const std::string block = open_blocks(acc);
    if (acc.a_k_major) {
        os << line() << "// A, K-major: 64 rows of 128 B per wgmma, SBO = 1024 B per 8 rows; " << k
           << " = 32 B inside a 128-byte block\n";
        os << line() << "const uint64_t a_descriptor = hopper::matrix_descriptor_128B(a_tile + ("
           << k << " / 4) * " << a_blocks_bytes << " + m64 * " << 64 * swizzle_bytes << " + (" << k
           << " % 4) * 32, 16, 1024);\n";
    } else {
        const int64_t a_block_bytes = swizzle_bytes * acc.k; // one 64-row block of M, K rows
        os << line() << "// A, M-major (tnspA): 16 k-rows of 128 B per step in block m64 of "
           << a_block_bytes << " B; SBO = 1024 B per 8 k-rows\n";
        os << line()
           << "const uint64_t a_descriptor = hopper::matrix_descriptor_128B(a_tile + m64 * "
           << a_block_bytes << " + k16 * " << 16 * swizzle_bytes << ", " << a_block_bytes
           << ", 1024);\n";
    }
    if (eight_bit && fp8::is_fp8(a.buffer->type)) { // both K-major (the plan's check)
        auto format = [](const Tile &t) {
            return t.buffer->type == fp8::e4m3() ? "hopper::E4m3" : "hopper::E5m2";
        };
        os << line() << "hopper::wgmma_fp8<" << acc.n << ", " << format(a) << ", " << format(b)
           << ">(" << c_name(m.acc) << "[" << block << "], a_descriptor, b_descriptor);\n";
    } else if (eight_bit) {
        os << line() << "hopper::wgmma_s8<" << acc.n << ">(" << c_name(m.acc) << "[" << block
           << "], a_descriptor, b_descriptor);\n";
    } else {
        const bool f16 = !a.buffer->type.is_bfloat(); // the plan took bf16 or f16 operands
        os << line() << (f16 ? "hopper::wgmma_f16<" : "hopper::wgmma_bf16<") << acc.n << ", "
           << (acc.b_k_major ? "hopper::KMajorB" : "hopper::NMajorB")
           << (acc.a_k_major ? "" : ", hopper::MMajorA") << ">(" << c_name(m.acc) << "[" << block
           << "], a_descriptor, b_descriptor);\n";
    }
    close_blocks(acc);
    close();
    close();
    os << line() << "hopper::wgmma_commit_group();\n";
    synced = false;
}

// ---------------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------------

namespace {

/** One variant of a kernel (a plan) as CUDA: the kernel `fn` and its launcher (Host.h). */
struct Variant {
    std::string notes, code; // the file's leading comment, the kernel and its launcher
    int64_t register_floor = 0;
};

Variant emit_variant(const Kernel &kernel, const std::string &fn, const Plan &plan) {
    // Cooperative consumers: each consumer role runs on kernel.consumer_warpgroups warpgroups.
    const int sharing = kernel.warpgroups > 1 ? kernel.consumer_warpgroups : 1;
    const int threads = cta_threads(kernel);
    const int64_t dynamic_bytes = plan.shared_bytes + swizzle_atom_bytes;

    CodeGen body(kernel, plan);
    body.indent = 1;
    if (kernel.warpgroups == 1)
        body.role_body(kernel.body);
    else
        body.stmt(kernel.body);

    // setmaxnreg.inc blocks until the CTA's pool holds the registers asked for, and the pool is
    // what the launch allocated (threads x ptxas's count): a count below this floor would hang.
    const int64_t register_floor = hopper_backend::register_floor(kernel);
    Variant variant;
    variant.register_floor = register_floor;
    std::ostringstream notes;
    notes << "// Generated by Tandem for Hopper (sm_90a): kernel " << kernel.name << ".\n"
          << "// " << kernel.grid << " CTAs of " << threads / warpgroup_threads
          << " warpgroup(s); roles meet only at mbarriers.\n"
          << "// Build: nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I "
             "backends/hopper/runtime\n";
    for (const std::string &n : kernel.notes)
        notes << "//   " << n << "\n";
    // The lowering counts the tiles' data; the plan lays them out as TMA boxes and wgmma tiles.
    notes << "// shared memory as laid out here: " << plan.shared_bytes
          << " bytes of tiles (boxes and swizzled tiles whole), "
          << launch_shared_bytes(kernel, plan)
          << " per CTA with the base's alignment, the mbarriers and the reduction scratch\n";
    if (register_floor)
        notes << "// setmaxnreg floor: " << register_floor
              << " registers per thread (the roles ask for that much of the " << threads
              << " threads' allocation; fewer and setmaxnreg.inc blocks)\n";
    variant.notes = notes.str();
    std::ostringstream os;

    // ---- the kernel ----
    os << "__global__ void "
       << (kernel.cluster > 1 ? "__cluster_dims__(" + std::to_string(kernel.cluster) + ", 1, 1) "
                              : "")
       << "__launch_bounds__(" << threads << ", 1) " << fn << "(";
    const std::vector<KernelParam> members = kernel_params(kernel, plan);
    std::vector<std::string> params;
    for (const KernelParam &m : members)
        params.push_back(m.param);
    for (size_t i = 0; i < params.size(); i++)
        os << (i ? ",\n    " : "\n    ") << params[i];
    os << ") {\n";
    os << "    // ---- shared memory: versions of the full tiles on a 1024-byte aligned base ----\n"
       << "    extern __shared__ unsigned char dynamic_shared_memory[];\n"
       << "    unsigned char *const shared = hopper::align_1024(dynamic_shared_memory);\n";
    for (const auto &[name, tile] : plan.tiles) {
        const SramBuffer &b = *tile.buffer;
        std::string t = storage_type(b.type), n = c_name(name);
        os << "    " << t << " *const " << n << " = reinterpret_cast<" << t << " *>(shared + "
           << tile.offset_bytes << "); // " << b.slots << " x " << tile.slot_elements() << " "
           << type_text(b.type);
        if (tile.kind == TileKind::MmaA)
            os << ", wgmma A tile " << brace_list(tile.layout) << ", 128B swizzle";
        else if (tile.kind == TileKind::MmaB)
            os << ", wgmma B tile " << brace_list(tile.layout) << (tile.k_major ? " (K-major)" : "")
               << ", 128B swizzle";
        else if (tile.tma())
            os << ", TMA tile " << brace_list(tile.layout)
               << (tile.swizzled ? ", 128B-swizzled column blocks" : "");
        if (tile.threads())
            os << ", copied by threads";
        if (tile.tma() && tile.layout != tile.data)
            os << " for data of " << brace_list(tile.data);
        os << "\n";
        if (tile.tma())
            os << "    const uint32_t " << n << "_address = hopper::shared_address(" << n << ");\n";
    }
    os << "    // ---- mbarriers: one per version ----\n";
    // Barriers the cooperative consumer role arrives on count one arrival per warpgroup.
    std::set<std::string> per_warpgroup;
    if (sharing > 1) {
        for_each_op(kernel.body, [&](const Stmt &op) {
            ir::ArriveOp a;
            if (ir::as_arrive(op, &a))
                per_warpgroup.insert(a.barrier);
        });
    }
    auto arrivals = [&](const BarrierDecl &b) {
        return b.arrivals * (per_warpgroup.count(b.name) ? sharing : 1);
    };
    for (const BarrierDecl &b : kernel.barriers) {
        os << "    __shared__ __align__(8) uint64_t " << c_name(b.name) << "[" << b.slots
           << "]; // " << arrivals(b) << " arrival(s) per phase\n";
    }
    if (body.uses_reduction) // 4 per warpgroup: one per warp
        os << "    __shared__ float reduction_scratch[" << threads / warpgroup_threads << "][4];\n";
    os << "\n    const int warpgroup = threadIdx.x / " << warpgroup_threads << ";\n"
       << "    const int thread_in_warpgroup = threadIdx.x % " << warpgroup_threads << ";\n";
    if (kernel.warpgroups == 1 && kernel.consumer_warpgroups > 1) // one role on two warpgroups
        os << "    const bool elected = threadIdx.x == 0; // issues TMA, expect_tx, arrive\n"
              "    const int consumer = warpgroup; // of the cooperative warpgroups\n"
              "    const int thread_in_consumers = threadIdx.x;\n"
              "    (void)consumer;\n"
              "    (void)thread_in_consumers;\n";
    else if (sharing > 1)
        os << "    const bool elected = thread_in_warpgroup == 0 && warpgroup <= 1; // issues TMA, "
              "expect_tx, arrive for its role\n"
              "    const int consumer = warpgroup - 1; // of the cooperative consumer warpgroups\n"
              "    const int thread_in_consumers = threadIdx.x - "
           << warpgroup_threads
           << ";\n"
              "    (void)consumer;\n"
              "    (void)thread_in_consumers;\n";
    else
        os << "    const bool elected = thread_in_warpgroup == 0; // issues TMA, expect_tx, arrive "
              "for "
              "its warpgroup\n";
    os << "    (void)thread_in_warpgroup;\n"
       << "    if (threadIdx.x == 0) {\n";
    for (const BarrierDecl &b : kernel.barriers) {
        os << "        for (int slot = 0; slot < " << b.slots << "; slot++) hopper::mbarrier_init(&"
           << c_name(b.name) << "[slot], " << arrivals(b) << ");\n";
    }
    os << "        hopper::fence_mbarrier_init();\n"
       << "    }\n"
       << (kernel.cluster > 1 ? "    hopper::cluster_sync(); // the peers' barriers are "
                                "initialised before any arrival or multicast\n"
                              : "    __syncthreads();\n");
    if (!plan.phase_bits.empty())
        os << "    // the parity each thread waits for next, one bit per version (flipped after "
              "each wait)\n";
    for (const BarrierDecl &b : kernel.barriers) {
        if (!plan.phase_bits.count(b.name))
            continue;
        os << "    uint32_t " << c_name(b.name)
           << "_phase = " << (b.initial_phase ? "0xffffffffu" : "0u") << ";"
           << (b.initial_phase ? " // pre-armed: the first lap passes" : "") << "\n";
    }
    for (const auto &[name, acc] : plan.accumulators) {
        if (acc.a.empty())
            continue;
        const bool int32 = acc.buffer->type.is_int();
        os << "    " << (int32 ? "int " : "float ") << c_name(name) << "["
           << (acc.m / 64 + sharing - 1) / sharing << "][" << acc.n / 2 << "]; // " << acc.m
           << " x " << acc.n << (int32 ? " int32" : " f32") << " accumulator as m64n" << acc.n
           << (sharing > 1 ? " wgmma fragments, every other 64-row block in each consumer thread's "
                             "registers\n"
                           : " wgmma fragments, in each computing thread's registers\n");
    }
    if (!body.divisors.empty())
        os << "    // the runtime extents the TMA coordinates divide by, each prepared once\n";
    for (const auto &[code, name] : body.divisors)
        os << "    const hopper::Divisor " << name << "(" << code << ");\n";
    if (body.checks_tails)
        os << "    int tails_ok = 1; // cleared by a failed tail check; trapped on at the end\n";
    os << "\n" << body.os.str();
    if (body.checks_tails)
        os << "    hopper::trap_unless(tails_ok);\n";
    os << "}\n\n";

    os << launcher(kernel, fn, plan, members, {threads, dynamic_bytes, register_floor});
    variant.code = os.str();
    return variant;
}

} // namespace

std::string emit_cuda(const Kernel &kernel, const std::string &function) {
    if (kernel.target.name() != "hopper")
        throw Error("emit_cuda: kernel " + kernel.name + " is not compiled for hopper");
    const std::string fn = function.empty() ? c_name(kernel.name) : function;
    if (kernel.is_pipeline()) { // each kernel's launcher, then the pipeline's
        std::vector<std::string> fns = library::kernel_functions(kernel, fn);
        fns.back() = fn + "_" + c_name(user_text(kernel.args.back().name));
        std::string code;
        for (size_t i = 0; i < fns.size(); i++)
            code += emit_cuda(kernel.stages[i], fns[i]) + "\n";
        return code + pipeline_launcher(kernel, fn, fns);
    }
    const Plan plan = plan_kernel(kernel);
    if (plan.launch_checks.empty()) {
        const Variant v = emit_variant(kernel, fn, plan);
        return v.notes + "#include \"tandem_hopper.cuh\"\n\n" + v.code;
    }
    // Strides known only at the call: a TMA variant and thread-copy variants, the call choosing
    // by the row pitches whose strides TMA cannot take there: where one fails, the variant whose
    // threads copy only its tensors (if its tiles fit); else the last, which thread-copies every
    // runtime pitch. Where that last cannot be (its tiles do not fit), the TMA one refuses the
    // rest.
    std::optional<Plan> any_stride;
    std::string why_not;
    try {
        any_stride = plan_kernel(kernel, StridePolicy::threads());
    } catch (const Error &e) {
        why_not = e.what();
    }
    if (!any_stride) {
        const Variant v = emit_variant(kernel, fn, plan);
        return v.notes + "// No thread-copy variant (" + why_not +
               "): a call whose rows TMA cannot step is refused.\n" +
               "#include \"tandem_hopper.cuh\"\n\n" + v.code;
    }
    const std::vector<std::string> classes = pitch_classes(plan);
    std::vector<StrideVariant> variants = {{0, fn + "_tma"}};
    std::vector<Variant> code = {emit_variant(kernel, fn + "_tma", plan)};
    for (size_t c = 0; classes.size() > 1 && c < classes.size(); c++) {
        const unsigned failing = 1u << c;
        std::optional<Plan> some;
        try {
            some = plan_kernel(kernel, stride_policy(classes, failing));
        } catch (const Error &) {
            continue; // its tiles do not fit: those calls take the last variant
        }
        std::string name = fn + "_threads";
        for (const std::string &arg : some->thread_args)
            name += "_" + c_name(user_text(arg));
        for (const StrideVariant &v : variants) {
            if (v.fn == name) // the same tensors as another pitch's (a tensor of two pitches)
                name += "_" + std::to_string(failing);
        }
        variants.push_back({failing, name});
        code.push_back(emit_variant(kernel, name, *some));
    }
    const unsigned all = (1u << std::min<size_t>(classes.size(), 31)) - 1;
    variants.push_back({all, fn + "_threads"});
    code.push_back(emit_variant(kernel, fn + "_threads", *any_stride));
    const Variant *floor = &code.front();
    std::string names, bodies;
    for (size_t i = 0; i < code.size(); i++) {
        if (code[i].register_floor > floor->register_floor)
            floor = &code[i];
        names += (i ? (i + 1 == code.size() ? " and " : ", ") : "") + variants[i].fn;
        bodies += code[i].code + "\n";
    }
    return floor->notes + "// " + std::to_string(code.size()) + " variants: " + names + "; " + fn +
           " chooses by the row pitches TMA cannot step at the call.\n" +
           "#include \"tandem_hopper.cuh\"\n\n" + bodies + dispatcher(kernel, fn, plan, variants);
}

} // namespace tandem::hopper_backend
