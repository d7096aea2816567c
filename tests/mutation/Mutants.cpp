#include "Mutants.h"

#include "tandem/AsyncIR.h"

#include <sstream>

namespace tandem::mutation {

namespace {

using namespace Halide::Internal;

/** Walks the body in program order; numbers every (sync op, mutation) pair and applies the one
 * numbered `chosen` (none when chosen < 0). */
class SyncMutator : public IRMutator {
public:
    SyncMutator(const Kernel &kernel, int chosen) : kernel(kernel), chosen(chosen) {}

    std::vector<Mutant> found;

    using IRMutator::visit;

    Stmt visit(const For *op) override {
        loops.push_back(op->name);
        Stmt s = IRMutator::visit(op);
        loops.pop_back();
        return s;
    }

    Stmt visit(const IfThenElse *op) override {
        const EQ *eq = op->condition.as<EQ>();
        if (!eq || !ir::is_warpgroup(eq->a))
            return IRMutator::visit(op);
        // A role branch: warpgroup k, else the roles after it (k + 1 when it is the last branch).
        const int64_t *k = as_const_int(eq->b);
        internal_assert(k) << "role branch on a non-constant warpgroup\n";
        int saved = role;
        role = int(*k);
        Stmt then_case = mutate(op->then_case);
        role = op->else_case.defined() && is_role_branch(op->else_case) ? -1 : int(*k) + 1;
        Stmt else_case = mutate(op->else_case);
        role = saved;
        if (then_case.same_as(op->then_case) && else_case.same_as(op->else_case))
            return op;
        return IfThenElse::make(op->condition, then_case, else_case);
    }

    Stmt visit(const Evaluate *op) override {
        Stmt s(op);
        Stmt result = s;
        std::string op_name;
        std::string barrier;
        int cross_flag = -1;
        auto candidate = [&](Mutant::Kind kind, const std::string &what, const Stmt &replacement) {
            int index = int(found.size());
            found.push_back({kind, op_name, barrier, role, loops, what + where(), cross_flag});
            if (index == chosen)
                result = replacement;
        };
        ir::CopyOp c;
        ir::WaitOp w;
        ir::ArriveOp a;
        Expr bytes;
        std::string counter;
        using K = Mutant::Kind;
        if (ir::as_copy(s, &c)) {
            op_name = "tandem_copy";
            barrier = c.barrier;
            int n = slots(c.barrier);
            if (n > 1) {
                ir::CopyOp shifted = c;
                shifted.slot = shift(c.slot, n);
                candidate(K::ShiftSlot, "slot+1 " + copy_text(c), ir::make_copy(shifted));
            }
        } else if (ir::as_wait(s, &w)) {
            op_name = "tandem_wait";
            barrier = w.barrier;
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
            if (w.parity.defined()) {
                ir::WaitOp flipped = w;
                flipped.parity = 1 - w.parity;
                candidate(K::FlipParity, "flip parity " + text(s), ir::make_wait(flipped));
            }
            int n = slots(w.barrier);
            if (n > 1) {
                ir::WaitOp shifted = w;
                shifted.slot = shift(w.slot, n);
                candidate(K::ShiftSlot, "slot+1 " + text(s), ir::make_wait(shifted));
            }
        } else if (ir::as_expect(s, &a, &bytes)) {
            op_name = "tandem_expect";
            barrier = a.barrier;
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
            int n = slots(a.barrier);
            if (n > 1) {
                ir::ArriveOp shifted = a;
                shifted.slot = shift(a.slot, n);
                candidate(K::ShiftSlot, "slot+1 " + text(s), ir::make_expect(shifted, bytes));
            }
        } else if (ir::as_arrive(s, &a)) {
            op_name = "tandem_arrive";
            barrier = a.barrier;
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
            int n = slots(a.barrier);
            if (n > 1) {
                ir::ArriveOp shifted = a;
                shifted.slot = shift(a.slot, n);
                candidate(K::ShiftSlot, "slot+1 " + text(s), ir::make_arrive(shifted));
            }
            if (a.cluster > 1) {
                ir::ArriveOp local = a;
                local.cluster = 0;
                candidate(K::Weaken, "local " + text(s), ir::make_arrive(local));
            }
        } else if (ir::is_fence_proxy_async(s)) {
            op_name = "tandem_fence_proxy_async";
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
        } else if (ir::as_advance(s, &counter)) {
            op_name = "tandem_advance";
            barrier = counter;
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
        } else if (ir::as_mesh_barrier(s, &counter)) {
            op_name = "tandem_mesh_barrier";
            barrier = counter; // the label
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
        } else if (ir::as_sync(s, &counter)) {
            op_name = "tandem_sync";
            barrier = counter; // the engine
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
        } else if (Expr flag; ir::as_cross_core_wait(s, &flag)) {
            op_name = "tandem_cross_core_wait";
            cross_flag = flag_base(flag);
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
        } else if (ir::as_cross_core_set(s, &counter, &flag)) {
            op_name = "tandem_cross_core_set";
            cross_flag = flag_base(flag);
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
        } else if (int pending = 0; ir::as_mma_wait(s, &counter, &pending)) {
            op_name = "tandem_mma_wait";
            barrier = counter; // the accumulator
            candidate(K::Delete, "delete " + text(s), Evaluate::make(0));
            candidate(K::Weaken, "pending+1 " + text(s), ir::make_mma_wait(counter, pending + 1));
        }
        return result;
    }

private:
    const Kernel &kernel;
    int chosen;
    std::vector<std::string> loops;
    int role = -1;

    static bool is_role_branch(const Stmt &s) {
        const IfThenElse *i = s.as<IfThenElse>();
        const EQ *eq = i ? i->condition.as<EQ>() : nullptr;
        return eq && ir::is_warpgroup(eq->a);
    }

    /** Versions of the barrier as the target reads its slot; 1 when the slot is not read. */
    int slots(const std::string &barrier) const {
        if (kernel.target.name() == "hopper") {
            // Only mbarriers have versions; a store's drain wait is bulk wait_group.read 0.
            for (const BarrierDecl &b : kernel.barriers) {
                if (b.name == barrier)
                    return b.slots;
            }
            return 1;
        }
        // ZPU: "<buffer>.full" / "<buffer>.empty" name the buffer's DMA tokens, one per version.
        size_t dot = barrier.rfind('.');
        const SramBuffer *buffer =
            dot == std::string::npos ? nullptr : kernel.buffer(barrier.substr(0, dot));
        return buffer ? buffer->slots : 1;
    }

    static Expr shift(const Expr &slot, int slots) { return (slot + 1) % slots; }

    /** A cross-core flag id's constant part (AscendMix: base + the slot's parity). */
    static int flag_base(const Expr &flag) {
        const Add *add = flag.as<Add>();
        const int64_t *base = as_const_int(add ? add->a : flag);
        return base ? int(*base) : -1;
    }

    static std::string text(const Stmt &s) {
        std::ostringstream os;
        os << s;
        std::string t = os.str();
        while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
            t.pop_back();
        return t;
    }

    static std::string copy_text(const ir::CopyOp &c) {
        std::ostringstream os;
        os << "tandem_copy(" << c.src << " -> " << c.dst << ", \"" << c.barrier << "\", " << c.slot
           << ")";
        return os.str();
    }

    std::string where() const {
        std::string w;
        if (role >= 0)
            w += " [warpgroup " + std::to_string(role) + "]";
        if (!loops.empty()) {
            w += " in loop";
            for (const std::string &l : loops)
                w += " " + l;
        } else {
            w += " outside loops";
        }
        return w;
    }
};

} // namespace

std::vector<Mutant> mutants(const Kernel &kernel) {
    SyncMutator walk(kernel, -1);
    walk.mutate(kernel.body);
    return walk.found;
}

Kernel mutate(const Kernel &kernel, int index) {
    SyncMutator walk(kernel, index);
    Kernel mutant = kernel;
    mutant.body = walk.mutate(kernel.body);
    internal_assert(index >= 0 && index < int(walk.found.size()) &&
                    !mutant.body.same_as(kernel.body))
        << "mutant " << index << " of " << kernel.name << " does not exist\n";
    return mutant;
}

} // namespace tandem::mutation
