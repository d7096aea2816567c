#ifndef TANDEM_KERNEL_H
#define TANDEM_KERNEL_H

/** \file
 * compile(): Halide lowering for a plain host target, then Tandem's passes (dsl/lower/), giving a
 * Kernel: the async Stmt plus the tables a backend needs (arguments, on-chip buffers).
 */

#include "tandem/Func.h"
#include "tandem/Memories.h"
#include "tandem/Target.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace tandem {

/** The values of a kernel's runtime extents at one call, by the names its Stmt reads
 * ("A.extent.1"); empty for a kernel of static shapes. */
using Shapes = std::map<std::string, int64_t>;

/** A condition on the runtime extents (KernelArg::extent_name variables) that a call must meet,
 * and why: an input at least as large as the algorithm reads (RequiredRegions.h), a stride the
 * hardware can take (the Hopper plan). */
struct CallCheck {
    Halide::Expr holds;
    std::string why;
    bool target_limit =
        false; // the hardware's limit (ShapeError::target_limit), not the algorithm's
};

/** Text as a user reads it: names without the "$N" Halide appends to a name taken before. */
std::string user_text(const std::string &text);
std::string user_text(const Halide::Expr &e);

/** Throws ShapeError naming `kernel`, the first check that fails at `shapes` and the extents it
 * reads. */
void check_call(const std::vector<CallCheck> &checks, const Shapes &shapes,
                const std::string &kernel);

/** A kernel argument in DRAM: dense, dims[0] innermost (stride 1), every dim starting at 0. A
 * dim is static or known only at run time (`runtime`): the kernel's Stmt then reads its extent as
 * the variable extent_name(d), bound at each call (Kernel::bind_shapes), and `extents` holds the
 * estimate (0 when none was given). Strides are dense (set_stride), in terms of the extents. */
struct KernelArg {
    std::string name;
    Halide::Type type;
    std::vector<int> extents;
    bool output = false;
    std::vector<bool> runtime; // per dim; empty: all static
    /** Per dim of an input: the algorithm reads [0, read_extents[d]) (RequiredRegions: a call
     * check keeps it within the extent), undefined where the read does not start at 0 or is not
     * bounded; empty when not known. A TMA load may zero-fill past it. */
    std::vector<Halide::Expr> read_extents;
    /** The elements at `extents` (the static shape, or the estimates). */
    int64_t elements() const;
    /** The elements at one call's runtime extents. */
    int64_t elements(const Shapes &shapes) const;
    bool has_runtime_shape() const;
    std::string extent_name(int d) const; // "A.extent.1"

    /** One dim of the view bulk copies take of the tensor (extent and stride in elements):
     * constants, or in terms of the runtime extents (the variables extent_name(d)). */
    struct Dim {
        Halide::Expr extent, stride;
    };
    /** The tensor without its static dims of extent 1 (at least one dim is kept): such a dim has
     * the stride of the next one, so it only makes a box ambiguous (and a TMA stride illegal). A
     * runtime dim is always kept. */
    std::vector<Dim> copy_view() const;
    /** Per dim of the copy view: the extent the algorithm reads (read_extents) where known,
     * else the view's extent. */
    std::vector<Halide::Expr> view_read_extents() const;
    /** The copy view at one call's extents (every extent and stride a constant). */
    std::vector<Dim> copy_view(const Shapes &shapes) const;
};

/** An on-chip buffer placed by memory planning: `slots` versions of `slot_elements` each. */
struct SramBuffer {
    std::string name;
    sim::Space space =
        sim::Space::RSRAM;     // the ZPU scope (on Hopper: shared memory unless in_registers)
    bool in_registers = false; // Hopper: an MMA accumulator, private to each consumer
    sim::ascend::Mem ascend_mem = sim::ascend::Mem::UB; // Ascend: where the buffer lives
    Halide::Type type;
    int slots = 1;
    int64_t slot_elements = 0;
    int64_t offset_bytes = 0; // inside its scope
    /** > 0: the bytes a version takes on the chip where they are fewer than the model's (Hopper's
     * output staging held as a ring of two column blocks, MemoryPlanning.cpp); the model keeps
     * the whole tile and charges this. */
    int64_t chip_slot_bytes = 0;
    int64_t elements() const { return slots * slot_elements; }
    int64_t bytes() const { return elements() * type.bytes(); }
};

/** A Hopper mbarrier array: one barrier per version, each completing after `arrivals` arrivals
 * (plus the transaction bytes of the TMA loads that signal it). */
struct BarrierDecl {
    std::string name;
    int slots = 1;
    int arrivals = 1;
    int initial_phase = 0; // the waiter's first parity: 1 = pre-armed (a ring's empty barriers)
};

/** Everything the passes need from the schedule, gathered once. */
struct CompileContext {
    Target target;
    std::string output; // name of the output Func
    const Func *output_func = nullptr;
    int grid = 1;        // units the tile loop runs on (ZPU cores, Hopper CTAs)
    Halide::Expr tiles;  // Hopper, persistent: the tile count (Kernel::tiles)
    int ctas_per_sm = 0; // Hopper, persistent: the grid is sized at launch (Kernel)
    int cluster = 1;     // CTAs per thread-block cluster, cores per mesh cluster (Kernel::cluster)
    /** Hopper clusters: per mapped tile loop (its name), whether the CTA has a tile of its own in
     * the iteration (the tile-less CTAs of the last cluster store nothing). */
    std::map<std::string, Halide::Expr> cluster_owns_tile;
    bool one_tile_per_unit = false; // Hopper without ping_pong: a CTA per tile, so each tile loop
                                    // runs at most once per unit (straight-line code)
    bool vector_units_only = false; // no tile MMA: on Ascend the kernel runs on the AIV cores
    bool mix = false;               // Ascend: cube and vector cores joined through GM workspaces
    std::vector<KernelArg> workspaces; // GM the kernel uses for itself (a mix kernel's handoff)
    std::vector<std::string> inputs;   // input buffer names
    std::vector<KernelArg> args;       // the DRAM tensors: inputs, then the output
    std::vector<std::string> funcs;    // every Func of the pipeline
    std::vector<std::string> notes;    // what the passes decided, for --emit stmt
    std::vector<std::string> warnings; // what the user should know (the tools print them)
    std::map<std::string, int> slots;  // versions of each multi-buffered buffer
    std::vector<BarrierDecl> barriers; // Hopper mbarriers
    int warpgroups = 1;                // Hopper agents per CTA
    int consumer_warpgroups = 1; // Hopper: warpgroups running each consumer role (2: cooperative)
    std::vector<std::string> versions_by_consumer; // Hopper ping-pong: version = consumer index
                                                   // (result slots, copies a consumer issues)
    std::map<std::string, Directives> directives;  // of every Func of the pipeline, by name
    std::map<std::string, Halide::Internal::Function> functions;

    /** The directives of the Func named `func` (default ones for buffers that are not Funcs). */
    const Directives &of(const std::string &func) const;
    /** The Func whose values `buffer` holds: its own, or a Tuple's whose value `buffer` is
     * (Halide's `f.0`, `f.1`, ...); null for a tensor or a buffer of Tandem's. */
    const Halide::Internal::Function *function_of(const std::string &buffer) const;
};

struct Kernel {
    std::string name;
    Target target;
    std::vector<KernelArg> args; // inputs first, then the output
    std::vector<SramBuffer> buffers;
    int grid = 1; // ZPU: cores used; Hopper: CTAs launched; Ascend: AIC or AIV used
    /** Hopper, persistent (ctas_per_sm > 0): the tile loop strides by tandem_grid_size(), and a
     * launch takes min(SMs x ctas_per_sm, tiles) CTAs (SMs: the GPU's, at most the machine
     * description's), `tiles` a constant or in terms of the
     * runtime extents (a tile count known only at run time makes the grid persistent); `grid` is
     * that count on the machine description's SMs (what the model launches). */
    Halide::Expr tiles;
    int ctas_per_sm = 0;
    /** Hopper: CTAs per thread-block cluster (1: none), consecutive in the grid (rank = CTA index
     * % cluster); `grid` is a multiple of it, and so is a persistent launch. ZPU: cores per mesh
     * cluster, a run of `cluster` rows of one mesh column; tandem_core_id() is then the core's
     * mesh position, column * rows + row (zpu::mesh_position), so that a cluster's ranks are
     * consecutive ids as on Hopper. */
    int cluster = 1;
    bool vector_units_only = false; // no tile MMA: on Ascend an AIV-only kernel (else AIC-only)
    /** Ascend: a mix kernel (KERNEL_TYPE_MIX_AIC_1_2): `grid` AICs, each with its two AIVs; the
     * body is ir::make_mix(cube side, vector side), joined by cross-core flags through the
     * workspaces (AscendMix.h). */
    bool mix = false;
    std::vector<KernelArg>
        workspaces;              // GM of the kernel's own, allocated by its caller (f32 elements)
    int warpgroups = 1;          // Hopper: warpgroups per CTA (roles)
    int consumer_warpgroups = 1; // Hopper: warpgroups running each consumer role; 2 with
                                 // cooperative(): the model runs the role as one agent, the GPU
                                 // as two warpgroups on alternate 64-row MMA blocks of the tile
    std::vector<BarrierDecl> barriers;
    /** What a call's extents must meet (runtime shapes; none for static ones). */
    std::vector<CallCheck> call_checks;
    Halide::Internal::Stmt halide_stmt; // after Halide's lowering, before Tandem's passes
    Halide::Internal::Stmt body;        // the async Stmt
    std::vector<std::string> notes;
    /** What the user should know of the schedule: it leaves most cores idle. The generator main
     * and the CLI print them on standard error as "warning: ...". */
    std::vector<std::string> warnings;

    /** A pipeline of kernels (overview.md "Pipelines of kernels"): a Func computed at the root with
     * a map_to_cores of its own is a kernel of its own, writing its values to a tensor in DRAM
     * (an intermediate, named as the Func) that the kernels after it read. Then this Kernel is
     * the pipeline: `args` are the caller's, `stages` every kernel in the order they run (each
     * with its own arguments: the caller's tensors it reads and the intermediates, by name; the
     * last one writes the output), and the rest (body, buffers, grid) is empty. The caller
     * allocates the intermediates (`intermediates`); a kernel boundary orders everything. */
    std::vector<Kernel> stages;
    std::vector<KernelArg> intermediates;
    /** The runtime extents of the intermediates (KernelArg::extent_name) in terms of the caller's
     * (the region of each the output reads, from the pure algorithm's bounds). */
    std::map<std::string, Halide::Expr> intermediate_extents;
    bool is_pipeline() const { return !stages.empty(); }
    /** `shapes` (the caller's runtime extents) with the intermediates' added: what each kernel
     * of a pipeline runs at. */
    Shapes with_intermediates(const Shapes &shapes) const;

    const SramBuffer *buffer(const std::string &name) const;
    const KernelArg *arg(const std::string &name) const;
    /** The async Stmt with the buffer table and the notes, for `emit --what stmt` (a pipeline:
     * each kernel's in turn). */
    std::string stmt_text() const;
    /** halide_stmt as text, for `emit --what halide` (a pipeline: each kernel's in turn). */
    std::string halide_text() const;

    /** Whether an argument has a runtime extent. */
    bool has_runtime_shapes() const;
    /** The names of the runtime extents (KernelArg::extent_name) in argument and dim order: the
     * order in which launchers and libraries pass their values. */
    std::vector<std::string> runtime_extent_names() const;
    /** The values of the runtime extents (by the names the Stmt reads) for arguments
     * of the given extents (one list per argument, in order); Error naming the argument and the
     * dim when a static extent differs or an extent is below 1. */
    Shapes bind_shapes(const std::vector<std::vector<int>> &extents) const;
};

/** Whether `target` takes kernels with runtime extents (TargetLowering::runtime_shapes). */
bool takes_runtime_shapes(const Target &target);

/** The shape of a tiled MMA whose operand stages are to fit on chip (fitting_stages). */
struct MmaTiles {
    int N = 0;                   // the output's columns (its row pitch)
    int TM = 0, TN = 0, TK = 0;  // the tile
    int out_bytes = 4;           // the output's element
    int result_versions = 1;     // 2 with ping-pong result slots
    int64_t bias_bytes = 0;      // a staged bias tile
    bool runtime_shapes = false; // the kernel takes its extents at run time
};

/** The most operand stages of a tiled MMA (an A and a B tile per stage) that fit in `target`'s
 * on-chip memory beside the accumulator, the output staging and the bias (the target's own
 * arithmetic, TargetLowering::fitting_stages; 3 where the target gives none). */
int fitting_stages(const MmaTiles &tiles, const Target &target);

/** Compile `output` (and every Func it calls) for `target`. Throws tandem::Error on a bad schedule:
 * the message names the Func, the directive and the reason. */
Kernel compile(const Func &output, const std::vector<ImageParam> &inputs, const Target &target,
               const std::string &name);

} // namespace tandem

#endif
