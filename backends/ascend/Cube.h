#ifndef TANDEM_ASCEND_CUBE_H
#define TANDEM_ASCEND_CUBE_H

/** \file
 * The cube's real AscendC instructions for the async IR's copies and MMAs between GM, L1, L0A,
 * L0B and L0C: one translation, used by the executor (with the values of the kernel's
 * variables) and the emitter (as C++ expressions), so the two record the same instructions.
 *
 *   GM -> L1   DataCopy(L1, GM, Nd2NzParams)         row-major tile -> Nz (FractalLayout)
 *   L1 -> L0A  LoadData(L0A, L1, LoadData2DParams)   A into Zz, B into Zn: a call per row or
 *   L1 -> L0B  LoadData(L0B, L1, LoadData2DParams)   column of fractals, whichever side has
 *                                                    fewer, or one call where the fractals lie
 *                                                    in L1 in L0's order; a B stored row-major
 *                                                    transposes each fractal, a B stored as
 *                                                    its transpose (attention's K) loads as is
 *   (8-bit)    LoadDataWithTranspose(L0A/L0B, L1, LoadData2dTransposeParams)   an int8 operand
 *                                                    stored with K outermost (ifTranspose is
 *                                                    16-bit only): 32 x 32 blocks, a call per
 *                                                    K block; its L1 rows padded to 32
 *   MMA        Mmad(L0C, L0A, L0B, MmadParams)       Zz x Zn -> Nz, C0 = 32 bytes of elements
 *   L0C -> GM  Fixpipe(GM, L0C, FixpipeParamsV220)   Nz -> row-major, F322BF16, F322F16 or NoQuant
 * Layouts: sim/Ascend.h. Every field is a Halide Expr of the kernel's variables and, for
 * LoadData, of `index`, the variable of its loop of `count` calls.
 */

#include "tandem/AsyncIR.h"
#include "tandem/Kernel.h"

#include <string>

namespace tandem::ascend_backend {

struct CubeCall {
    enum class Kind { Nd2Nz, LoadData, LoadDataTranspose8, Mmad, Fixpipe } kind = Kind::Nd2Nz;
    std::string dst, src, src2; // Mmad: c, a, b
    Halide::Expr dst_offset, src_offset, src2_offset;
    // Nd2Nz
    Halide::Expr n_value, d_value, src_d_value, dst_nz_c0_stride;
    // LoadData: `count` calls; offsets and start_index may use `index` (LoadDataTranspose8:
    // start_index 0, the start in src_offset; two fractals per repeat)
    Halide::Expr count, start_index, repeat_times, src_stride, dst_gap, dst_frac_gap;
    bool transpose = false;
    Halide::Expr
        check; // true when the read starts at a whole fractal of its tile (the executor checks)
    // Mmad
    Halide::Expr m, n, k, accumulate;
    // Fixpipe
    Halide::Expr n_size, m_size, fix_src_stride, dst_stride;
};

/** The loop variable of a LoadData call's `count` calls. */
const std::string &cube_index();

/** Whether the copy runs on the cube's instructions (GM -> L1, L1 -> L0A/L0B, L0C -> GM). */
bool is_cube_copy(const Kernel &kernel, const ir::CopyOp &copy);
/** The instruction for a cube copy; internal error for a copy they cannot make. */
CubeCall cube_copy(const Kernel &kernel, const ir::CopyOp &copy);
CubeCall cube_mma(const Kernel &kernel, const ir::MmaOp &mma);

} // namespace tandem::ascend_backend

#endif
