#ifndef TANDEM_LOWER_VALIDATE_H
#define TANDEM_LOWER_VALIDATE_H

/** \file
 * Validation with user-facing errors, in two places:
 *  - validate_schedule, before Halide's lowering: the target exists, each directive sits on a Func
 *    that can honour it (warp_specialize, ping_pong and map_to_cores on the output; multi_buffer
 *    with async_copy; async_copy on a Func with storage; no Halide vectorize on the ZPU, whose
 *    vector core works on whole tiles).
 *  - validate_kernel, after Tandem's passes: every buffer the async Stmt names is a kernel
 *    argument or a planned on-chip buffer, and no version variable is left free.
 * Each error names the Func, the directive and the reason.
 */

#include "tandem/Kernel.h"

namespace tandem::lower {

void validate_schedule(const Func &output, CompileContext &ctx);

/** Every Function of the pipeline, with the wrappers in() made (Halide keeps those in the
 * wrapped Function's schedule, not in the call graph, until lowering). */
std::map<std::string, Halide::Internal::Function>
pipeline_functions(const Halide::Internal::Function &output);
void validate_kernel(const Kernel &kernel);

} // namespace tandem::lower

#endif
