#ifndef TANDEM_GEN_MAIN_H
#define TANDEM_GEN_MAIN_H

/** \file
 * The generator main, linked into every generator binary (Halide's GenGen):
 *
 *     my_gen -g NAME -o DIR [-f FUNCTION_NAME] [-e stmt,halide,code,...] target=zpu[:k=v,...] [param=value]...
 *     my_gen --help                      the generators and their parameters with defaults
 *
 * It builds generator NAME (registered with TANDEM_REGISTER_GENERATOR) for the target with the
 * parameters given, and writes each requested output into DIR as FUNCTION_NAME.<suffix>: stmt (the
 * async Stmt), halide (Halide's lowered Stmt) and the target's own sources (zpu: code, a C++
 * kernel on the ZPU runtime; ascend: code, AscendC; hopper: cuda). Unknown flags, an unknown
 * generator, target or parameter, a value out of range: a message and exit status 1.
 */

namespace tandem {

/** Runs the generator main; returns the process exit status. */
int generator_main(int argc, char **argv);

} // namespace tandem

#endif
