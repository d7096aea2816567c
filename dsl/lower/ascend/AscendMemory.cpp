#include "AscendMemory.h"
#include "tandem/params/Ascend.h"

#include "tandem/AsyncIR.h"

#include <map>

namespace tandem::lower {

using namespace Halide::Internal;

/** MMA operands in L0A/L0B, accumulators in L0C, what LoadData reads in L1, the rest
 * (vector data) in the unified buffer; each scope has its capacity and alignment. */
Stmt plan_ascend_memory(const Stmt &s, const Allocations &found, CompileContext &ctx,
                        std::vector<SramBuffer> *buffers) {
    using sim::ascend::Mem;
    const sim::ascend::AscendParams p = sim::ascend::AscendParams::from(ctx.target.lookup());
    std::map<std::string, Mem> mem;
    class Roles : public IRVisitor {
    public:
        std::map<std::string, Mem> &mem;
        explicit Roles(std::map<std::string, Mem> &m) : mem(m) {}
        using IRVisitor::visit;
        void visit(const Evaluate *op) override {
            ir::MmaOp m;
            if (ir::as_mma(op, &m))
                mem[m.a] = Mem::L0A, mem[m.b] = Mem::L0B, mem[m.acc] = Mem::L0C;
        }
    } roles(mem);
    s.accept(&roles);
    class Sources : public IRVisitor {
    public:
        std::map<std::string, Mem> &mem;
        explicit Sources(std::map<std::string, Mem> &m) : mem(m) {}
        using IRVisitor::visit;
        void visit(const Evaluate *op) override {
            ir::CopyOp c;
            if (ir::as_copy(op, &c) && mem.count(c.dst) &&
                (mem[c.dst] == Mem::L0A || mem[c.dst] == Mem::L0B)) {
                mem[c.src] = Mem::L1;
            }
        }
    } sources(mem);
    s.accept(&sources);
    std::map<Mem, int64_t> used;
    for (SramBuffer b : found.buffers) {
        const std::string &name = b.name;
        b.ascend_mem = mem.count(name) ? mem[name] : Mem::UB;
        int64_t align = p.alignment(b.ascend_mem);
        b.offset_bytes = used[b.ascend_mem];
        used[b.ascend_mem] += (b.bytes() + align - 1) / align * align;
        buffers->push_back(b);
    }
    for (const auto &[m, bytes] : used) {
        if (bytes <= p.capacity(m)) {
            ctx.notes.push_back(std::string("memory: ") + sim::ascend::mem_name(m) + " " +
                                std::to_string(bytes) + " of " + std::to_string(p.capacity(m)) +
                                " bytes");
            continue;
        }
        const SramBuffer *largest = nullptr;
        for (const SramBuffer &b : *buffers) {
            if (b.ascend_mem == m && (!largest || b.bytes() > largest->bytes()))
                largest = &b;
        }
        // (The vector cores' copy of an accumulator is as large as the accumulator's tile.)
        const bool handed = largest->name.size() > 3 &&
                            largest->name.compare(largest->name.size() - 3, 3, ".ub") == 0;
        throw Error("Func '" + largest->name + "', directive " +
                    (handed ? std::string("tile_mma (the accumulator's tile)")
                            : directive_that_sized(largest->name, largest->slots)) +
                    ": " + sim::ascend::mem_name(m) + " overflow - an AI core's " +
                    sim::ascend::mem_name(m) + " holds " + std::to_string(p.capacity(m)) +
                    " bytes but the kernel needs " + std::to_string(bytes) + " (" + largest->name +
                    " takes " + std::to_string(largest->bytes()) +
                    "); use smaller tiles or fewer versions");
    }
    return s;
}

} // namespace tandem::lower
