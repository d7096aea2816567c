// Calls the generated library like a Halide pipeline and checks it against a plain loop; a bad
// buffer must return an error code and leave the output alone. Exit status 0 when all holds.
#include "clamped_axpy.h"

#include <HalideBuffer.h>

#include <algorithm>
#include <cstdio>

int main() {
    const int W = 100, H = 9;
    Halide::Runtime::Buffer<float> x(W, H), y(W, H), out(W, H);
    for (int j = 0; j < H; j++)
        for (int i = 0; i < W; i++) x(i, j) = 0.1f * float(i - 50), y(i, j) = 0.25f * float(j - 4);
    if (int error = clamped_axpy(x, y, out)) {
        std::printf("clamped_axpy failed: %d\n", error);
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
    int bad = clamped_axpy(x, narrow, out);
    bool untouched = true;
    out.for_each_value([&](float v) { untouched = untouched && v == -9.0f; });
    std::printf("clamped_axpy: %d wrong of %d, %llu cycles on the zpu model; a narrow buffer: error %d, output %s\n",
                wrong, W * H, (unsigned long long)clamped_axpy_last_cycles(), bad,
                untouched ? "untouched" : "WRITTEN");
    return wrong == 0 && bad != 0 && untouched ? 0 : 1;
}
