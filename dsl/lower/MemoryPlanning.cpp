#include "MemoryPlanning.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <map>
#include <set>
#include <sstream>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

class HoistAllocations : public LoopScopedMutator {
public:
    std::map<std::string, SramBuffer> found;
    std::vector<std::string> order;

private:
    using IRMutator::visit;
    Stmt visit(const Allocate *op) override {
        int64_t elements = allocation_bound(op, loops);
        if (elements < 0) {
            Expr n = 1;
            for (const Expr &e : op->extents)
                n = n * e;
            std::ostringstream size;
            size << n;
            throw Error("Func '" + op->name + "': its on-chip size (" + size.str() +
                        ") has no constant bound; give the " +
                        "tiles constant sizes (split/tile factors) and static input shapes");
        }
        auto it = found.find(op->name);
        if (it == found.end()) {
            SramBuffer b;
            b.name = op->name;
            b.type = op->type;
            b.slot_elements = elements;
            found[op->name] = b;
            order.push_back(op->name);
        } else {
            it->second.slot_elements = std::max(it->second.slot_elements, elements);
        }
        return mutate(op->body);
    }
    Stmt visit(const Free *op) override { return Evaluate::make(0); }
};

class FindOperands : public IRVisitor {
public:
    explicit FindOperands(Allocations &found) : found(found) {}

private:
    using IRVisitor::visit;
    Allocations &found;
    void visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (ir::as_mma(op, &m)) {
            found.mma_a.insert(m.a);
            found.mma_b.insert(m.b);
            found.accumulators.insert(m.acc);
        }
    }
};

} // namespace

std::string directive_that_sized(const std::string &name, int slots) {
    if (slots > 1)
        return "multi_buffer(" + std::to_string(slots) + ")";
    return "compute_at";
}

Stmt plan_memory(const Stmt &s, CompileContext &ctx, std::vector<SramBuffer> *buffers,
                 const MemoryPlan &place) {
    HoistAllocations hoist;
    Stmt result = remove_no_ops(hoist.mutate(s));
    Allocations found;
    FindOperands operands(found);
    result.accept(&operands);
    for (const std::string &name : hoist.order) {
        SramBuffer b = hoist.found.at(name);
        auto slots = ctx.slots.find(name);
        b.slots = slots == ctx.slots.end() ? 1 : slots->second;
        b.slot_elements /= b.slots; // Allocate sizes already hold every version
        found.buffers.push_back(b);
    }
    buffers->clear();
    return place(result, found, ctx, buffers);
}

} // namespace tandem::lower
