// The generator main's entry point, in its own object of the archive: a generator executable
// (add_tandem_generator) links only its generators and gets main() from here, as Halide's GenGen.
#include "GenMain.h"

int main(int argc, char **argv) {
    return tandem::generator_main(argc, argv);
}
