#include "HopperMemory.h"

#include "tandem/AsyncIR.h"

#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

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
    /** Two dims, and any past them of one element (a batch's or a head's). */
    static bool two_d(const ir::CopyOp &c) {
        return c.dims.size() >= 2 &&
               std::all_of(c.dims.begin() + 2, c.dims.end(),
                           [](const ir::CopyDim &d) { return is_const_one(simplify(d.extent)); });
    }
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        // The row pitch of the stage: the full tile's, the widest of its copies of more than one
        // row (a tail tile's copy may have its own); none if one is not a constant.
        if (ir::as_copy(op, &c) && c.dst == output && two_d(c) &&
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

} // namespace

/** Accumulators live in each consumer's registers, the rest in the CTA's shared memory
 * (1024-byte aligned, as 128B-swizzled TMA tiles need). */
Stmt plan_hopper_memory(const Stmt &s, const Allocations &found, CompileContext &ctx,
                        std::vector<SramBuffer> *buffers) {
    ColumnBlockStages stages(ctx.output, found.accumulators);
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
    int64_t smem = 0, held = 0; // held: the registers of the accumulators so far (all live at once)
    std::string names;
    for (SramBuffer b : found.buffers) {
        const std::string &name = b.name;
        b.in_registers = found.accumulators.count(name) > 0;
        if (b.in_registers) {
            // One warpgroup (128 threads) holds the tile, two with cooperative().
            held += (b.slot_elements * b.type.bytes() / 4 + 128 * sharing - 1) / (128 * sharing);
            names += (names.empty() ? "" : " and ") + name.substr(0, name.find('$'));
            const bool several = names.find(" and ") != std::string::npos;
            if (held > data_registers) {
                throw Error("Func '" + name + "', directive tile: the accumulator tile" +
                            (several ? "s of " + names : "") + " need" + (several ? "" : "s") +
                            " " + std::to_string(held) +
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
    ctx.notes.push_back("memory: the tiles' data takes " + std::to_string(smem) + " of the " +
                        std::to_string(ctx.target.machine.integer("smem_bytes")) +
                        " bytes of shared memory");
    return s;
}

} // namespace tandem::lower
