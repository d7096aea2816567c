// The tandem executable: the command line of Cli.h.
#include "Cli.h"

int main(int argc, char **argv) {
    return tandem::apps::cli_main(argc, argv);
}
