// Calls the generated libraries (zpu and ascend) like a Halide pipeline and checks each against a
// plain loop; a bad buffer must return an error code and leave the output alone. Exit status 0
// when all holds.
#include "clamped_axpy.h"
#include "clamped_axpy_ascend.h"

#include <HalideBuffer.h>

#include <algorithm>
#include <cstdio>

namespace {

int check(const char *target, int (*call)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *),
          uint64_t (*last_cycles)(void)) {
    const int W = 100, H = 9;
    Halide::Runtime::Buffer<float> x(W, H), y(W, H), out(W, H);
    for (int j = 0; j < H; j++)
        for (int i = 0; i < W; i++)
            x(i, j) = 0.1f * float(i - 50), y(i, j) = 0.25f * float(j - 4);
    if (int error = call(x, y, out)) {
        std::printf("%s: the call failed: %d\n", target, error);
        return 1;
    }
    int wrong = 0;
    for (int j = 0; j < H; j++)
        for (int i = 0; i < W; i++) {
            float want = std::min(std::max(1.5f * x(i, j) + y(i, j), -4.0f), 4.0f);
            wrong += out(i, j) != want;
        }
    Halide::Runtime::Buffer<float> narrow(W - 1, H);
    out.fill(-9.0f);
    int bad = call(x, narrow, out);
    bool untouched = true;
    out.for_each_value([&](float v) { untouched = untouched && v == -9.0f; });
    std::printf(
        "%s: %d wrong of %d, %llu cycles on the model; a narrow buffer: error %d, output %s\n",
        target, wrong, W * H, (unsigned long long)last_cycles(), bad,
        untouched ? "untouched" : "WRITTEN");
    return wrong == 0 && bad != 0 && untouched ? 0 : 1;
}

} // namespace

int main() {
    int failed = check("zpu", clamped_axpy, clamped_axpy_last_cycles);
    failed += check("ascend", clamped_axpy_ascend, clamped_axpy_ascend_last_cycles);
    return failed ? 1 : 0;
}
