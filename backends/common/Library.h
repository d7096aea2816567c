#ifndef TANDEM_COMMON_LIBRARY_H
#define TANDEM_COMMON_LIBRARY_H

/** \file
 * The library interface of a kernel that runs on a machine model, with Halide's calling
 * convention (README "Writing a generator"): every target's "h" and "library" outputs.
 *
 *   int NAME(halide_buffer_t *in..., halide_buffer_t *out)   0, or a negative
 *       halide_error_code_t with the output untouched (null, unaligned, wrong type, rank, extents
 *       or strides: the kernel takes dense buffers of its static shapes)
 *   int NAME_argv(void **args)                               Halide's _argv
 *   const halide_filter_metadata_t *NAME_metadata(void)      Halide's _metadata (the static
 *                                                            extents as buffer estimates)
 *   uint64_t NAME_last_cycles(void)                          the model's cycles of the last call
 *   void NAME_set_error_handler(void (*)(const char *))      default: stderr
 *
 * A backend gives what runs the kernel: `run` is C++ statements inside a try block that see
 * `buffers[i]` (the checked halide_buffer_t of argument i), return through
 * fail(code, message) on a model error and set `last_cycles`.
 *
 * Memory::Device (hopper): the buffers' `device` fields are the kernel's device pointers (a
 * CUdeviceptr from cudaMalloc, as Halide's CUDA device interface keeps it; 16-byte aligned for
 * TMA); the host fields are not read. last_cycles is 0 there (time the call with CUDA events).
 */

#include "sim/Common.h"
#include "tandem/Kernel.h"

#include <string>
#include <vector>

namespace tandem::library {

/** The models' element type as C++ ("tandem::sim::DType::F32"). */
const char *dtype_enum(sim::DType t);

/** An argument's name as declared: without the "$N" Halide appends to a name taken before. */
std::string declared(const KernelArg &a);

/** The header; `model` names what runs the kernel ("the ZPU machine model"). */
std::string header(const Kernel &kernel, const std::string &function, const std::string &model);

/** The kernels a call runs, in order: a pipeline's stages (Kernel::stages), or the kernel. */
std::vector<const Kernel *> kernels_of(const Kernel &kernel);

/** The C function of each of kernels_of(kernel): `function` for the last, `function`_<Func> for
 * the kernels of a pipeline before it (Kernel::stages, named after the Func they write). */
std::vector<std::string> kernel_functions(const Kernel &kernel, const std::string &function);

/** An argument of one of kernels_of(kernel) as the library's code reaches it, as C++: the
 * caller's buffers[i], or an intermediate of a pipeline that the call allocates
 * (intermediates(kernel)). */
struct ArgAccess {
    std::string data;     // a pointer to its elements (host, or device with Memory::Device)
    std::string elements; // an int64_t
    std::string extents;  // a std::vector<int64_t>
};
std::vector<ArgAccess> arg_access(const Kernel &kernel, const Kernel &stage, bool device = false);

/** C++ statements that allocate a pipeline's intermediates (host vectors; none otherwise). */
std::string intermediates(const Kernel &kernel);

enum class Memory { Host, Device };

/** The library's source: `includes` and `helpers` (code at namespace scope before NAME), then the
 * interface around `run`. */
std::string source(const Kernel &kernel, const std::string &function, const std::string &includes,
                   const std::string &helpers, const std::string &run,
                   Memory memory = Memory::Host);

} // namespace tandem::library

#endif
