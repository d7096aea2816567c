#include "MemoryPlanning.h"
#include "sim/Ascend.h"
#include "sim/Zpu.h"

#include "Nest.h"
#include "tandem/AsyncIR.h"

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
    std::map<std::string, sim::Space> space;
    std::set<std::string> accumulators;

private:
    using IRVisitor::visit;
    void visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (ir::as_mma(op, &m)) {
            space[m.a] = sim::Space::ASRAM;
            space[m.b] = sim::Space::WSRAM;
            accumulators.insert(m.acc);
        }
    }
};

/** Hopper: the output's staging tiles an accumulator epilogue writes, with rows of more than two
 * 128-byte column blocks (a multiple of them, 8-row swizzle atoms): the GPU holds two of their
 * column blocks per version, a ring the epilogue writes and stores one block at a time
 * (backends/hopper/Plan.h, Tile::ring_blocks; the model holds the whole tile). */
class ColumnBlockStages : public IRVisitor {
public:
    ColumnBlockStages(const std::string &output, const std::set<std::string> &accumulators)
        : output(output), accumulators(accumulators) {}
    /** The bytes of a version of `b` on the GPU where it is such a ring, else 0. */
    int64_t ring_bytes(const SramBuffer &b) const {
        auto p = pitches.find(b.name);
        if (p == pitches.end() || !from_accumulator.count(b.name) || p->second <= 0)
            return 0;
        const int64_t pitch = p->second, row = pitch * b.type.bytes(),
                      rows = b.slot_elements / pitch;
        if (row > 2 * 128 && row % 128 == 0 && rows % 8 == 0 && rows * pitch == b.slot_elements)
            return 2 * 128 * rows;
        return 0;
    }

private:
    using IRVisitor::visit;
    const std::string &output;
    const std::set<std::string> &accumulators;
    std::map<std::string, int64_t> pitches; // staging tile -> its row pitch in elements
    std::set<std::string> from_accumulator;
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        // The row pitch of the stage: the full tile's, the widest of its copies of more than one
        // row (a tail tile's copy may have its own); none if one is not a constant.
        if (ir::as_copy(op, &c) && c.dst == output && c.dims.size() == 2 &&
            !is_const_one(simplify(c.dims[1].extent))) {
            const IntImm *pitch = simplify(c.dims[1].src_stride).as<IntImm>();
            auto known = pitches.find(c.src);
            const int64_t p = pitch ? pitch->value : -1;
            pitches[c.src] = known == pitches.end()       ? p
                             : p < 0 || known->second < 0 ? -1
                                                          : std::max(known->second, p);
        }
        IRVisitor::visit(op);
    }
    const Store *store_ = nullptr; // the store whose value is being visited
    void visit(const Store *op) override {
        store_ = op;
        op->value.accept(this);
        store_ = nullptr;
        op->index.accept(this);
    }
    void visit(const Load *op) override {
        if (store_ && accumulators.count(op->name))
            from_accumulator.insert(store_->name);
        IRVisitor::visit(op);
    }
};

std::string directive_that_sized(const std::string &name, int slots) {
    if (slots > 1)
        return "multi_buffer(" + std::to_string(slots) + ")";
    return "compute_at";
}

/** Hopper: accumulators live in each consumer's registers, the rest in the CTA's shared memory
 * (1024-byte aligned, as 128B-swizzled TMA tiles need). */
void plan_hopper(const Stmt &s, const HoistAllocations &hoist, const FindOperands &operands,
                 CompileContext &ctx, std::vector<SramBuffer> *buffers) {
    ColumnBlockStages stages(ctx.output, operands.accumulators);
    s.accept(&stages);
    // TMA stores the ring's blocks: the output's row pitches must be multiples of 16 bytes (else
    // the threads store the whole tile).
    bool tma_rows = true;
    for (const KernelArg &a : ctx.args) {
        if (a.name != ctx.output)
            continue;
        int64_t stride = 1;
        for (size_t d = 0; d + 1 < a.extents.size(); d++) {
            stride *= a.extents[d];
            tma_rows = tma_rows && (stride * a.type.bytes()) % 16 == 0;
        }
    }

    // Registers per thread: 65536 per SM over the CTA's warpgroups (ptxas compiles the whole kernel
    // within that cap, whatever setmaxnreg gives later), less ~40 for addresses and loop state.
    const Directives out = ctx.of(ctx.output);
    int warpgroups = out.warp_specialize ? (out.ping_pong || out.cooperative ? 3 : 2) : 1;
    int sharing = out.cooperative ? 2 : 1; // warpgroups holding one accumulator tile
    int64_t cap = std::min<int64_t>(232, ctx.target.machine.integer("registers_per_sm") /
                                             (128 * warpgroups) / 8 * 8);
    int64_t data_registers = cap - 40;
    int64_t smem = 0;
    for (const std::string &name : hoist.order) {
        SramBuffer b = hoist.found.at(name);
        auto slots = ctx.slots.find(name);
        b.slots = slots == ctx.slots.end() ? 1 : slots->second;
        b.slot_elements /= b.slots;
        b.in_registers = operands.accumulators.count(name) > 0;
        if (b.in_registers) {
            // One warpgroup (128 threads) holds the tile, two with cooperative().
            int64_t per_thread =
                (b.slot_elements * b.type.bytes() / 4 + 128 * sharing - 1) / (128 * sharing);
            if (per_thread > data_registers) {
                throw Error("Func '" + name + "', directive tile: the accumulator tile needs " +
                            std::to_string(per_thread) +
                            " registers per thread of its warpgroup; with " +
                            std::to_string(warpgroups) + " warpgroups per CTA a thread has " +
                            std::to_string(cap) + " (about " + std::to_string(data_registers) +
                            " for data): use a smaller output tile");
            }
        } else {
            b.offset_bytes = smem;
            if (tma_rows)
                b.chip_slot_bytes = stages.ring_bytes(b);
            if (b.chip_slot_bytes) {
                ctx.notes.push_back(
                    "memory: " + name +
                    " is written and stored one column block at a time through a ring of two (" +
                    std::to_string(b.slots * b.chip_slot_bytes) + " of its " +
                    std::to_string(b.bytes()) +
                    " bytes on the GPU; the model holds the whole tile)");
            }
            smem += ((b.chip_slot_bytes ? b.slots * b.chip_slot_bytes : b.bytes()) + 1023) / 1024 *
                    1024;
        }
        buffers->push_back(b);
    }
    if (smem > ctx.target.machine.integer("smem_bytes")) {
        const SramBuffer *largest = nullptr;
        for (const SramBuffer &b : *buffers) {
            if (!b.in_registers && (!largest || b.bytes() > largest->bytes()))
                largest = &b;
        }
        throw Error("Func '" + largest->name + "', directive " +
                    directive_that_sized(largest->name, largest->slots) +
                    ": shared memory overflow - a CTA has " +
                    std::to_string(ctx.target.machine.integer("smem_bytes")) +
                    " bytes (227 KB) but the kernel needs " + std::to_string(smem) + " (" +
                    largest->name + " takes " + std::to_string(largest->bytes()) +
                    "); use smaller tiles or fewer stages");
    }
    ctx.notes.push_back("memory: shared " + std::to_string(smem) + " of " +
                        std::to_string(ctx.target.machine.integer("smem_bytes")) + " bytes");
}

/** Ascend: MMA operands in L0A/L0B, accumulators in L0C, what LoadData reads in L1, the rest
 * (vector data) in the unified buffer; each scope has its capacity and alignment. */
void plan_ascend(const Stmt &s, const HoistAllocations &hoist, CompileContext &ctx,
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
    for (const std::string &name : hoist.order) {
        SramBuffer b = hoist.found.at(name);
        auto slots = ctx.slots.find(name);
        b.slots = slots == ctx.slots.end() ? 1 : slots->second;
        b.slot_elements /= b.slots;
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
        throw Error("Func '" + largest->name + "', directive " +
                    directive_that_sized(largest->name, largest->slots) + ": " +
                    sim::ascend::mem_name(m) + " overflow - an AI core's " +
                    sim::ascend::mem_name(m) + " holds " + std::to_string(p.capacity(m)) +
                    " bytes but the kernel needs " + std::to_string(bytes) + " (" + largest->name +
                    " takes " + std::to_string(largest->bytes()) +
                    "); use smaller tiles or fewer versions");
    }
}

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
        std::string buffer; // the ASRAM buffer: a version per pass (bf16: 2), per lap
        bool bf16 = false;
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
        const int passes = stage.bf16 ? 2 : 1;
        Expr lap = 0;
        if (stage.laps > 1 && !loops.empty()) {
            const For *l = loops.back();
            lap = simplify((Variable::make(Halide::Int(32), l->name) - l->min) % 2);
        }
        Expr first_slot = simplify(lap * passes), second_slot = simplify(lap * passes + 1);
        // One pass when the rows fit the north bank (or A is not bf16).
        const int rows = north_rows;
        if (!stage.bf16 || can_prove(m.m <= rows))
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
    FindDramFilledOperands(const CompileContext &ctx, const FindOperands &operands)
        : ctx(ctx), operands(operands) {}
    std::set<std::string> found;

private:
    using IRVisitor::visit;
    const CompileContext &ctx;
    const FindOperands &operands;
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (!ir::as_copy(op, &c))
            return;
        auto sp = operands.space.find(c.dst);
        const bool from_dram =
            c.src == ctx.output ||
            std::find(ctx.inputs.begin(), ctx.inputs.end(), c.src) != ctx.inputs.end();
        if (from_dram && sp != operands.space.end() && sp->second == sim::Space::ASRAM &&
            sim::ZpuParams::from(ctx.target.lookup())
                    .route_unit(sim::Space::DRAM, sim::Space::ASRAM) < 0) {
            found.insert(c.dst);
        }
    }
};

} // namespace

Stmt plan_memory(const Stmt &s, CompileContext &ctx, std::vector<SramBuffer> *buffers) {
    HoistAllocations hoist;
    Stmt result = remove_no_ops(hoist.mutate(s));
    FindOperands operands;
    result.accept(&operands);
    buffers->clear();
    if (ctx.target.arch == Target::Arch::Hopper) {
        plan_hopper(result, hoist, operands, ctx, buffers);
        return result;
    }
    if (ctx.target.arch == Target::Arch::Ascend) {
        plan_ascend(result, hoist, ctx, buffers);
        return result;
    }
    FindDramFilledOperands dram_filled(ctx, operands);
    result.accept(&dram_filled);
    StageThroughRsram stage;
    stage.north_rows = int(ctx.target.machine.integer("mma_north_bank_rows"));
    std::map<sim::Space, int64_t> used;
    auto place = [&](SramBuffer b) {
        b.offset_bytes = used[b.space];
        used[b.space] += (b.bytes() + 63) / 64 * 64;
        buffers->push_back(b);
    };
    for (const std::string &name : hoist.order) {
        SramBuffer b = hoist.found[name];
        auto slots = ctx.slots.find(name);
        b.slots = slots == ctx.slots.end() ? 1 : slots->second;
        b.slot_elements /= b.slots; // Allocate sizes already hold every version
        auto sp = operands.space.find(name);
        b.space = sp == operands.space.end() ? sim::Space::RSRAM : sp->second;
        if (dram_filled.found.count(name)) {
            // Loaded into RSRAM; each MMA's box hops to ASRAM (one version, reused per MMA).
            SramBuffer hop = b;
            hop.name = name + ".asram";
            hop.slots = b.type.is_bfloat() ? 2 : 1; // a version per pass
            // Twice that (alternating by K step) where ASRAM has room for it.
            const int64_t asram =
                sim::ZpuParams::from(ctx.target.lookup()).capacity(sim::Space::ASRAM);
            const int laps =
                used[sim::Space::ASRAM] + 2 * ((hop.bytes() + 63) / 64 * 64) <= asram ? 2 : 1;
            hop.slots *= laps;
            b.space = sim::Space::RSRAM;
            stage.staged[name] = {hop.name, b.type.is_bfloat(), b.slot_elements, laps};
            ctx.notes.push_back("route: " + name +
                                " is loaded into RSRAM and each MMA's box moves to " + hop.name +
                                " (no DRAM -> ASRAM route; bf16: two passes of at most half " +
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
