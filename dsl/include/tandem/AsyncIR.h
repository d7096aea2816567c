#ifndef TANDEM_ASYNC_IR_H
#define TANDEM_ASYNC_IR_H

/** \file
 * The async Stmt: Halide's lowered Stmt plus Tandem's intrinsics. It is the contract between the
 * lowering passes, the simulator's executor and every backend.
 *
 *   tandem_copy(dst, dst_offset, src, src_offset, dims, e0, dst_s0, src_s0, ..., barrier, slot)
 *       an asynchronous bulk transfer of an affine box (offsets and strides in elements);
 *       its completion signals `barrier` version `slot` (ZPU: the slot's DMA token).
 *   tandem_wait(barrier, slot)
 *       block until the last transfer that signals (barrier, slot) is complete. A slot nothing has
 *       signalled yet is free to wait on (pre-armed).
 *   tandem_mma(acc, acc_off, acc_sn, acc_sm, a, a_off, a_sk, a_sm, b, b_off, b_sn, b_sk, N, M, K)
 *       acc(n, m) += sum_k a(k, m) * b(n, k), one tile MMA.
 *   let tandem.vector_op.<i> = tandem_vector_op(label, flops, buf, lo, extent, write, ...) in nest
 *       the element nest below runs on the vector core; the value lists what it touches.
 *   tandem_core_id()
 *       the index of the core running the control stream (Hopper: the CTA).
 *   tandem_grid_size()
 *       Hopper's persistent grid: the CTAs launched (gridDim.x, from the GPU's SM count).
 *   tandem_cluster_tile(owns, t, first)
 *       Hopper clusters: the tile a CTA runs, owns ? t : first; a CTA without a tile of its own
 *       (past the tile count, or a guarded tile of the last group) runs its cluster's first
 *       CTA's tile `first`, storing nothing.
 *
 * ZPU adds:
 *   tandem_sync(engine)                block until every op issued to "tensor" or "vector" is done
 *                                      (MMAs and vector ops are asynchronous on their engines)
 *   tandem_copy(..., barrier, slot, n, sender)
 *                                      ZPU mesh clusters (MeshBroadcast.h): the same box for the
 *                                      n cores of a cluster (a mesh column); rank `sender` loads
 *                                      it and broadcasts it down the column (VLink) into the
 *                                      others' buffer of the same name; their wait on (barrier,
 *                                      slot) is free, a mesh barrier after it tells them it landed
 *   tandem_mesh_barrier(label)         every core of the cluster arrives; each leaves knowing what
 *                                      all of them did before it
 *
 * Hopper adds:
 *   tandem_warpgroup()                 the warpgroup running the code (roles branch on it)
 *   tandem_arrive(barrier, slot)       arrive on an mbarrier (a consumer releasing a version)
 *   tandem_expect(barrier, slot, bytes) arrive and expect `bytes` of TMA loads (arrive.expect_tx)
 *   tandem_fence_proxy_async()         order generic smem writes before async-proxy reads
 *   tandem_advance(counter)            counter += 1 (a ring position, one per role)
 *   tandem_setmaxnreg(registers, inc)  re-balance registers between roles
 *   tandem_copy(..., barrier, slot, n)  Hopper clusters: the same box for the n CTAs of the
 *                                      cluster, loaded once (its TMA boxes dealt over them, each
 *                                      multicast to all n), completing bytes on each one's barrier
 *   tandem_arrive(barrier, slot, n)    arrive on the barrier of each of the n CTAs of the cluster
 *   tandem_mma_wait(acc, pending)      wait until at most `pending` of this warpgroup's MMA groups
 *                                      are in flight (wgmma.wait_group): on Hopper a tandem_mma
 *                                      is issued and committed as one group, and its operands and
 *                                      accumulator stay in use until such a wait retires it
 * Ascend adds, between pipes ("MTE2", "MTE1", "M", "FIX", "V", "MTE3"):
 *   tandem_set_flag(src, dst, event)   SetFlag<SRC_DST>(event), queued on src
 *   tandem_vector(op, dst, dst_offset, count, scalar?, src, src_offset, ...)
 *                                      one real vector instruction (Ascend; VectorInstruction)
 *   tandem_pipe_barrier(pipe)          PipeBarrier<PIPE_X>: the pipe's later ops wait for its
 *                                      earlier ones (Ascend's V: its ops are not ordered otherwise)
 *   tandem_wait_flag(src, dst, event)  WaitFlag<SRC_DST>(event), queued on dst
 * and in a mix kernel (cube and vector cores joined through a GM workspace; AscendMix.h):
 *   if (!tandem_vector_core()) { cube } if (tandem_vector_core()) { vector }
 *                                      the two sides (ASCEND_IS_AIC / ASCEND_IS_AIV)
 *   tandem_cross_core_set(pipe, flag)  CrossCoreSetFlag<2, PIPE_X>(flag), queued on pipe
 *   tandem_cross_core_wait(flag)       CrossCoreWaitFlag(flag): stalls the core's issue
 *
 * Hopper reads tandem_wait(barrier, slot) on an mbarrier with the waiter's own phase bit per
 * version (flipped at each wait), or tandem_wait(barrier, slot, parity) with the parity computed
 * from a ring position, when several agents share the waits of one ring (ping-pong consumers).
 *
 * Barrier names: "<buffer>.full" (data landed in a version of <buffer>) and "<buffer>.empty"
 * (an asynchronous store out of a version of <buffer> is done, so the version may be rewritten).
 */

#include "Halide.h"

#include <string>
#include <vector>

// Halide.h undefines its assertion macros at its end; Tandem's passes use the same ones for
// internal invariants (user errors are tandem::Error instead).
#ifndef internal_assert
#define internal_assert(c) _halide_internal_assertion(c, 0)
#endif
#ifndef internal_error
#define internal_error Halide::Internal::ErrorReport(__FILE__, __LINE__, nullptr, 0)
#endif

namespace tandem::ir {

using Halide::Expr;
using Halide::Internal::Stmt;

struct CopyDim {
    Expr extent, dst_stride, src_stride;
};

struct CopyOp {
    std::string dst, src;
    Expr dst_offset, src_offset;
    std::vector<CopyDim> dims; // innermost first
    std::string barrier;
    Expr slot;
    int multicast = 0;    // > 1: the CTAs (Hopper) or cores (ZPU) of the cluster it reaches
    Expr sender = Expr(); // ZPU, multicast: the rank that loads and broadcasts it (undefined: 0)
};

struct WaitOp {
    std::string barrier;
    Expr slot;
    Expr parity =
        Expr(); // Hopper rings: the phase parity to wait for; undefined = the waiter's phase bit
};

struct MmaOp {
    std::string acc, a, b;
    Expr acc_offset, acc_stride_n, acc_stride_m;
    Expr a_offset, a_stride_k, a_stride_m;
    Expr b_offset, b_stride_n, b_stride_k;
    Expr n, m, k;
    Expr accumulate = Expr(); // undefined: acc += a * b; else acc = (accumulate ? acc : 0) + a * b
};

struct Region {
    std::string buffer;
    Expr lo, extent;
    bool write = false;
};

struct VectorOp {
    std::string label;
    Expr flops;
    std::vector<Region> regions;
};

/** One of AscendC's vector instructions (sim/Ascend.h VectorCall: their forms and meanings). */
struct VectorInstruction {
    std::string op, dst;
    Expr dst_offset;
    Expr count;                                     // the count form; undefined in the repeat form
    std::vector<std::pair<std::string, Expr>> srcs; // buffer, offset
    Expr scalar;                                    // undefined when it takes none
    // The repeat form: `repeats` repeats of the first `mask` lanes; per operand (the destination,
    // then the sources) its block and repeat strides, in 32-byte blocks.
    Expr mask, repeats;
    std::vector<std::pair<int, int>> strides;
    int mode = 0; // Compare: CMPMODE (LT, GT, EQ, LE, GE, NE); Select: SELMODE
    // Gather (srcs: the src tensor, its offsets): srcBaseAddr in bytes, and the src tensor's
    // size in elements (every lane reads inside it).
    int64_t gather_base = 0, gather_window = 0;
};

struct FlagOp {
    std::string src, dst; // pipe names
    Expr event;
};

struct ArriveOp {
    std::string barrier;
    Expr slot;
    int cluster = 0; // > 1: on the barrier of each CTA of the cluster (Hopper)
};

Stmt make_copy(const CopyOp &op);
Stmt make_set_flag(const FlagOp &op);
Stmt make_wait_flag(const FlagOp &op);
bool as_set_flag(const Stmt &s, FlagOp *op);
bool as_wait_flag(const Stmt &s, FlagOp *op);
Stmt make_pipe_barrier(const std::string &pipe);
Stmt make_vector_instruction(const VectorInstruction &op);
Stmt make_cross_core_set(const std::string &pipe, const Expr &flag);
Stmt make_cross_core_wait(const Expr &flag);
bool as_cross_core_set(const Stmt &s, std::string *pipe, Expr *flag);
bool as_cross_core_wait(const Stmt &s, Expr *flag);
/** True on a vector core of a mix kernel (AscendC's ASCEND_IS_AIV). */
Expr vector_core();
bool is_vector_core(const Expr &e);
/** A mix kernel's body: the cube side, then the vector side, each guarded by the core's kind. */
Stmt make_mix(const Stmt &cube, const Stmt &vector);
bool as_mix(const Stmt &s, Stmt *cube, Stmt *vector);
bool as_vector_instruction(const Stmt &s, VectorInstruction *op);
/** Whether a vector op's body is real instructions (AscendVector.h) rather than element loops. */
bool is_vector_instructions(const Stmt &body);
bool as_pipe_barrier(const Stmt &s, std::string *pipe);
Stmt make_arrive(const ArriveOp &op);
/** arrive.expect_tx: the barrier version completes once `bytes` more bytes have landed. */
Stmt make_expect(const ArriveOp &op, const Expr &bytes);
bool as_expect(const Stmt &s, ArriveOp *op, Expr *bytes);
Stmt make_fence_proxy_async();
Stmt make_advance(const std::string &counter);
Stmt make_setmaxnreg(int registers, bool increase);
Expr warpgroup();
Stmt make_wait(const WaitOp &op);
Stmt make_mma(const MmaOp &op);
Stmt make_vector_op(const VectorOp &op, const Stmt &body);
Expr core_id();
/** The number of units the tile loop is spread over, known at launch (Hopper's persistent grid:
 * gridDim.x, sized from the GPU's SM count). */
Expr grid_size();

/** Hopper clusters: owns ? tile : fallback (tandem_cluster_tile), kept opaque so that passes can
 * tell a tile-less CTA's choice from the tile's own arithmetic. */
Expr cluster_tile(const Expr &owns, const Expr &tile, const Expr &fallback);
bool as_cluster_tile(const Expr &e, Expr *owns, Expr *tile, Expr *fallback);

/** Decoders: return false when the node is not that intrinsic. */
bool as_copy(const Stmt &s, CopyOp *op);
bool as_wait(const Stmt &s, WaitOp *op);
bool as_mma(const Stmt &s, MmaOp *op);
/** For `let tandem.vector_op.* = ...` returns the op and sets *body to the nest. */
bool as_vector_op(const Stmt &s, VectorOp *op, Stmt *body);
bool is_core_id(const Expr &e);
bool is_grid_size(const Expr &e);
bool as_arrive(const Stmt &s, ArriveOp *op);
bool is_fence_proxy_async(const Stmt &s);
/** The counter name of a tandem_advance, or false. */
bool as_advance(const Stmt &s, std::string *counter);
bool as_setmaxnreg(const Stmt &s, int *registers, bool *increase);
Stmt make_sync(const std::string &engine);
/** The engine of a tandem_sync, or false. */
bool as_sync(const Stmt &s, std::string *engine);
Stmt make_mesh_barrier(const std::string &label);
/** The label of a tandem_mesh_barrier, or false. */
bool as_mesh_barrier(const Stmt &s, std::string *label);
bool is_warpgroup(const Expr &e);
Stmt make_mma_wait(const std::string &acc, int pending);
/** The accumulator and pending group count of a tandem_mma_wait, or false. */
bool as_mma_wait(const Stmt &s, std::string *acc, int *pending);

std::string full_barrier(const std::string &buffer);
std::string empty_barrier(const std::string &buffer);

/** The name of the variable holding the version (slot) of a multi-buffered buffer. */
std::string stage_var(const std::string &buffer);

/** Apply a mutator to every Expr argument of an intrinsic statement (offsets, strides, slots)
 * and to the nest of a vector op; used by passes that substitute variables. */
Stmt substitute(const std::string &var, const Expr &value, const Stmt &s);

/** True if `s` reads or writes `buffer` (Load/Store or an intrinsic argument). */
bool touches(const Stmt &s, const std::string &buffer);
bool writes(const Stmt &s, const std::string &buffer);

/** Readable text of a Stmt (Halide's printer). */
std::string to_string(const Stmt &s);

} // namespace tandem::ir

#endif
