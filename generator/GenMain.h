#ifndef TANDEM_GEN_MAIN_H
#define TANDEM_GEN_MAIN_H

/** \file
 * The generator main, linked into every generator binary (Halide's GenGen):
 *
 *     my_gen -g NAME -o DIR [-f FUNCTION_NAME] [-e stmt,halide,code,...] target=zpu[:k=v,...]
 * [param=value]... my_gen --help                      the generators and their parameters with
 * defaults my_gen -g NAME --tune [--db URI] [--budget N] [--jobs J] target=T [param=value]...
 *                                        autotunes the Tunable parameters (Tune.h)
 *     my_gen --tune-worker --db URI      measures what tuners of this program's generators queued
 *     my_gen -g NAME --run [--json] [--timeline F.svg] target=T [param=value]...
 *                                        runs it on the target's machine model against its
 *                                        reference (Halide's RunGen, without a library)
 *     my_gen --fuzz N [-g NAME] [--seed S] N random cases (generator, target, parameters) on the
 *                                        models; exit 1 on a failure (a user error is a refusal)
 *
 * It builds generator NAME (registered with TANDEM_REGISTER_GENERATOR) for the target with the
 * parameters given, and writes each requested output into DIR as FUNCTION_NAME.<suffix>: stmt (the
 * async Stmt), halide (Halide's lowered Stmt) and the target's own sources (zpu: code, a C++
 * kernel on the ZPU runtime; ascend: code, AscendC; hopper: cuda). With tuning_db=URI the best
 * record of the workload (the generator, the target and the parameters given) sets the tunable
 * parameters not given, with a note on standard error; no record: the defaults, and a note
 * saying so. Unknown flags, an unknown
 * generator, target or parameter, a value out of range: a message and exit status 1.
 */

namespace tandem {

/** Runs the generator main; returns the process exit status. */
int generator_main(int argc, char **argv);

} // namespace tandem

#endif
