#include "ZpuMemory.h"
#include "tandem/params/Zpu.h"

#include "tandem/AsyncIR.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

/** ZPU MMA operands a DMA cannot fill from DRAM in one transfer (DRAM -> ASRAM has no ODMA route:
 * machines/zpu.json): the tile lives in RSRAM, and before each MMA one transfer (RSRAM -> ASRAM,
 * waited at once) moves the MMA's box into `<tile>.asram`, which the MMA reads.
 *
 * The bf16 tensor core reads A only from the ASRAM north bank (SUNMMIO/Tilelang
 * legalize_sunmmio_gemm.cc: 1 KiB stripes, at most 16 rows in one pass): an MMA of more than 16
 * rows runs as two passes, each on half of the 16-row blocks, with A re-staged between them. The
 * stage has a version per pass, so the second pass's rows move (ODMA unit 1) while the first pass
 * multiplies; where ASRAM holds twice that, the versions alternate by the parity of the loop
 * around the MMA (the K step), so a step's rows move while the tensor core still multiplies the
 * step before (the asynchronous tensor core: EngineSync tells the versions apart):
 *
 *     hop rows 0..h -> stage[p][0]; wait; hop rows h..m -> stage[p][1]; mma(stage[p][0]); wait;
 *     mma(stage[p][1])                                                  p = ko % 2 (or 0)
 */
class StageThroughRsram : public IRMutator {
public:
    struct Stage {
        std::string buffer;      // the ASRAM buffer: a version per pass (16-bit: 2), per lap
        bool two_passes = false; // a 16-bit A (bf16 or f16) past the north bank's rows
        int64_t slot_elements = 0;
        int laps = 1; // 2: versions alternate by the parity of the loop around the MMA
    };
    std::map<std::string, Stage> staged; // tile -> its ASRAM stage
    int north_rows = 16;                 // rows of a bf16 A one pass reads (mma_north_bank_rows)

private:
    using IRMutator::visit;
    std::vector<const For *> loops;

    Stmt visit(const For *op) override {
        loops.push_back(op);
        Stmt s = IRMutator::visit(op);
        loops.pop_back();
        return s;
    }

    /** The transfer of rows [first, first + rows) of the MMA's A box into stage version `slot`. */
    static Stmt hop(const ir::MmaOp &m, const Stage &stage, const Expr &slot, const Expr &first,
                    const Expr &rows) {
        ir::CopyOp c;
        c.src = m.a;
        c.dst = stage.buffer;
        c.src_offset = simplify(m.a_offset + first * m.a_stride_m);
        c.dst_offset = simplify(slot * Halide::Expr(int(stage.slot_elements)));
        c.dims = {{m.k, 1, m.a_stride_k}, {simplify(rows), m.k, m.a_stride_m}};
        c.barrier = ir::full_barrier(stage.buffer);
        c.slot = slot;
        return ir::make_copy(c);
    }

    static Stmt wait(const Stage &stage, const Expr &slot) {
        return ir::make_wait({ir::full_barrier(stage.buffer), slot});
    }

    /** The MMA on rows [first, first + rows), A from stage version `slot`. */
    static Stmt multiply(ir::MmaOp m, const Stage &stage, const Expr &slot, const Expr &first,
                         const Expr &rows) {
        m.acc_offset = simplify(m.acc_offset + first * m.acc_stride_m);
        m.a = stage.buffer;
        m.a_offset = simplify(slot * Halide::Expr(int(stage.slot_elements)));
        m.a_stride_k = 1;
        m.a_stride_m = m.k;
        m.m = simplify(rows);
        return ir::make_mma(m);
    }

    Stmt visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (!ir::as_mma(op, &m) || !staged.count(m.a))
            return op;
        const Stage &stage = staged.at(m.a);
        const int passes = stage.two_passes ? 2 : 1;
        Expr lap = 0;
        if (stage.laps > 1 && !loops.empty()) {
            const For *l = loops.back();
            lap = simplify((Variable::make(Halide::Int(32), l->name) - l->min) % 2);
        }
        Expr first_slot = simplify(lap * passes), second_slot = simplify(lap * passes + 1);
        // One pass when the rows fit the north bank (or A is not 16-bit).
        const int rows = north_rows;
        if (!stage.two_passes || can_prove(m.m <= rows))
            return Block::make({hop(m, stage, first_slot, 0, m.m), wait(stage, first_slot),
                                multiply(m, stage, first_slot, 0, m.m)});
        // Half of the row blocks in each pass.
        Expr half = simplify(Halide::min(m.m, (m.m + (2 * rows - 1)) / (2 * rows) * rows));
        Expr two = simplify(m.m > half);
        auto when_two = [&](const Stmt &s) {
            return is_const_one(two) ? s : IfThenElse::make(two, s);
        };
        return Block::make(
            {hop(m, stage, first_slot, 0, half), wait(stage, first_slot),
             when_two(hop(m, stage, second_slot, half, m.m - half)),
             multiply(m, stage, first_slot, 0, half),
             when_two(Block::make(wait(stage, second_slot),
                                  multiply(m, stage, second_slot, half, m.m - half)))});
    }
};

/** The MMA A operands whose tiles a DMA fills from a kernel argument (DRAM) where the machine
 * description has no DRAM -> ASRAM route. */
class FindDramFilledOperands : public IRVisitor {
public:
    FindDramFilledOperands(const CompileContext &ctx, const Allocations &operands)
        : ctx(ctx), operands(operands) {}
    std::set<std::string> found;

private:
    using IRVisitor::visit;
    const CompileContext &ctx;
    const Allocations &operands;
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(op, &c))
            return;
        const bool from_dram =
            c.src == ctx.output ||
            std::find(ctx.inputs.begin(), ctx.inputs.end(), c.src) != ctx.inputs.end();
        if (from_dram && operands.mma_a.count(c.dst) &&
            sim::ZpuParams::from(ctx.target.lookup())
                    .route_unit(sim::Space::DRAM, sim::Space::ASRAM) < 0) {
            found.insert(c.dst);
        }
    }
};

} // namespace

Stmt plan_zpu_memory(const Stmt &s, const Allocations &found, CompileContext &ctx,
                     std::vector<SramBuffer> *buffers) {
    Stmt result = s;
    FindDramFilledOperands dram_filled(ctx, found);
    result.accept(&dram_filled);
    StageThroughRsram stage;
    stage.north_rows = int(ctx.target.machine.integer("mma_north_bank_rows"));
    std::map<sim::Space, int64_t> used;
    auto place = [&](SramBuffer b) {
        b.offset_bytes = used[b.space];
        used[b.space] += (b.bytes() + 63) / 64 * 64;
        buffers->push_back(b);
    };
    for (SramBuffer b : found.buffers) {
        const std::string &name = b.name;
        b.space = found.mma_a.count(name)   ? sim::Space::ASRAM
                  : found.mma_b.count(name) ? sim::Space::WSRAM
                                            : sim::Space::RSRAM;
        if (dram_filled.found.count(name)) {
            // Loaded into RSRAM; each MMA's box hops to ASRAM (one version, reused per MMA).
            SramBuffer hop = b;
            hop.name = name + ".asram";
            // 16-bit A (bf16; f16 too, a Tandem assumption: the public rule names bf16) reads
            // the north bank: a version per pass.
            const bool half = b.type.is_float() && b.type.bits() == 16;
            hop.slots = half ? 2 : 1;
            // Twice that (alternating by K step) where ASRAM has room for it.
            const int64_t asram =
                sim::ZpuParams::from(ctx.target.lookup()).capacity(sim::Space::ASRAM);
            const int laps =
                used[sim::Space::ASRAM] + 2 * ((hop.bytes() + 63) / 64 * 64) <= asram ? 2 : 1;
            hop.slots *= laps;
            b.space = sim::Space::RSRAM;
            stage.staged[name] = {hop.name, half, b.slot_elements, laps};
            ctx.notes.push_back(
                "route: " + name + " is loaded into RSRAM and each MMA's box moves to " + hop.name +
                " (no DRAM -> ASRAM route; bf16 and f16: two passes of at most half " +
                "the rows, the north bank)");
            place(hop);
        }
        place(b);
    }
    if (!stage.staged.empty())
        result = stage.mutate(result);
    for (const auto &[space, bytes] : used) {
        int64_t capacity = sim::ZpuParams::from(ctx.target.lookup()).capacity(space);
        if (bytes <= capacity)
            continue;
        const SramBuffer *largest = nullptr;
        for (const SramBuffer &b : *buffers) {
            if (b.space == space && (!largest || b.bytes() > largest->bytes()))
                largest = &b;
        }
        throw Error("Func '" + largest->name + "', directive " +
                    directive_that_sized(largest->name, largest->slots) + ": SRAM overflow - " +
                    sim::space_name(space) + " holds " + std::to_string(capacity) +
                    " bytes per core but the kernel needs " + std::to_string(bytes) + " (" +
                    largest->name + " alone takes " + std::to_string(largest->slots) + " x " +
                    std::to_string(largest->slot_elements * largest->type.bytes()) +
                    " bytes); use smaller tiles or fewer versions");
    }
    for (const auto &[space, bytes] : used) {
        ctx.notes.push_back(
            std::string("memory: ") + sim::space_name(space) + " " + std::to_string(bytes) +
            " of " + std::to_string(sim::ZpuParams::from(ctx.target.lookup()).capacity(space)) +
            " bytes");
    }
    return result;
}

} // namespace tandem::lower
