#include "RunGen.h"

#include <CLI/CLI.hpp>
#include <HalideBuffer.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tandem {

namespace {

std::string type_name(const halide_type_t &t) {
    const char *code = t.code == halide_type_float    ? "float"
                       : t.code == halide_type_bfloat ? "bfloat"
                       : t.code == halide_type_uint   ? "uint"
                                                      : "int";
    return code + std::to_string(t.bits);
}

/** Random values of the buffer's type: floats in [-1, 1), integers in [-8, 8) (unsigned [0, 16)).
 */
void fill(Halide::Runtime::Buffer<void> &b, std::mt19937 &rng) {
    std::uniform_real_distribution<float> real(-1.0f, 1.0f);
    std::uniform_int_distribution<int> integer(-8, 7);
    const halide_type_t t = b.type();
    auto *bytes = static_cast<unsigned char *>(b.data());
    for (size_t i = 0; i < b.number_of_elements(); i++) {
        unsigned char *at = bytes + i * t.bytes();
        if (t.code == halide_type_float && t.bits == 32) {
            float v = real(rng);
            std::memcpy(at, &v, 4);
        } else if (t.code == halide_type_bfloat && t.bits == 16) {
            float v = real(rng);
            uint32_t u;
            std::memcpy(&u, &v, 4);
            uint16_t h = uint16_t(u >> 16);
            std::memcpy(at, &h, 2);
        } else if (t.code == halide_type_float && t.bits == 16) {
            const _Float16 h = static_cast<_Float16>(real(rng)); // IEEE half, exact in [-1, 1)
            std::memcpy(at, &h, 2);
        } else {
            int64_t v = integer(rng);
            if (t.code == halide_type_uint)
                v += 8;
            std::memcpy(at, &v, size_t(t.bytes())); // little-endian: the low bytes
        }
    }
}

} // namespace

int parse_run_options(int argc, char **argv, const halide_filter_metadata_t *m, RunOptions *o) {
    CLI::App app{std::string("runs ") + m->name + " (" + m->target + ") on random inputs"};
    app.add_flag("--describe", o->describe, "print the arguments and exit");
    app.add_option("--iterations", o->iterations, "calls to time")->check(CLI::PositiveNumber);
    app.add_option("--seed", o->seed, "the inputs' random seed");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    return -1;
}

void describe_arguments(const halide_filter_metadata_t *m) {
    std::printf("%s for %s, %d arguments:\n", m->name, m->target, m->num_arguments);
    for (int i = 0; i < m->num_arguments; i++) {
        const halide_filter_argument_t &a = m->arguments[i];
        std::printf("  %s: %s %s [", a.name,
                    a.kind == halide_argument_kind_output_buffer ? "output" : "input",
                    type_name(a.type).c_str());
        for (int d = 0; d < a.dimensions; d++)
            std::printf("%s%lld", d ? " x " : "",
                        (long long)(a.buffer_estimates ? *a.buffer_estimates[2 * d + 1] : 0));
        std::printf("]\n");
    }
}

void fill_random(halide_buffer_t *buffer, unsigned seed) {
    std::mt19937 rng(seed);
    Halide::Runtime::Buffer<void> b(*buffer);
    fill(b, rng);
}

int run_generated(int argc, char **argv, const halide_filter_metadata_t *m,
                  int (*call)(void **args), uint64_t (*last_cycles)(void)) {
    RunOptions o;
    if (int status = parse_run_options(argc, argv, m, &o); status >= 0)
        return status;
    if (o.describe) {
        describe_arguments(m);
        return 0;
    }
    std::mt19937 rng(o.seed);
    std::vector<Halide::Runtime::Buffer<void>> buffers;
    std::vector<void *> args;
    for (int i = 0; i < m->num_arguments; i++) {
        const halide_filter_argument_t &a = m->arguments[i];
        if (a.kind == halide_argument_kind_input_scalar || !a.buffer_estimates) {
            std::fprintf(stderr, "%s: argument %s is not a buffer with known extents\n", m->name,
                         a.name);
            return 1;
        }
        std::vector<int> extents;
        for (int d = 0; d < a.dimensions; d++)
            extents.push_back(int(*a.buffer_estimates[2 * d + 1]));
        buffers.emplace_back(a.type, extents);
        if (a.kind == halide_argument_kind_input_buffer)
            fill(buffers.back(), rng);
    }
    for (auto &b : buffers)
        args.push_back(b.raw_buffer());
    double seconds = 0;
    for (int it = 0; it < o.iterations; it++) {
        auto start = std::chrono::steady_clock::now();
        if (int error = call(args.data())) {
            std::fprintf(stderr, "%s failed: %d\n", m->name, error);
            return 1;
        }
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::printf(
        "%s on %s: %llu cycles on the machine model; %.3f ms of host time per call (%d call%s)\n",
        m->name, m->target, (unsigned long long)last_cycles(), 1e3 * seconds / o.iterations,
        o.iterations, o.iterations == 1 ? "" : "s");
    return 0;
}

} // namespace tandem
