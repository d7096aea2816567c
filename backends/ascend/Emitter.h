#ifndef TANDEM_ASCEND_EMITTER_H
#define TANDEM_ASCEND_EMITTER_H

/** \file
 * The Ascend emitter: one AscendC source per kernel, written the way a kernel engineer writes
 * AscendC by hand with explicit buffers and flags, that means what the Ascend executor
 * (Executor.h) runs on the machine model: the same ops, on the same pipes, in the same order.
 * It compiles for the host against backends/ascend/runtime/kernel_operator.h, Tandem's CPU
 * implementation of the AscendC subset below on the Ascend machine model (AscendC's own CPU debug
 * mode does the same with its library), and defines
 *
 *     extern "C" __global__ __aicore__ void <function>(GM_ADDR <arg>, ...);  // Kernel::args order
 *
 * (a mix kernel takes the launch's workspace last: GM_ADDR workspace, workspace_bytes() of it).
 *
 * How the async Stmt maps to AscendC:
 *
 *     kernel argument               GM_ADDR parameter; GlobalTensor<T> + SetGlobalBuffer
 *     SramBuffer                    TBuf<TPosition::VECCALC (UB) | A1/B1 (L1) | A2 (L0A) |
 *                                   B2 (L0B) | CO1 (L0C)> + TPipe::InitBuffer + Get<T>(), in
 *                                   Kernel::buffers order, which is the order of the Kernel's
 *                                   offsets (each aligned as the scope needs)
 *     tandem_core_id()              block_idx (const int64_t block_idx = AscendC::GetBlockIdx()
 *                                   at the top: vector ops' element loops run later, when the
 *                                   model executes them, and read the copy)
 *     tandem_copy GM <-> UB/L1      AscendC::DataCopy(dst[offset], src[offset], ...), the box as
 *                                   - a count (one dimension, contiguous, whole 32 B blocks),
 *                                   - DataCopyParams{blockCount, blockLen, srcStride, dstStride}
 *                                     in 32 B blocks (two dimensions, rows contiguous, constant
 *                                     extents and strides in whole blocks), or
 *                                   - AscendC::DataCopyPad(dst, src, DataCopyExtParams) rows of
 *                                     any byte length into UB rows on 32 B blocks (a column:
 *                                     rows of one element); any other box is a user error
 *     tandem_copy GM -> L1          AscendC::DataCopy(dst, src, Nd2NzParams) (Cube.h: the real
 *     tandem_copy L1 -> L0A/L0B     AscendC::LoadData(dst, src, LoadData2DParams) per strip
 *     tandem_mma                    AscendC::Mmad(c, a, b, MmadParams) cube instruction of each)
 *     tandem_copy L0C -> GM         AscendC::Fixpipe<T, float, CFG_ROW_MAJOR>(dst, src,
 *                                   FixpipeParamsV220)
 *     tandem_vector(...)            the vector instruction itself (Add, Muls, ReduceSum, ...)
 *     mix kernel sides              if ASCEND_IS_AIC { TPipe, its TBufs; code } if ASCEND_IS_AIV
 * {..} tandem_cross_core_set(p, f)   AscendC::CrossCoreSetFlag<2, PIPE_P>(f)
 *     tandem_cross_core_wait(f)     AscendC::CrossCoreWaitFlag(f)
 *     workspace                     GlobalTensor over AscendC::GetUserWorkspace(workspace)
 *     tandem_set_flag(src, dst, e)  AscendC::SetFlag<AscendC::HardEvent::SRC_DST>(e)
 *     tandem_wait_flag(src, dst, e) AscendC::WaitFlag<AscendC::HardEvent::SRC_DST>(e)
 *     let x.ring = 0 / advance      int64_t x_ring = 0; ... x_ring += 1;
 *     vector op                     its AscendC instructions (AscendVector.h chose them; a nest
 *                                   without them is a user error at compile time)
 *
 * Flag pairs (mutation testing): `drop_flag_pair` = N >= 0 leaves out the N-th pair of flag
 * statements. The flag statements are enumerated in program-text order (pre-order, the order they
 * are emitted in). A flag's key is (src pipe, dst pipe, simplified event expression); among the
 * statements of one key, the i-th SetFlag statement and the i-th WaitFlag statement form a pair.
 * Pairs are numbered by the text position of their SetFlag; a statement without a partner of its
 * key is in no pair and is never dropped. For statements that each run once this is the machine's
 * own matching (the k-th WaitFlag of (src, dst, id) consumes the k-th SetFlag). The emitted file
 * says how many pairs there are ("// flag pairs: P") and lists them ("//   flag pair N: SetFlag<..>
 * / WaitFlag<..>"); a mutant says which pair it lacks and leaves a comment where each of its two
 * statements was.
 *
 * Limits: element types f32, bf16, f16 (cube operands) and i32 (the model's); vector ops on UB
 * only; float calls sqrt, exp, log, floor, ceil, tanh, abs (other calls are a user error naming the
 * call).
 */

#include "tandem/Kernel.h"

#include <string>
#include <vector>

namespace tandem::ascend_backend {

/** AscendC source of `kernel`; `function` names the kernel (default: the kernel's name). */
/** The library interface of the kernel (common/Library.h): the header, and a source holding the
 * AscendC kernel (as FUNCTION_kernel) and FUNCTION(), which runs it on the Ascend machine model
 * through the CPU runtime (runtime/kernel_operator.h). */
std::string emit_library_header(const Kernel &kernel, const std::string &function = "");
std::string emit_library(const Kernel &kernel, const std::string &function = "");

std::string emit_ascendc(const Kernel &kernel, const std::string &function = "",
                         int drop_flag_pair = -1);

/** The bytes of the workspace a mix kernel takes after its arguments (0: none). */
int64_t workspace_bytes(const Kernel &kernel);
/** A runtime-shape kernel's tiling data (its last GM_ADDR, int32): the values of the runtime
 * extents (Kernel::runtime_extent_names) for arguments of `extents`. */
std::vector<int32_t> tiling(const Kernel &kernel, const std::vector<std::vector<int>> &extents);

/** One pair of the enumeration above, as emitted text (for tests and the file header). */
struct FlagPair {
    std::string set, wait;
};
std::vector<FlagPair> flag_pairs(const Kernel &kernel);

} // namespace tandem::ascend_backend

#endif
