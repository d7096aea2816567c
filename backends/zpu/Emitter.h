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

/** The library interface of a kernel, Halide's calling convention: the header declares
 *     int <function>(struct halide_buffer_t *<input>..., struct halide_buffer_t *<output>);
 *     uint64_t <function>_last_cycles(void);            // ZPU cycles of the last call
 *     void <function>_set_error_handler(void (*)(const char *message));
 * and the library source defines them over the kernel of emit_cpp (same function name): it checks
 * every buffer against the shapes the kernel was compiled for (not null, element type, rank, min
 * 0, extents, dense strides, an aligned host pointer) and returns Halide's negative error code
 * with a message to the handler (default: stderr), writing nothing; else it runs the kernel on a
 * ZPU machine model built with the kernel's machine description, copies the output back and
 * returns 0. */
std::string emit_library_header(const Kernel &kernel, const std::string &function = "");
std::string emit_library(const Kernel &kernel, const std::string &function = "");

} // namespace tandem::zpu_backend

#endif
