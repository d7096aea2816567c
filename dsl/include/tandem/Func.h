#ifndef TANDEM_FUNC_H
#define TANDEM_FUNC_H

/** \file
 * tandem::Func: a Halide::Func plus Tandem's directives for asynchronous data movement.
 *
 * The algorithm is written exactly as in Halide (f(x, y) = ..., RDom, ImageParam). The schedule
 * chains Halide's directives (forwarded) and Tandem's:
 *
 *     C.tile(j, i, jo, io, ji, ii, 256, 256).fuse(jo, io, t).map_to_cores(t).async_copy();
 *     A_tile.compute_at(acc, ko).async_copy().multi_buffer(3);
 *
 * Directives travel with the Halide Function itself, as trace tags "tandem:<directive>=<value>"
 * (the one place a Halide Function keeps user data), so that every copy of a Func, and the
 * Funcs a pipeline reaches, carry them; compile() reads them for every Func of the pipeline.
 */

#include "Halide.h"

#include <memory>
#include <string>
#include <vector>

namespace tandem {

using Halide::Expr;
using Halide::ImageParam;
using Halide::RDom;
using Halide::RVar;
using Halide::TailStrategy;
using Halide::Type;
using Halide::Var;
using Halide::VarOrRVar;

/** Tandem's directives of one Func. */
struct Directives {
    bool async_copy = false; // producing this Func is one asynchronous bulk transfer
    int multi_buffer = 0;    // 0 = not given; n >= 1 versions of the storage
    bool warp_specialize = false;
    bool ping_pong = false;
    bool cooperative = false; // Hopper: two consumer warpgroups share each tile, by rows
    int persistent = 0;       // Hopper: > 0 CTAs per SM in a persistent grid over the tiles
    int cluster = 0;          // > 1 consecutive tiles per cluster (Hopper CTAs, a ZPU mesh column)
    bool tile_mma = false;    // the update stage must become one tile MMA
    std::string cores_var;    // loop var whose iterations are spread over the cores
    bool vectorized = false;  // a Halide vectorize was requested (the ZPU rejects it)
    int row_statistics = 0;   // > 0: the Tuple's components after the first are the same along
                              // the first n dimensions (online_softmax's running max and sum)
    /** online_softmax's block max: a key block whose every key the mask hides (this Func -inf
     * at every row) leaves the state as it was; the block loop's name (lower/SkipMaskedBlocks). */
    std::string masked_block_max;
    /** online_softmax's block max: the state's buffer of the running max and the block loop
     * (lower/RunningMax: the block max starts from the running max). */
    std::string running_max;
    std::string running_max_loop;
    /** An L0A operand loaded once before the MMAs that read it (lower/ascend/AscendCube): each
     * of them loads its B operand after it, whose ready flag orders this load too. */
    bool loaded_once = false;
};

/** The directives recorded on a Halide Function (default ones if none). */
Directives directives_of(const Halide::Internal::Function &f);

/** Records that `f`'s Tuple components after the first are the same along its first `columns`
 * dimensions (Directives::row_statistics; online_softmax's state). */
void record_row_statistics(Halide::Func &f, int columns);
/** Records Directives::masked_block_max on online_softmax's block max. */
void record_masked_block_max(Halide::Func &f, const std::string &block_loop);
/** Records Directives::running_max and running_max_loop on online_softmax's block max. */
void record_running_max(Halide::Func &f, const std::string &buffer, const std::string &block_loop);

class Func;
struct OnlineSoftmax;

/** An update stage: Halide's Stage plus tile_mma(). */
class Stage {
public:
    Stage(Halide::Stage s, Halide::Func f) : stage_(std::move(s)), f_(std::move(f)) {}

    Stage &split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner,
                 const Expr &factor, TailStrategy tail = TailStrategy::Auto);
    Stage &reorder(const std::vector<VarOrRVar> &vars);
    template <typename... Args> Stage &reorder(const VarOrRVar &v, Args &&...rest) {
        return reorder({v, std::forward<Args>(rest)...});
    }
    /** The update is a matrix multiply-accumulate on tiles: it must lower to one tile MMA op. */
    Stage &tile_mma();
    /** Halide's rfactor: the partial reductions over `r` become a Func of `v` (its other
     * dimensions this Func's) that this update then reduces. Split-K: split the K loop into
     * slices, rfactor over the slices, and compute the partial Func at the root with a
     * map_to_cores of its own: it becomes a kernel of its own (Kernel::stages). */
    Func rfactor(const RVar &r, const Var &v);
    /** FlashAttention's online softmax (Milakov and Gimelshein's), a rewrite of this update as
     * Halide's rfactor is one of a reduction. The update must be acc += P(j) * V(j) over the keys
     * j (the RVar `keys`), P a softmax over j written as the textbook writes it: P = cast(E /
     * row_sum), E = exp(X(j) - row_max), row_max the max of X over j from -inf, row_sum the sum
     * of E over j from 0 (X: any expression of the key, the scores and a mask). It becomes a loop
     * over blocks of `block` keys (the last block shifted back to end at the last key, its keys
     * the block before took masked): per block the block's max of X, E relative to it, their
     * sum and the block's own matmul of cast(E) and V; per element of acc a state (the partial
     * output, the running max, the running sum) rescaled when the max grows; `consumer`'s calls
     * of acc read the output divided by the sum (lower/RunningMax then starts each block's max
     * from the running max: E relative to the running max, as in FlashAttention-2). The same
     * math; P is rounded before the division. Anything else is a tandem::Error saying what
     * differs. Returns the Funcs to schedule: the block matmul keeps its tile_mma(). */
    OnlineSoftmax online_softmax(const RVar &keys, int block, const Func &consumer);

    Halide::Stage &halide() { return stage_; }

private:
    Halide::Stage stage_;
    Halide::Func f_;
};

class Func {
public:
    Func();
    explicit Func(const std::string &name);
    explicit Func(const Halide::Func &f);

    // ---- algorithm: Halide's syntax ----
    template <typename... Args> Halide::FuncRef operator()(Args &&...args) const {
        return f_(std::forward<Args>(args)...);
    }
    Halide::FuncRef operator()(const std::vector<Expr> &args) const { return f_(args); }
    Halide::FuncRef operator()(const std::vector<Var> &args) const { return f_(args); }

    // ---- Halide's scheduling directives, forwarded ----
    Func &split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner,
                const Expr &factor, TailStrategy tail = TailStrategy::Auto);
    Func &tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo, const VarOrRVar &yo,
               const VarOrRVar &xi, const VarOrRVar &yi, const Expr &xfactor, const Expr &yfactor,
               TailStrategy tail = TailStrategy::Auto);
    Func &fuse(const VarOrRVar &inner, const VarOrRVar &outer, const VarOrRVar &fused);
    Func &reorder(const std::vector<VarOrRVar> &vars);
    template <typename... Args> Func &reorder(const VarOrRVar &v, Args &&...rest) {
        return reorder({v, std::forward<Args>(rest)...});
    }
    Func &compute_at(const Func &f, const VarOrRVar &var);
    Func &store_at(const Func &f, const VarOrRVar &var);
    Func &compute_root();
    Func &compute_inline();
    Func &bound(const Var &var, const Expr &min, const Expr &extent);
    Func &vectorize(const VarOrRVar &var, const Expr &factor);
    Func &unroll(const VarOrRVar &var);

    /** A wrapper Func that stages this Func for `consumer` (Halide's in()). */
    Func in(const Func &consumer);
    Func in();
    /** Stage an input for `consumer` (ImageParam::in). */
    static Func staged(const ImageParam &input, const Func &consumer);
    static Func staged(const ImageParam &input);

    Stage update(int idx = 0);

    // ---- Tandem's directives ----
    /** Producing this Func (a copy of an input, computed inside a loop of its consumer) becomes one
     * asynchronous bulk transfer; on an output Func, the store of each tile is asynchronous. */
    Func &async_copy();
    /** n versions of this Func's storage; the producer runs up to n-1 iterations ahead. */
    Func &multi_buffer(int n);
    /** Producer and consumer roles joined only by barriers (ZPU: the DMA producer runs ahead
     * across the tile loop, up to the engine's in-flight limit). Set on the output Func. */
    Func &warp_specialize();
    /** Two consumers alternate (ZPU: result slots alternate by tile parity). Output Func. */
    Func &ping_pong();
    /** Hopper: two consumer warpgroups share each tile, each computing half of its rows (the
     * tile's MMA blocks of 64 rows alternate between them): a tile twice as large for the same
     * registers per thread. Output Func, with warp_specialize(); not with ping_pong(). */
    Func &cooperative();
    /** Hopper: instead of a CTA per tile, a persistent grid of at most `ctas_per_sm` CTAs per SM,
     * each looping over tiles of the map_to_cores loop, so that multi-buffered copies run ahead
     * into the next tile and what is staged once per CTA (compute_root) is loaded once per CTA,
     * not per tile. ping_pong() and cooperative() imply one per SM. Output Func; the ZPU's and
     * Ascend's cores always loop over tiles. */
    Func &persistent(int ctas_per_sm = 1);
    /** Hopper: `ctas` consecutive iterations of the map_to_cores loop run on the CTAs of one
     * thread-block cluster (ctas = 2: a 2x1 or 1x2 cluster, by the tile order). Every staged copy
     * whose box the compiler proves the same for all of them is loaded once per cluster and
     * multicast (TMA .multicast::cluster) into each CTA's shared memory; the consumers then release
     * a version on the mbarriers of every CTA of the cluster. Output Func, with warp_specialize().
     * A CTA with no tile of its own (past the tile count, or a guarded tile of a short last group)
     * runs its cluster's rank 0 tile through the pipeline and stores nothing.
     * ZPU: `ctas` cores of one mesh column (it must divide the mesh's rows); what they share is
     * loaded by one of them in turn and broadcast down the column over VLink, between mesh
     * barriers (lower/zpu/MeshBroadcast.h); no warp_specialize() needed. */
    Func &cluster(int ctas);
    /** Spread the iterations of loop `var` (the tile loop) over the cores: block-to-core mapping.
     */
    Func &map_to_cores(const VarOrRVar &var);

    Halide::Func &halide() { return f_; }
    const Halide::Func &halide() const { return f_; }
    std::string name() const { return f_.name(); }
    Halide::OutputImageParam output_buffer() const { return f_.output_buffer(); }
    Directives directives() const { return directives_of(f_.function()); }

private:
    Halide::Func f_;
};

/** The Funcs online_softmax() makes: `state` per element of the accumulator, updated over
 * `block` (its RVar over the key blocks); the others computed once per block
 * (per_block(): compute_at(state, block)), `block_acc` the block's matmul (a tile MMA over its
 * keys, `block_keys`). The scores (the Funcs X reads) stay the user's to schedule, at the same
 * place. */
struct OnlineSoftmax {
    Func state, block_max, exps, operand, block_sum, block_acc;
    RVar block, block_keys;
    std::vector<Func> per_block() const { return {block_acc, block_sum, operand, exps, block_max}; }
};

} // namespace tandem

#endif
