#ifndef TANDEM_HOPPER_PLAN_H
#define TANDEM_HOPPER_PLAN_H

/** \file
 * The Hopper emitter's plan (Emitter.h says what the emitted CUDA is): where each shared buffer
 * lives on the GPU, the tensor maps and TMA boxes of its copies, the wgmma tiles of each
 * accumulator, and the bytes each full barrier expects. The code generator (CodeGen.h) and the
 * host code (Host.h) only print what the plan and the element-loop mapping (ElementLoops.h)
 * decided.
 *
 * Padding, not refusing: the hardware's granularity (a box row of 16 bytes, wgmma tiles of 64 in
 * K, N and M) is reached by boxes larger than the data, as long as the extra part of a store or
 * of a K tile lies past the tensor's edge (proven from the loop bounds, else checked at run time
 * for tail tiles; a padded tile in the middle of the tensor is a user error naming the Func and
 * its tile directive). Views, in order: the tensor's own dims (copy_view); whole rows as one dim
 * when a row stride is not a multiple of 16 bytes; for a wide tile of several rows, a box row
 * per tile row. MMA operands keep a 2-D view with a dim of extent 1 re-added.
 *
 * Thread copies, not refusing: a tile TMA cannot move (a global stride that is not a multiple of
 * 16 bytes, a box TMA cannot describe, padding that would land in the middle of the tensor) is
 * copied by the threads of the warpgroup that issues the copy (ld / st, zero-filling the padding
 * of a wgmma tile), which then complete its bytes on the full barrier as TMA would.
 *
 * Limits: the user errors listed in Emitter.h.
 */

#include "tandem/AsyncIR.h"
#include "tandem/Kernel.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tandem::hopper_backend {

constexpr int64_t swizzle_bytes = 128;       // a 128B-swizzled row; MMA operand column blocks
constexpr int64_t swizzle_atom_bytes = 1024; // 8 swizzled rows: the pattern repeats every 1024 B
constexpr int64_t max_box = 256;             // elements per TMA box dimension
constexpr int64_t max_shared_bytes = 232448; // per CTA on sm_90
constexpr int64_t max_accumulators = 128;    // f32 fragment registers per consumer thread
constexpr int warpgroup_threads = 128;

/** Variables the emitter itself declares are named "tandem.internal.<name>" in the IR it builds. */
extern const std::string internal_prefix;

/** A C identifier for an IR name: non-alphanumerics become '_'; names that would collide with the
 * emitter's own identifiers or C++ keywords get a trailing '_'. */
std::string c_name(const std::string &name);

std::string type_text(const Halide::Type &t);

/** `{1, 2, 3}`: integers as a C++ initializer (and the comments) write them. */
std::string brace_list(const std::vector<int64_t> &v);

bool proven(const Halide::Expr &e);

/** Calls every intrinsic statement and vector op of the control stream (not the element nests),
 * in program order. */
void for_each_op(const Halide::Internal::Stmt &s,
                 const std::function<void(const Halide::Internal::Stmt &)> &f);

enum class TileKind { Plain, MmaA, MmaB };

/** A shared-memory buffer as the GPU holds it: `slot_bytes` per version from `offset_bytes` (the
 * emitter's own layout, not the Kernel's: a version holds the full, padded tile, aligned as TMA
 * and wgmma need).
 *
 * Per copy dim (innermost first; empty when no TMA copy touches the buffer):
 *  - `data`: the largest extent (or row pitch) the Stmt's copies take;
 *  - `reach`: the elements a TMA copy moves along the dim on the GPU (>= data: rounded up to the
 *    hardware's granularity; what lies past a copy's own extent must lie past the tensor's edge
 *    wherever it matters: in stores and along K of MMA operands).
 * `layout` is the tile on the GPU: row-major extents (plain tiles; the Stmt's element nests are
 * rewritten to it when `dynamic_layout`), or the operand dims {K, M} (A), {N, K} (an N-major B) or
 * {K, N} (a K-major B) of a wgmma tile in 128B-swizzled column blocks of 64 bf16. `role` maps
 * each copy dim to a layout dim. */
struct Tile {
    const SramBuffer *buffer = nullptr;
    TileKind kind = TileKind::Plain;
    bool k_major = false; // a wgmma operand with K innermost: A or B when its K steps by 1
    std::vector<int64_t> data, reach, layout;
    std::vector<size_t> role;
    bool dynamic_layout = false; // the Stmt's pitches differ from the layout's (tail-sized rows,
                                 // a row padded to 16 bytes, or by 32 bytes against bank
                                 // conflicts: a copy-free tile, Planner::pad_rows)
    /** `dynamic_layout`: the Stmt's row pitch at its largest (a full tile's) and the constant
     * pitches of its copies (a tail's shorter rows where a path has its own copy; a row padded
     * on the GPU): map_tile_index tells a step of rows from a step of columns by them. */
    int64_t stmt_pitch = 0;
    std::set<int64_t> stmt_pitches;
    int64_t offset_bytes = 0, slot_bytes = 0;
    /** Non-empty: why TMA cannot move this tile. Its copies are made by the threads of the issuing
     * warpgroup, which complete `tx_bytes` on the full barrier (mbarrier.complete_tx) where a TMA
     * load would complete its boxes. A plain tile then keeps the Stmt's layout (empty `data`). */
    std::string thread_copy;
    int64_t tx_bytes = 0;
    /** Held as 128B-swizzled column blocks of 128 bytes ({128 bytes, rows} TMA boxes,
     * SWIZZLE_128B), not row-major, so that the rows a warp touches at once fall in different
     * banks (row-major rows of 128, 256 or 512 bytes put them all in the same ones): a TMA
     * store's source that a warp's fragment stores write 8 rows at a time, or a TMA-loaded tile
     * element code reads down its columns (a transpose: 32 lanes a row apart, a 32-way conflict
     * row-major, 4-way swizzled). */
    bool swizzled = false;
    /** > 0: a swizzled store source that an accumulator epilogue writes, held as a ring of this
     * many column blocks (not the whole tile): the emitter writes and stores the tile one column
     * block at a time, so the operand ring gets the shared memory the rest of the tile would take
     * (4 stages of a 128x256x64 bf16 tile instead of 3). The model holds the whole tile. */
    int ring_blocks = 0;
    /** An MMA A operand that element code writes instead of a copy (a matmul chain: the second
     * matmul's operand made from the first's accumulator): held in the wgmma layout a TMA load
     * would give it (`swizzled`, `dynamic_layout`: the element code's stores placed in the
     * 128B-swizzled column blocks), the epilogue writing zeros into its padding. */
    bool on_chip = false;

    /** The GPU layout is the plan's `layout` (a TMA or wgmma tile), not the Stmt's. */
    bool tma() const { return !data.empty(); }
    bool threads() const { return !thread_copy.empty(); }
    int64_t slot_elements() const { return slot_bytes / buffer->type.bytes(); }
    /** Versions lie at another stride on the GPU than in the Stmt. */
    bool rebased() const { return slot_bytes != buffer->slot_elements * buffer->type.bytes(); }
};

/** One CUtensorMap: a view of a kernel argument and the box one TMA instruction moves. A copy's
 * coordinate along dim d is offset / strides[d] % extents[d] (0 where the extent is 1). */
struct TensorMap {
    std::string name, arg, buffer;
    bool load = true;
    Halide::Type type;
    std::vector<Halide::Expr> extents, strides; // of the view, innermost first; strides in
                                                // elements (in terms of runtime extents)
    /** Each dim's extent as the map is encoded (globalDim): `extents`, or for an MMA operand's
     * load the extent the algorithm reads (KernelArg::read_extents; a call check keeps it within
     * the tensor), so that TMA zero-fills past it: a B with more rows than A's K pads with zeros,
     * not its own rows. Coordinates still divide by `extents`. */
    std::vector<Halide::Expr> bounds;
    std::vector<int64_t> box;
    std::vector<Halide::Expr> byte_strides; // of dims 1..: the map's global strides (a dim of
                                            // extent 1 is never stepped: any legal stride)
    std::string view;                       // how the view relates to the tensor, for comments
    int64_t chunk = 0;                      // > 0: the argument's dim 0 is split into chunks
    bool swizzle = false;                   // 128B swizzle (MMA operands)
    int blocks = 1;                         // boxes per copy along dim 0 (box[0] apart in the view)
    int64_t block_bytes = 0;                // shared memory between consecutive blocks
    int64_t last_box = 0; // > 0: the last block is this wide, through tensor map `last_name`
    std::string last_name;
    int rows = 1;          // > 1: a box per `row_step` rows of the view's dim 1, `rows` of them
    int64_t row_bytes = 0; // shared memory between the rows
    int64_t row_step = 1;  // rows of dim 1 per box: 1 (a plain tile's rows), or an MMA operand's
                           // rows in equal chunks of at most 256 (a box dim's limit)
    /** The bytes one copy moves (its full boxes). */
    int64_t box_bytes() const {
        int64_t n = type.bytes() * rows * ((blocks - 1) * box[0] + (last_box ? last_box : box[0]));
        for (size_t d = 1; d < box.size(); d++)
            n *= box[d];
        return n;
    }
};

/** An MMA accumulator held in each consumer thread's registers as wgmma fragments. */
struct Accumulator {
    const SramBuffer *buffer = nullptr;
    std::string a, b;
    bool b_k_major = false;      // B's K steps by 1 (b(n, k) with k innermost: tnspB 0)
    bool a_k_major = true;       // A's K steps by 1 (a(k, m), tnspA 0); else its M (tnspA 1)
    int64_t m = 0, n = 0, k = 0; // the full (padded) MMA tile
    Halide::Expr stride_m;       // elements between rows of the accumulator in the Stmt
};

/** A runtime check that a copy's box, `reach` elements along view dim `dim`, ends past the
 * tensor's edge where the copy's own extent is shorter (the planner could not prove it). */
struct TailCheck {
    size_t dim;
    int64_t reach;
    Halide::Expr view_extent, view_stride;
    bool outermost = false; // the view's last dim: the coordinate is offset / stride, no modulo
    Halide::Expr edge;      // where the tensor's data ends for the copy: its read extent (an MMA
                            // operand's tensor map ends there), else view_extent
};

struct Plan {
    std::map<std::string, Tile> tiles;
    std::map<std::string, Accumulator> accumulators;
    std::vector<TensorMap> maps;
    std::map<std::string, int64_t> expect_bytes; // full-box bytes landing on each full barrier
    std::set<std::string> counters;              // ring positions (tandem_advance)
    std::set<std::string> phase_bits;    // mbarriers waited on with the waiter's own phase bits
    std::set<std::string> store_sources; // shared buffers TMA stores read (their empty barriers)
    std::set<std::string> thread_args;   // arguments thread copies read or write: the kernel
                                         // takes their pointers
    std::map<const Halide::Internal::IRNode *, std::vector<TailCheck>> tail_checks; // per copy
    /** What a kernel with runtime extents needs of them that only a call can check (a global
     * stride TMA can take): where they fail, the call runs a plan whose threads copy the tensors
     * of the failing pitches (StridePolicy). */
    std::vector<CallCheck> launch_checks;
    /** Per launch check, the row pitch it is about (its bytes, as text): tensors of one pitch
     * (gemm's B and C rows are both N long) take TMA at the same calls. */
    std::vector<std::string> launch_pitches;
    int64_t shared_bytes = 0; // dynamic shared memory (plus 1024 B of alignment slack)

    /** The accumulator whose MMA tile is the padded wgmma tile of `operand`, an MMA operand made
     * on chip ({K, M}: its n and m), whose fragments an element nest writing the operand walks;
     * empty if none. */
    std::string fragments_of(const std::string &operand) const {
        auto t = tiles.find(operand);
        if (t == tiles.end() || !t->second.on_chip)
            return "";
        for (const auto &[name, a] : accumulators) {
            if (a.n == t->second.layout[0] && a.m == t->second.layout[1])
                return name;
        }
        return "";
    }

    /** How vector op `v`'s element code meets the wgmma fragments (the emitter's choice,
     * CodeGen::vector_op; the model's VectorCost and pad_rows follow it): it zeroes an
     * accumulator, reads one (an epilogue), or writes an MMA operand made on chip over the tile
     * of one (Operand); None: it runs over shared tiles only. */
    struct FragmentUse {
        enum class Kind { None, Zeroing, Epilogue, Operand } kind = Kind::None;
        std::string acc;
    };
    FragmentUse fragment_use(const ir::VectorOp &v, const Halide::Internal::Stmt &nest) const {
        for (const ir::Region &r : v.regions) {
            if (!accumulators.count(r.buffer))
                continue;
            // (Writing it with a value other than zero, it rescales it in place: an epilogue.)
            return {r.write && zeroes(nest, r.buffer) ? FragmentUse::Kind::Zeroing
                                                      : FragmentUse::Kind::Epilogue,
                    r.buffer};
        }
        for (const ir::Region &r : v.regions) {
            const std::string acc = r.write ? fragments_of(r.buffer) : "";
            if (!acc.empty())
                return {FragmentUse::Kind::Operand, acc};
        }
        return {};
    }
    /** Whether every store of `nest` into `buffer` stores zero. */
    static bool zeroes(const Halide::Internal::Stmt &nest, const std::string &buffer);

    const TensorMap &map(const std::string &arg, const std::string &buffer, bool load) const {
        for (const TensorMap &m : maps) {
            if (m.arg == arg && m.buffer == buffer && m.load == load)
                return m;
        }
        internal_error << "hopper emitter: no tensor map for " << arg << " / " << buffer << "\n";
        return maps.front();
    }
};

/** The version a Stmt offset into `tile` (version * the Stmt's slot + within) falls in, and the
 * within-version part; the GPU offset is version * tile.slot_elements() + within (the within
 * part in the GPU layout where the tile is not `dynamic_layout`). */
Halide::Expr version_of(const Tile &tile, const Halide::Expr &offset, Halide::Expr *within);

/** How a copy takes a global stride known only at run time (a runtime extent's rows): TMA
 * (`tma()`), the call checking it (Plan::launch_checks), or the threads of a warpgroup, which
 * take any stride: for every such pitch (`threads()`) or for those named (their text, as in
 * Plan::launch_pitches), the tensors of the others by TMA. A kernel whose TMA plan has launch
 * checks is emitted and run in several variants, the call choosing by the pitches that fail
 * (emit_cuda, stride_policy). */
struct StridePolicy {
    bool all = false;
    std::set<std::string> pitches;

    static StridePolicy tma() { return {}; }
    static StridePolicy threads() { return {true, {}}; }
    static StridePolicy threads(std::set<std::string> only) { return {false, std::move(only)}; }
    bool threads_for(const std::string &pitch) const { return all || pitches.count(pitch) > 0; }
};

/** The distinct pitches of a TMA plan's launch checks, in order of first check. */
std::vector<std::string> pitch_classes(const Plan &plan);

/** The pitches among `classes` whose launch checks fail at a call (`holds` says whether check i
 * holds there), as a bit set over `classes`. */
unsigned failing_pitches(const Plan &plan, const std::vector<std::string> &classes,
                         const std::function<bool(size_t)> &holds);

/** The policy of the variant a call whose failing pitches are bit set `failing` (over `classes`)
 * runs: where one pitch fails, its tensors by threads and the rest by TMA; where several do,
 * every runtime pitch by threads. */
StridePolicy stride_policy(const std::vector<std::string> &classes, unsigned failing);

/** The threads of a CTA of `kernel`: a warpgroup per role, a cooperative consumer role on
 * kernel.consumer_warpgroups of them. */
int cta_threads(const Kernel &kernel);

/** The fewest registers per thread the launch must allocate for its roles' setmaxnreg.inc not
 * to block (the producer's decrease and each consumer role's increase, over their threads);
 * 0 where no role sets its registers. */
int64_t register_floor(const Kernel &kernel);

/** The shared memory a CTA of `kernel` takes at launch: the dynamic carve-out (the tiles, and
 * 1024 B to align their base) and the static mbarriers and reduction scratch (16 B a warpgroup,
 * counted whether or not the emitter declares it). */
int64_t launch_shared_bytes(const Kernel &kernel, const Plan &plan);

/** The plan of `kernel`; throws tandem::Error where the GPU cannot run it. `prove_tails` false
 * keeps every tail check, those TailProof would remove too (the executor's test of the proof). */
Plan plan_kernel(const Kernel &kernel, const StridePolicy &strides = StridePolicy::tma(),
                 bool prove_tails = true);

} // namespace tandem::hopper_backend

#endif
