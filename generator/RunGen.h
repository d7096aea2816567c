#ifndef TANDEM_RUNGEN_H
#define TANDEM_RUNGEN_H

/** \file
 * The runner of a generated library, like Halide's RunGenMain: add_tandem_library builds
 * `<lib>_run`, whose main calls run_generated with the library's _metadata, _argv and
 * _last_cycles. It allocates every argument at the kernel's extents (the metadata's estimates),
 * fills the inputs with random values, calls the function and prints the model's cycles and the
 * host time per call; `--describe` prints the arguments instead. `--check DIR` runs the problem a
 * generator's `--run --save DIR` wrote instead (its inputs, the output poisoned) and compares the
 * output with the reference's as --run does: exit 1 when it is wrong.
 *
 *   <lib>_run [--describe] [--iterations N] [--seed S] [--check DIR]
 */

#include <HalideRuntime.h>

#include <cstdint>
#include <string>

namespace tandem {

int run_generated(int argc, char **argv, const halide_filter_metadata_t *metadata,
                  int (*call)(void **args), uint64_t (*last_cycles)(void));

// The pieces, for runners of libraries whose buffers live elsewhere (RunGenGpu.h).
struct RunOptions {
    bool describe = false;
    int iterations = 1;
    unsigned seed = 1;
    std::string check; // a directory of `--run --save`: check against its reference
};
/** Parses the runner's flags; returns -1 to go on, else the exit status (help, a bad flag). */
int parse_run_options(int argc, char **argv, const halide_filter_metadata_t *metadata,
                      RunOptions *options);
/** Prints the arguments: name, kind, type and extents. */
void describe_arguments(const halide_filter_metadata_t *metadata);
/** Fills a host buffer with random values of its type (floats in [-1, 1), small integers). */
void fill_random(halide_buffer_t *buffer, unsigned seed);
/** --check: reads an input's saved elements (DIR/<name>.bin) into its dense host buffer; false,
 * with a message, when the file is missing or of another size. */
bool load_saved(const std::string &dir, const halide_filter_argument_t &argument,
                halide_buffer_t *host);
/** --check: compares the output's host buffer with the saved reference (max |out - ref| / max
 * |ref| against the saved tolerance; NaN, the poison of an unwritten element, never passes) and
 * prints "correct: yes" or "correct: NO" with the figures; returns whether it is correct. */
bool check_saved(const std::string &dir, const halide_filter_argument_t &output,
                 const halide_buffer_t *host);

} // namespace tandem

#endif
