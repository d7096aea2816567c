#ifndef TANDEM_ZPU_EMITTER_H
#define TANDEM_ZPU_EMITTER_H

/** \file
 * The ZPU emitter: one readable C++ source per kernel. The kernel is a single control stream
 * calling the ZPU runtime API (runtime.h): DMA start returning a token, DMA wait, MMA, vector ops
 * with their element loops as plain C++, the core id. Tokens are arrays named after the barriers
 * (A_tile_full[3], C_stage_empty[2]); comments mark the pipeline phases.
 *
 * The source defines
 *     void <function>(zpu::Context &ctx);                       // one core's control stream
 *     const std::vector<zpu::BufferDecl> &<function>_buffers();  // the on-chip carve-out
 * and compiles against backends/zpu/runtime.h and the simulator (tests compile and run it).
 */

#include "tandem/Kernel.h"

#include <string>

namespace tandem::zpu_backend {

std::string emit_cpp(const Kernel &kernel, const std::string &function = "");

} // namespace tandem::zpu_backend

#endif
