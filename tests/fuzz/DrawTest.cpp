// The fuzzer's draws of a program's own generators: parameters the generator's algorithm refuses
// (its own checks in generate()) are drawn again, so that the cases reach the compiler.
#include "Fuzz.h"

#include <gtest/gtest.h>

using namespace tandem;
using namespace tandem::apps;

namespace {

TEST(FuzzDraws, ParametersTheAlgorithmRefusesAreDrawnAgain) {
    // Attention refuses a head count that is not a multiple of the key-value heads, and a causal
    // mask over fewer keys than queries: drawn freely, most of its cases end there.
    FuzzOptions options;
    options.program = "fuzz_draw_test";
    options.app = "attention";
    int taken = 0;
    const int cases = 40;
    for (int i = 0; i < cases; i++) {
        const FuzzCase c = draw_case(options, uint64_t(i));
        ASSERT_EQ(c.app, "attention");
        taken += algorithm_accepts(c);
    }
    EXPECT_GE(taken, cases * 9 / 10) << taken << " of " << cases << " cases reach the compiler";
}

} // namespace
