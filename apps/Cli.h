#ifndef TANDEM_APPS_CLI_H
#define TANDEM_APPS_CLI_H

/** \file
 * The tandem command line (list, run, emit, fuzz, tune, demo) as a function, so that a program
 * that registers its own target (dsl/lower/Targets.h, common/Backend.h) runs the same commands on
 * it. Returns the exit status: 0, 1 for a failed check or a user error, 2 for a bad command line.
 */

namespace tandem::apps {

int cli_main(int argc, char **argv);

} // namespace tandem::apps

#endif
