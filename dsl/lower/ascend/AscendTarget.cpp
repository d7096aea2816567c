#include "AscendTarget.h"
#include "tandem/params/Ascend.h"

#include "AscendCube.h"
#include "AscendFlags.h"
#include "AscendMemory.h"
#include "AscendMix.h"
#include "AscendRows.h"
#include "AscendVector.h"
#include "lower/MultiBuffer.h"
#include "lower/TileCopy.h"
#include "lower/TileMma.h"
#include "lower/VectorOps.h"
#include "tandem/Nest.h"

namespace tandem::lower {

using Halide::Internal::Stmt;

TargetLowering ascend_target() {
    TargetLowering t;
    t.name = "ascend";
    t.passes = {
        rejoin_tails_step(),
        // UB rows padded to 32-byte blocks, on Halide's Stmt.
        pass("pad_ub_rows", pad_ub_rows),
        map_to_cores_step(),
        pass("recognize_tile_copies", recognize_tile_copies),
        pass("recognize_tile_mma", recognize_tile_mma),
        pass("form_vector_ops", form_vector_ops),
        // An epilogue after a matmul makes a mix kernel: cube and vector cores meet in GM.
        pass("split_mix_kernel", split_mix_kernel),
        {"stage_cube_operands (each side)",
         [](const Stmt &s, CompileContext &ctx, Kernel &) {
             return each_side(s, [&](const Stmt &side) { return stage_cube_operands(side, ctx); });
         }},
        pass("multi_buffer", multi_buffer),
        plan_memory_step(plan_ascend_memory),
        // The vector ops as AscendC's instructions (each side of a mix kernel by itself).
        {"select_vector_instructions (each side)",
         [](const Stmt &s, CompileContext &ctx, Kernel &k) {
             return each_side(s, [&](const Stmt &side) {
                 return select_vector_instructions(side, ctx, k.buffers);
             });
         }},
        // The pipes overlap by themselves; flags join them.
        {"insert_flags (each side)",
         [](const Stmt &s, CompileContext &ctx, Kernel &k) {
             return each_side(s,
                              [&](const Stmt &side) { return insert_flags(side, ctx, k.buffers); });
         }},
        drop_guards_step(),
    };
    t.memory_name = [](const SramBuffer &b) {
        return std::string(sim::ascend::mem_name(b.ascend_mem));
    };
    t.runtime_shapes = true;
    t.mma_int8 = true;
    t.block_bytes = 32;
    t.store_casts_accumulator = true;
    t.store_waits_before_first = true;
    return t;
}

} // namespace tandem::lower
