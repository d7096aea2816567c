// A generator binary: the generators linked in (ScaleAdd.cpp) and the generator main.
#include "GenMain.h"

int main(int argc, char **argv) { return tandem::generator_main(argc, argv); }
