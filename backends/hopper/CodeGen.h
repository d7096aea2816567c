#ifndef TANDEM_HOPPER_CODEGEN_H
#define TANDEM_HOPPER_CODEGEN_H

/** \file
 * The printer of a Hopper kernel's device code (internal to the emitter): one CodeGen walks the
 * kernel's control stream and prints it as the CUDA Emitter.h describes. Its methods live in two
 * files: Emitter.cpp prints the control stream (roles, loops and branches, barriers and the
 * warpgroup syncs they need, TMA and thread copies, MMAs) and the kernel around it;
 * ElementCode.cpp prints the element nests of vector ops as ElementLoops.h mapped them (over
 * shared tiles, over accumulator fragments). What it prints was decided by the plan (Plan.h) and
 * the element-loop mapping; CodeGen tracks only what printing needs: the role it is in, the
 * indentation and scopes, and whether the role's threads still need a barrier.
 */

#include "CudaExpr.h"
#include "ElementLoops.h"
#include "Plan.h"

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace tandem::hopper_backend {

class CodeGen {
    using Expr = Halide::Expr;
    using Stmt = Halide::Internal::Stmt;
    using IRNode = Halide::Internal::IRNode;
    using Call = Halide::Internal::Call;
    using Load = Halide::Internal::Load;
    using Store = Halide::Internal::Store;
    using For = Halide::Internal::For;
    using LetStmt = Halide::Internal::LetStmt;
    using IfThenElse = Halide::Internal::IfThenElse;

public:
    CodeGen(const Kernel &k, const Plan &p) : kernel(k), plan(p) {
        for (const std::string &name : k.runtime_extent_names())
            expr.nonnegative_vars.insert(name); // an extent is never negative
    }

    std::ostringstream os;
    int indent = 1;
    bool compute_role = false;
    /** The role runs on the cooperative consumer warpgroups (Kernel::consumer_warpgroups > 1):
     * its barriers, element loops and elected thread span them all. */
    bool cooperative_role = false;
    bool lone_producer = false; // a producer role walked by its elected thread alone
    /** The runtime divisors the body divides by (their C++ expression and name), prepared once
     * at the kernel's start (hopper::Divisor). */
    std::vector<std::pair<std::string, std::string>> divisors;
    /** The body checks tail boxes at run time (hopper::check_tail): the kernel declares the
     * flag they clear and traps on it at its end. */
    bool checks_tails = false;
    int role_threads() const {
        return cooperative_role ? warpgroup_threads * kernel.consumer_warpgroups
                                : warpgroup_threads;
    }
    std::string role_thread() const {
        return cooperative_role ? "thread_in_consumers" : "thread_in_warpgroup";
    }

    void role_body(const Stmt &s);

    void leave_unless_elected() {
        os << line()
           << "if (!elected) return; // the producer's elected thread walks its loop alone\n";
    }

    void stmt(const Stmt &s);

private:
    /** The kernel's expressions: CudaExpr, with the element code's loads (tiles, fragment
     * registers) and the kernel's own ids. */
    class KernelExpr : public CudaExpr {
    public:
        explicit KernelExpr(CodeGen &g) : g(g) {}

    private:
        CodeGen &g;
        std::string load(const Load *l) override { return g.load(l); }
        std::string call(const Call *c) override {
            if (ir::is_core_id(c))
                return "int(blockIdx.x)";
            if (ir::is_grid_size(c))
                return "int(gridDim.x)";
            if (ir::is_warpgroup(c))
                return "warpgroup";
            return CudaExpr::call(c);
        }
    };

    const Kernel &kernel;
    const Plan &plan;
    KernelExpr expr{*this};
    bool synced = false; // no thread of the warpgroup touched shared memory since its last barrier
    bool pending_sync = false;    // threads wrote shared memory: a barrier before anyone reads it
    std::vector<Loop> nest_loops; // the element nest being emitted (for tile index rewriting)
    // Inside an accumulator epilogue: the current fragment register's index ("[m64][i]"), the
    // same in every accumulator the epilogue reads (FragmentEpilogue::accumulators).
    std::string fragment;
    std::set<std::string> fragment_buffers;
    // Inside an epilogue over fragments: the C names of the register's row and column in the
    // tile. An MMA operand made on chip is written there, whatever its Stmt index says (Halide
    // drops the loop of a tile one row or one column wide, and a one-column tile's rows step 1).
    std::string fragment_row, fragment_col;
    /** Accumulator epilogues into a column-block ring (Tile::ring_blocks), emitted with the store
     * that follows them, one column block at a time; `column_block` is set while one is. */
    struct Epilogue {
        ir::VectorOp op;
        Stmt nest;
        std::string acc;
    };
    std::map<std::string, Epilogue> deferred;
    std::map<std::string, ir::MmaOp> last_mma; // per accumulator, the MMA emitted last
    bool column_block = false;
    int loop_depth = 0; // loops of the control stream around the statement being emitted
    std::vector<std::set<std::string>> scopes{{}};

    std::string line() const { return std::string(4 * indent, ' '); }

    /** An expression for `if (...)`: without the printer's outer parentheses. */
    std::string condition(const Expr &e) { return expr.print_bare(e); }

    void open(const std::string &text) {
        os << line() << text << "\n";
        indent++;
        scopes.emplace_back();
    }
    void close(const std::string &text = "}") {
        indent--;
        scopes.pop_back();
        os << line() << text << "\n";
    }

    static bool ends_with(const std::string &s, const std::string &tail) {
        return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
    }

    void sync();
    void flush() {
        if (pending_sync)
            sync();
    }

    /** Whether `s` starts with a store the threads make (Plan.h: a tile TMA cannot move). */
    bool thread_store(const Stmt &s) const;

    // ---- control flow ----

    void loop(const For *f);

    void let(const Stmt &s, const LetStmt *l);

    void branch(const IfThenElse *i);

    void role_comment(const Stmt &s, const std::string &who);

    /** The roles: one branch per warpgroup (setmaxnreg needs each role in its own branch). */
    void roles(const IfThenElse *i);

    // ---- intrinsics ----

    std::string barrier(const std::string &name, const Expr &slot) {
        return "&" + c_name(name) + "[" + expr(slot) + "]";
    }

    bool is_mbarrier(const std::string &name) const;

    void intrinsic(const Stmt &s);

    /** The shared-memory address of a Stmt offset into `buffer`: the version it falls in at the
     * GPU's version stride (Plan's layout), plus the part within the version. */
    std::string address(const std::string &buffer, const Expr &offset);

    static std::string int_list(const std::vector<std::string> &v);

    /** A copy TMA cannot make (Plan.h): the warpgroup's threads move the elements; into shared
     * memory, they then complete the tile's bytes on the full barrier. */
    void thread_copy(const ir::CopyOp &c, bool load, const std::string &arg,
                     const std::string &buffer);

    void copy(const ir::CopyOp &c, const IRNode *node);

    /** `x` / `d` and `x` % `d` for a TMA box's coordinates from its element offset: C's operators
     * where `d` is a constant (a shift or a mask for powers of two), hopper::fast_div / fast_mod
     * by a Divisor prepared at the kernel's start where it is made of runtime extents (a multiply
     * and a shift: the producer issues them every k-step). */
    std::string quotient(const std::string &x, const Expr &d);
    std::string remainder(const std::string &x, const Expr &d);
    /** The name of the prepared divisor for `d`, or "" where `d` reads more than runtime
     * extents (then C's operators). */
    std::string divisor(const Expr &d);

    /** An arrival by one thread: on this CTA's barrier, or on each CTA's of the cluster. */
    std::string arrive(const ir::ArriveOp &a);

    /** Fragment blocks of 64 rows each thread holds: all of the tile's, or with cooperative
     * consumers every other one. */
    int blocks(const Accumulator &a) const {
        const int sharing = cooperative_role ? kernel.consumer_warpgroups : 1;
        return int((a.m / 64 + sharing - 1) / sharing);
    }

    /** Opens the unrolled loop over this thread's fragment blocks, defining m64 (the block's
     * 64-row index in the tile); returns the fragment array's index for it. */
    std::string open_blocks(const Accumulator &a);
    void close_blocks(const Accumulator &a) {
        if (cooperative_role && a.m / 64 % kernel.consumer_warpgroups != 0)
            close();
        close();
    }

    void mma(const ir::MmaOp &m);

    // ---- element nests ----

    std::string load(const Load *l);

    /** The index of a tile element on the GPU. A version starts at version * the GPU's version
     * stride (Plan's layout). Tiles whose Stmt layout differs from the GPU's (rows of a tail's
     * size, or rows padded to 16 bytes) are rewritten to the full-tile layout: the loop var
     * stepping by 1 is dim 0, the other one steps by the full row. */
    std::string tile_index(const Tile &t, const Expr &index);

    std::string gpu_index(const Tile &t, const Expr &index);

    void store(const Store *st);

    /** Statements inside an element nest, run by the current thread. */
    void element(const Stmt &s);

    void vector_op(const ir::VectorOp &v, const Stmt &nest);

    /** The whole nest (Elementwise), or its strided loops with the others in each thread
     * (ThreadPerElement), as one range of elements strided over the warpgroup's threads. */
    void parallel(const ir::VectorOp &v, const TileNest &n);

    /** Declares the min and extent of the first `count` loops; returns their extents' product. */
    std::string declare_extents(const std::vector<Loop> &loops, size_t count);

    /** Defines the vars of the first `count` loops from the flat index `flat` (the last of them
     * innermost). */
    void unflatten(const std::vector<Loop> &loops, size_t count, const std::string &flat);

    /** store[i] = store[i] op f(k) over the innermost loop k: per-thread partials over k, a
     * warpgroup reduction, one thread updates the element. Outer loops run in turn. */
    void reduction(const ir::VectorOp &v, const std::vector<Loop> &loops, const Reduction &r);

    void zero_fragment(const ir::VectorOp &v, const Stmt &nest, const std::string &acc);

    /** The fragment registers an epilogue walks, "first; i < end": all a.n / 2 of a 64-row block,
     * or in a column block (`column_block`) the W / 2 of its W columns (register i holds column
     * 8 * (i / 4) + ...: each 8 columns are 4 registers). */
    std::string registers(const Accumulator &a, int64_t block_columns) const;

    /** The element nest reading the accumulator, run by each thread over the (row, col) of its own
     * wgmma fragment registers, guarded by the nest's extents. */
    void epilogue(const ir::VectorOp &v, const Stmt &nest, const std::string &acc,
                  bool reads = true);
    /** An epilogue that reduces each row of the accumulator over its columns
     * (FragmentEpilogue::row_reduction). */
    void row_reduction(const ir::VectorOp &v, const FragmentEpilogue &e, const std::string &acc);
    /** FragmentEpilogue::row_loads: each thread's two rows' values loaded before its registers
     * (arrays of two, by the register's half), and `body` reading them. */
    Stmt row_values(const FragmentEpilogue &e, const Stmt &body);
    /** In the register loop: the values of register i's row. */
    void declare_row_values(const FragmentEpilogue &e, const std::string &half);
    template <class IR> IR replace_row_loads(const FragmentEpilogue &e, IR ir);
    /** Inside an epilogue's `if` over the nest's extents: an else that writes zeros into the MMA
     * operands it makes (FragmentEpilogue::operands), their padding. */
    void zero_operands_outside(const FragmentEpilogue &e);
    /** Ends an epilogue over a's fragments: its blocks and scope closed, a barrier pending. */
    void close_epilogue(const Accumulator &a);

public:
    bool uses_reduction = false;
};

} // namespace tandem::hopper_backend

#endif
