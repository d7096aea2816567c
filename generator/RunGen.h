#ifndef TANDEM_RUNGEN_H
#define TANDEM_RUNGEN_H

/** \file
 * The runner of a generated library, like Halide's RunGenMain: add_tandem_library builds
 * `<lib>_run`, whose main calls run_generated with the library's _metadata, _argv and
 * _last_cycles. It allocates every argument at the kernel's extents (the metadata's estimates),
 * fills the inputs with random values, calls the function and prints the model's cycles and the
 * host time per call; `--describe` prints the arguments instead.
 *
 *   <lib>_run [--describe] [--iterations N] [--seed S]
 */

#include <HalideRuntime.h>

#include <cstdint>

namespace tandem {

int run_generated(int argc, char **argv, const halide_filter_metadata_t *metadata,
                  int (*call)(void **args), uint64_t (*last_cycles)(void));

// The pieces, for runners of libraries whose buffers live elsewhere (RunGenGpu.h).
struct RunOptions {
    bool describe = false;
    int iterations = 1;
    unsigned seed = 1;
};
/** Parses the runner's flags; returns -1 to go on, else the exit status (help, a bad flag). */
int parse_run_options(int argc, char **argv, const halide_filter_metadata_t *metadata,
                      RunOptions *options);
/** Prints the arguments: name, kind, type and extents. */
void describe_arguments(const halide_filter_metadata_t *metadata);
/** Fills a host buffer with random values of its type (floats in [-1, 1), small integers). */
void fill_random(halide_buffer_t *buffer, unsigned seed);

} // namespace tandem

#endif
