// Self-tests of the ZPU machine model (backends/sim/Zpu.h): exact cycle counts of small
// hand-written programs, numerics of DMA and MMA, the race and deadlock detectors on broken
// programs (and silence on their correct versions), user errors and the trace file.

#include "sim/Zpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace tandem::sim {
namespace {

/** A 2-D box: dims[0] = {inner extent, inner stride}, dims[1] = {outer extent, outer stride}. */
Box box2(int64_t offset, int64_t inner, int64_t inner_stride, int64_t outer, int64_t outer_stride) {
    return Box{offset, {{inner, inner_stride}, {outer, outer_stride}}};
}

/** Rows [row, row + rows) x columns [col, col + cols) of a row-major matrix of `width` columns. */
Box tile(int64_t row, int64_t col, int64_t rows, int64_t cols, int64_t width) {
    return box2(row * width + col, cols, 1, rows, width);
}

Box dense(int64_t inner, int64_t outer) {
    return box2(0, inner, 1, outer, inner);
}

/** The default machine with every DMA route allowed on the first free unit: the mechanics tests
 * below move data between any two memories. (ZpuRoutes tests the pinned routes.) */
ZpuParams any_routes() {
    ZpuParams p;
    p.route = ZpuParams::free_routes();
    return p;
}

ZpuParams one_core() {
    ZpuParams p = any_routes();
    p.cores = 1;
    return p;
}

Cycles busy(const Report &r, const std::string &engine) {
    for (const EngineBusy &b : r.busy) {
        if (b.engine == engine) {
            return b.busy;
        }
    }
    ADD_FAILURE() << "no engine " << engine;
    return -1;
}

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------------------
// Cost functions and timing
// ---------------------------------------------------------------------------------------------

TEST(ZpuNumerics, HalfRoundsToNearestEvenAndOverflowsToInfinity) {
    // IEEE binary16 as Halide's float16_t: round to nearest even, subnormals, overflow to inf.
    EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
    EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);        // the largest half
    EXPECT_EQ(float_to_f16(65519.99f), 0x7bff);       // below the midpoint to 65536
    EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);        // the tie rounds to even: inf
    EXPECT_EQ(float_to_f16(-1e9f), 0xfc00);           // -inf
    EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3c00); // a tie: to the even 1.0
    EXPECT_EQ(float_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);     // the smallest subnormal
    EXPECT_EQ(float_to_f16(3 * 0x1p-25f), 0x0002); // a subnormal tie: to even
    EXPECT_EQ(float_to_f16(0x1p-26f), 0x0000);
    EXPECT_EQ(f16_to_float(0x0001), 0x1p-24f);
    EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
    EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
    EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
    for (uint32_t bits = 0; bits < 0x10000; bits++) { // every half but NaN survives a round trip
        const float v = f16_to_float(uint16_t(bits));
        if (!std::isnan(v)) {
            ASSERT_EQ(float_to_f16(v), bits) << bits;
        }
    }
    // Against GCC's own conversion on random floats across the half's range and past it.
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> word(0, 0xffffffffu);
    for (int i = 0; i < 1000000; i++) {
        uint32_t w = word(rng);
        w = (w & 0x807fffffu) | (((w >> 23) % 50 + 95) << 23); // 2^-32 .. 2^17: past 65504
        float f;
        std::memcpy(&f, &w, 4);
        const _Float16 h = static_cast<_Float16>(f);
        uint16_t want;
        std::memcpy(&want, &h, 2);
        ASSERT_EQ(float_to_f16(f), want) << f;
    }
}

TEST(ZpuNumerics, Fp8FormatsAndRoundToNearestEven) {
    // OCP FP8 (CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2): e4m3 has no infinities (NaN at S.1111.111,
    // largest 448), e5m2 is IEEE-like (largest 57344, infinities); both have subnormals.
    EXPECT_EQ(fp8_value(0x38, true), 1.0f); // 0.0111.000: 2^(7 - 7)
    EXPECT_EQ(fp8_value(0x7e, true), 448.0f);
    EXPECT_TRUE(std::isnan(fp8_value(0x7f, true)));
    EXPECT_TRUE(std::isnan(fp8_value(0xff, true)));
    EXPECT_EQ(fp8_value(0x78, true), 256.0f);  // S.1111.000 is a number in e4m3
    EXPECT_EQ(fp8_value(0x01, true), 0x1p-9f); // the smallest subnormal
    EXPECT_EQ(fp8_value(0xb9, true), -1.125f);
    EXPECT_EQ(fp8_value(0x3c, false), 1.0f); // 0.01111.00: 2^(15 - 15)
    EXPECT_EQ(fp8_value(0x7b, false), 57344.0f);
    EXPECT_TRUE(std::isinf(fp8_value(0x7c, false)));
    EXPECT_TRUE(std::isnan(fp8_value(0x7d, false)));
    EXPECT_EQ(fp8_value(0x01, false), 0x1p-16f);
    for (DType t : {DType::E4M3, DType::E5M2}) { // every finite value survives a round trip
        for (int bits = 0; bits < 256; bits++) {
            const float v = fp8_value(uint8_t(bits), t == DType::E4M3);
            if (std::isfinite(v) && !(v == 0 && bits == 0x80)) {
                ASSERT_EQ(float_to_fp8(t, v), bits) << dtype_name(t) << " " << bits;
            }
        }
    }
    EXPECT_EQ(float_to_fp8(DType::E4M3, 1.0625f), 0x38);  // a tie between 1 and 1.125: to even
    EXPECT_EQ(float_to_fp8(DType::E4M3, 1.1875f), 0x3a);  // a tie between 1.125 and 1.25: to even
    EXPECT_EQ(float_to_fp8(DType::E4M3, 1000.0f), 0x7e);  // saturates at 448 (satfinite)
    EXPECT_EQ(float_to_fp8(DType::E5M2, -1e9f), 0xfb);    // at -57344
    EXPECT_EQ(float_to_fp8(DType::E4M3, 0x1p-11f), 0x00); // below half the smallest subnormal
    EXPECT_EQ(float_to_fp8(DType::E4M3, -0.0f), 0x80);
    EXPECT_EQ(bytes_of(DType::E4M3), 1);
}

TEST(ZpuCost, FormulasFromNpuFacts) {
    ZpuParams p;
    EXPECT_EQ(p.dma_cycles(4096), 100 + 4);
    EXPECT_EQ(p.dma_cycles(4097), 100 + 5);
    EXPECT_EQ(p.mma_cycles(32, 64, 64, DType::F32), 21 + 7 + 2 * 2 * 4 + 70); // at least 4 K blocks
    EXPECT_EQ(p.mma_cycles(16, 32, 8, DType::BF16), 21 + 8 + 1 * 1 * 1 + 70);
    EXPECT_EQ(p.vector_cycles(1000), 4);
    EXPECT_EQ(p.vector_cycles(1001), 5);
    EXPECT_EQ(p.capacity(Space::ASRAM), 1 << 20);
    EXPECT_EQ(p.capacity(Space::RSRAM), 1536000);
}

TEST(ZpuTiming, DmaThenWaitThenMma) {
    Machine machine(one_core(), /*numerics=*/false);
    int a_dram = machine.add_dram("A", DType::BF16, 64 * 32);
    int a = machine.add_sram(0, "a_tile", Space::ASRAM, DType::BF16, 64 * 32);
    int b = machine.add_sram(0, "b_tile", Space::WSRAM, DType::BF16, 64 * 64);
    int acc = machine.add_sram(0, "acc", Space::RSRAM, DType::F32, 64 * 32);
    EXPECT_EQ(machine.data(a), nullptr); // timing only: no storage

    Core &core = machine.core(0);
    Token t = core.dma_start(a, dense(64, 32), a_dram, dense(64, 32), "load a"); // 4096 bytes
    EXPECT_EQ(core.now(), 0);                                                    // issue is free
    core.dma_wait(t, "wait a");
    EXPECT_EQ(core.now(), 104);
    core.mma(acc, dense(64, 32), a, dense(64, 32), b, dense(64, 64), "multiply"); // M 32 N 64 K 64
    EXPECT_EQ(core.now(), 104); // issued to the tensor core: the control stream goes on
    core.sync(Engine::Tensor, "sync tensor");
    EXPECT_EQ(core.now(), 104 + 114); // 21 + 7 + 2 * 2 * max(2, 4) + 70

    Report r = machine.finish();
    EXPECT_EQ(r.cycles, 218);
    EXPECT_EQ(r.core_cycles, std::vector<Cycles>{218});
    EXPECT_EQ(busy(r, "dma"), 104);
    EXPECT_EQ(busy(r, "tensor"), 114);
    EXPECT_EQ(busy(r, "vector"), 0);
    EXPECT_EQ(busy(r, "control_stall"), 0);
    EXPECT_EQ(r.bound_cycles, 114); // max(tensor 114, dma 104 / 2 channels, longest dma 104)
    EXPECT_TRUE(r.races.empty());
    EXPECT_FALSE(r.deadlock);
}

TEST(ZpuTiming, TwoChannelsOverlapAndAThirdTransferQueues) {
    Machine machine(one_core(), false);
    int src = machine.add_dram("src", DType::F32, 3 * 1024);
    int dst = machine.add_sram(0, "dst", Space::RSRAM, DType::F32, 3 * 1024);
    Core &core = machine.core(0);
    Box part0{0, {{1024, 1}}}, part1{1024, {{1024, 1}}}, part2{2048, {{1024, 1}}};
    Token t0 = core.dma_start(dst, part0, src, part0, "copy 0"); // 4096 bytes: 104 cycles
    Token t1 = core.dma_start(dst, part1, src, part1, "copy 1");
    core.dma_wait(t0, "wait 0");
    core.dma_wait(t1, "wait 1");
    EXPECT_EQ(core.now(), 104); // both ran at once, one per channel
    Token t2 = core.dma_start(dst, part2, src, part2, "copy 2");
    core.dma_wait(t2, "wait 2");
    EXPECT_EQ(core.now(), 208);

    // Three at once: the third waits for a free channel (no stall: the queue is deep enough).
    Token u0 = core.dma_start(dst, part0, src, part0, "again 0");
    Token u1 = core.dma_start(dst, part1, src, part1, "again 1");
    Token u2 = core.dma_start(dst, part2, src, part2, "again 2");
    EXPECT_EQ(core.now(), 208);
    core.dma_wait(u2, "wait again 2");
    EXPECT_EQ(core.now(), 208 + 208);
    core.dma_wait(u0, "wait again 0");
    core.dma_wait(u1, "wait again 1");
    Report r = machine.finish();
    EXPECT_EQ(r.cycles, 416);
    EXPECT_EQ(busy(r, "dma"), 6 * 104);
    EXPECT_EQ(busy(r, "control_stall"), 0);
    EXPECT_EQ(r.bound_cycles, 3 * 104); // 6 * 104 over 2 channels
}

TEST(ZpuTiming, FinishCountsTransfersNobodyWaitedFor) {
    Machine machine(one_core(), false);
    int src = machine.add_dram("src", DType::F32, 1024);
    int dst = machine.add_sram(0, "dst", Space::RSRAM, DType::F32, 1024);
    machine.core(0).dma_start(dst, Box{0, {{1024, 1}}}, src, Box{0, {{1024, 1}}}, "copy");
    EXPECT_EQ(machine.core(0).now(), 0);
    EXPECT_EQ(machine.finish().cycles, 104);
}

TEST(ZpuTiming, FullQueueStallsTheControlStream) {
    ZpuParams p = one_core();
    p.dma_channels = 4;
    p.dma_queue_depth = 2;
    Machine machine(p, false);
    int src = machine.add_dram("src", DType::F32, 4096);
    int dst = machine.add_sram(0, "dst", Space::RSRAM, DType::F32, 4096);
    Core &core = machine.core(0);
    core.dma_start(dst, Box{0, {{1024, 1}}}, src, Box{0, {{1024, 1}}}, "4 KB");       // 0..104
    core.dma_start(dst, Box{1024, {{2048, 1}}}, src, Box{1024, {{2048, 1}}}, "8 KB"); // 0..108
    EXPECT_EQ(core.now(), 0);
    // Two in flight = depth: the third descriptor waits until the first transfer ends (104),
    // then starts at once on a free channel.
    Token third = core.dma_start(dst, Box{3072, {{256, 1}}}, src, Box{3072, {{256, 1}}}, "1 KB");
    EXPECT_EQ(core.now(), 104);
    core.dma_wait(third, "wait third");
    EXPECT_EQ(core.now(), 104 + 101);
    Report r = machine.finish();
    EXPECT_EQ(busy(r, "control_stall"), 104);
    EXPECT_EQ(r.cycles, 205);
}

TEST(ZpuTiming, VectorOpCost) {
    ZpuParams p = one_core();
    Machine machine(p, false);
    int x = machine.add_sram(0, "x", Space::RSRAM, DType::F32, 1000);
    Core &core = machine.core(0);
    std::vector<Access> touch = {{x, Box{0, {{1000, 1}}}, true}};
    core.vector_op("scale", 1000, touch, nullptr);
    core.vector_op("scale more", 1001, touch, nullptr); // in order after "scale"
    EXPECT_EQ(core.now(), 0);
    core.sync(Engine::Vector, "sync vector");
    EXPECT_EQ(core.now(), 4 + 5);
    Report r = machine.finish();
    EXPECT_EQ(busy(r, "vector"), 9);
    EXPECT_EQ(r.bound_cycles, 9);

    p.vector_fixed = 10;
    Machine fixed(p, false);
    int y = fixed.add_sram(0, "y", Space::RSRAM, DType::F32, 1000);
    fixed.core(0).vector_op("scale", 1000, {{y, Box{0, {{1000, 1}}}, true}}, nullptr);
    fixed.core(0).sync(Engine::Vector, "sync vector");
    EXPECT_EQ(fixed.core(0).now(), 14);
}

TEST(ZpuTiming, CyclesAreTheSlowestCore) {
    ZpuParams p = any_routes();
    p.cores = 3;
    Machine machine(p, false);
    int src = machine.add_dram("src", DType::F32, 1024);
    for (int c = 0; c < 3; ++c) {
        int dst = machine.add_sram(c, "dst" + std::to_string(c), Space::RSRAM, DType::F32, 1024);
        for (int i = 0; i <= c; ++i) {
            Token t = machine.core(c).dma_start(dst, Box{0, {{1024, 1}}}, src, Box{0, {{1024, 1}}},
                                                "copy");
            machine.core(c).dma_wait(t, "wait");
        }
    }
    Report r = machine.finish();
    EXPECT_EQ(r.core_cycles, (std::vector<Cycles>{104, 208, 312}));
    EXPECT_EQ(r.cycles, 312);
    EXPECT_EQ(busy(r, "dma"), 6 * 104);
    EXPECT_EQ(r.bound_cycles, 156); // core 2: 312 dma cycles over 2 channels
}

// ---------------------------------------------------------------------------------------------
// Numerics
// ---------------------------------------------------------------------------------------------

TEST(ZpuNumerics, Bf16RoundsToNearestEven) {
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);         // tie: down to even
    EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);         // tie: up to even
    EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256 + 1e-6f), 0x3f81); // above the tie
    EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(ZpuNumerics, DmaCopiesStridedBoxes) {
    Machine machine(one_core(), true);
    const int rows = 6, cols = 10;
    int matrix = machine.add_dram("matrix", DType::F32, rows * cols);
    int packed = machine.add_sram(0, "packed", Space::RSRAM, DType::F32, 15);
    int padded = machine.add_sram(0, "padded", Space::RSRAM, DType::F32, 3 * 8);
    int column = machine.add_sram(0, "column", Space::RSRAM, DType::F32, rows);
    float *m = static_cast<float *>(machine.data(matrix));
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            m[r * cols + c] = float(r * 100 + c);
        }
    }
    Core &core = machine.core(0);
    // Rows 1..3, columns 2..6 into a dense 3 x 5 tile, into a tile with row pitch 8, and one
    // column (stride 10) into a dense vector.
    core.dma_wait(core.dma_start(packed, dense(5, 3), matrix, tile(1, 2, 3, 5, cols), "pack"), "w");
    core.dma_wait(
        core.dma_start(padded, box2(1, 5, 1, 3, 8), matrix, tile(1, 2, 3, 5, cols), "pad"), "w");
    core.dma_wait(
        core.dma_start(column, Box{0, {{rows, 1}}}, matrix, Box{3, {{rows, cols}}}, "col"), "w");
    const float *p = static_cast<const float *>(machine.data(packed));
    const float *q = static_cast<const float *>(machine.data(padded));
    for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 5; ++c) {
            EXPECT_EQ(p[r * 5 + c], float((r + 1) * 100 + c + 2)) << r << "," << c;
            EXPECT_EQ(q[1 + r * 8 + c], float((r + 1) * 100 + c + 2)) << r << "," << c;
        }
        EXPECT_EQ(q[r * 8], 0.0f); // padding untouched
        EXPECT_EQ(q[r * 8 + 6], 0.0f);
    }
    const float *col = static_cast<const float *>(machine.data(column));
    for (int r = 0; r < rows; ++r) {
        EXPECT_EQ(col[r], float(r * 100 + 3));
    }
    EXPECT_TRUE(machine.finish().races.empty());
}

TEST(ZpuNumerics, DmaCopiesBf16BackToDram) {
    Machine machine(one_core(), true);
    int tile_buffer = machine.add_sram(0, "tile", Space::ASRAM, DType::BF16, 4 * 4);
    int out = machine.add_dram("out", DType::BF16, 8 * 8);
    uint16_t *t = static_cast<uint16_t *>(machine.data(tile_buffer));
    for (int i = 0; i < 16; ++i) {
        t[i] = float_to_bf16(float(i));
    }
    Core &core = machine.core(0);
    core.dma_wait(core.dma_start(out, tile(2, 4, 4, 4, 8), tile_buffer, dense(4, 4), "store"), "w");
    const uint16_t *o = static_cast<const uint16_t *>(machine.data(out));
    for (int r = 0; r < 8; ++r) {
        for (int c = 0; c < 8; ++c) {
            bool inside = r >= 2 && r < 6 && c >= 4;
            float want = inside ? float((r - 2) * 4 + (c - 4)) : 0.0f;
            EXPECT_EQ(bf16_to_float(o[r * 8 + c]), want) << r << "," << c;
        }
    }
}

/** Runs one mma with random inputs and checks it against a naive triple loop (which starts from
 * the accumulator's values, or from 0 when the mma overwrites). */
void check_mma(DType input, int64_t m_count, int64_t n_count, int64_t k_count, const Box &acc_box,
               int64_t acc_elements, bool accumulate = true) {
    Machine machine(one_core(), true);
    int a = machine.add_sram(0, "a", Space::ASRAM, input, k_count * m_count);
    int b = machine.add_sram(0, "b", Space::WSRAM, input, n_count * k_count);
    int acc = machine.add_sram(0, "acc", Space::RSRAM, DType::F32, acc_elements);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    auto fill = [&](int buffer, int64_t count, std::vector<float> &mirror) {
        mirror.resize(size_t(count));
        for (int64_t i = 0; i < count; ++i) {
            float v = value(rng);
            if (input == DType::BF16) {
                uint16_t bits = float_to_bf16(v);
                static_cast<uint16_t *>(machine.data(buffer))[i] = bits;
                mirror[size_t(i)] = bf16_to_float(bits);
            } else {
                static_cast<float *>(machine.data(buffer))[i] = v;
                mirror[size_t(i)] = v;
            }
        }
    };
    std::vector<float> a_values, b_values;
    fill(a, k_count * m_count, a_values); // a(k, m) at k + m * K
    fill(b, n_count * k_count, b_values); // b(n, k) at n + k * N
    float *acc_data = static_cast<float *>(machine.data(acc));
    for (int64_t i = 0; i < acc_elements; ++i) {
        acc_data[i] = value(rng);
    }
    std::vector<float> expected(acc_data, acc_data + acc_elements);
    for (int64_t m = 0; m < m_count; ++m) {
        for (int64_t n = 0; n < n_count; ++n) {
            int64_t at = acc_box.offset + n * acc_box.dims[0].stride + m * acc_box.dims[1].stride;
            float sum = accumulate ? expected[size_t(at)] : 0.0f;
            for (int64_t k = 0; k < k_count; ++k) {
                sum += a_values[size_t(k + m * k_count)] * b_values[size_t(n + k * n_count)];
            }
            expected[size_t(at)] = sum;
        }
    }
    machine.core(0).mma(acc, acc_box, a, dense(k_count, m_count), b, dense(n_count, k_count),
                        "multiply", accumulate);
    machine.core(0).sync(Engine::Tensor, "sync tensor");
    for (int64_t i = 0; i < acc_elements; ++i) {
        ASSERT_NEAR(acc_data[i], expected[size_t(i)],
                    1e-4f * (1.0f + std::fabs(expected[size_t(i)])))
            << "element " << i;
    }
    EXPECT_EQ(machine.core(0).now(),
              machine.params().mma_cycles(m_count, n_count, k_count, DType::F32));
}

TEST(ZpuNumerics, MmaMatchesNaiveLoopBf16) {
    check_mma(DType::BF16, 7, 37, 19, dense(37, 7), 37 * 7);
}

TEST(ZpuNumerics, MmaMatchesNaiveLoopF32RowBlocks) {
    check_mma(DType::F32, 9, 64, 64, dense(64, 9), 64 * 9);
}

TEST(ZpuNumerics, MmaIntoPartOfAPaddedAccumulator) {
    // acc rows of pitch 40, starting at row 1, column 3 of a 10 x 40 buffer.
    check_mma(DType::BF16, 5, 32, 16, box2(40 + 3, 32, 1, 5, 40), 10 * 40);
}

TEST(ZpuNumerics, MmaIntoATransposedAccumulator) {
    // acc(n, m) at m + n * 8: the n dim is not contiguous.
    check_mma(DType::BF16, 6, 12, 8, box2(0, 12, 8, 6, 1), 12 * 8);
}

TEST(ZpuNumerics, MmaThatOverwritesIgnoresTheAccumulator) {
    // clear_accum: only the box is overwritten, the padding around it keeps its values.
    check_mma(DType::BF16, 5, 32, 16, box2(40 + 3, 32, 1, 5, 40), 10 * 40, /*accumulate=*/false);
}

TEST(ZpuNumerics, VectorOpRunsComputeOnlyWithNumerics) {
    for (bool numerics : {true, false}) {
        Machine machine(one_core(), numerics);
        int x = machine.add_sram(0, "x", Space::RSRAM, DType::F32, 4);
        int calls = 0;
        machine.core(0).vector_op("count", 4, {{x, Box{0, {{4, 1}}}, true}}, [&] { ++calls; });
        EXPECT_EQ(calls, numerics ? 1 : 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Happens-before: broken programs race, their correct versions do not
// ---------------------------------------------------------------------------------------------

/** A one-core machine with an A and B operand in DRAM, their SRAM tiles and an accumulator. */
struct MatmulSetup {
    static constexpr int64_t M = 32, N = 64, K = 32;
    Machine machine{one_core(), true};
    int a_dram = machine.add_dram("A", DType::BF16, K *M);
    int b_dram = machine.add_dram("B", DType::BF16, N *K);
    int c_dram = machine.add_dram("C", DType::F32, N *M);
    int a = machine.add_sram(0, "a_tile", Space::ASRAM, DType::BF16, K *M);
    int b = machine.add_sram(0, "b_tile", Space::WSRAM, DType::BF16, N *K);
    int acc = machine.add_sram(0, "acc", Space::RSRAM, DType::F32, N *M);
    Core &core = machine.core(0);

    Token load_a() { return core.dma_start(a, dense(K, M), a_dram, dense(K, M), "load a"); }
    Token load_b() { return core.dma_start(b, dense(N, K), b_dram, dense(N, K), "load b"); }
    /** An mma and the sync that waits for it. */
    void multiply() {
        core.mma(acc, dense(N, M), a, dense(K, M), b, dense(N, K), "multiply");
        core.sync(Engine::Tensor, "sync tensor");
    }
    Token store() { return core.dma_start(c_dram, dense(N, M), acc, dense(N, M), "store c"); }
    void zero_acc() {
        core.vector_op("zero acc", N * M, {{acc, dense(N, M), true}}, [this] {
            float *p = static_cast<float *>(machine.data(acc));
            std::fill(p, p + N * M, 0.0f);
        });
        core.sync(Engine::Vector, "sync vector");
    }
};

TEST(ZpuRaces, MissingWaitBeforeMma) {
    MatmulSetup s;
    Token ta = s.load_a();
    Token tb = s.load_b();
    s.core.dma_wait(tb, "wait b");
    s.multiply(); // reads a_tile while "load a" may still be writing it
    s.core.dma_wait(ta, "wait a (too late)");
    Report r = s.machine.finish();
    ASSERT_EQ(r.races.size(), 1u);
    EXPECT_EQ(r.race_count, 1);
    EXPECT_EQ(r.races[0].buffer, "a_tile");
    EXPECT_EQ(r.races[0].first, "dma 'load a' (dma channel 0, core 0)");
    EXPECT_EQ(r.races[0].second, "mma 'multiply' (tensor, core 0)");
    EXPECT_TRUE(contains(r.races[0].str(), "a_tile"));
}

TEST(ZpuRaces, WaitOnTheWrongToken) {
    MatmulSetup s;
    Token ta = s.load_a();
    Token tb = s.load_b();
    s.core.dma_wait(tb, "wait b");
    s.core.dma_wait(tb, "wait a (but passes b's token)");
    s.multiply();
    s.core.dma_wait(ta, "drain");
    Report r = s.machine.finish();
    ASSERT_EQ(r.races.size(), 1u);
    EXPECT_EQ(r.races[0].buffer, "a_tile");
    EXPECT_TRUE(contains(r.races[0].first, "load a"));
    EXPECT_TRUE(contains(r.races[0].second, "multiply"));
}

TEST(ZpuRaces, SlotReusedBeforeTheStoreReleasedIt) {
    MatmulSetup s;
    s.zero_acc();
    Token ta = s.load_a(), tb = s.load_b();
    s.core.dma_wait(ta, "wait a");
    s.core.dma_wait(tb, "wait b");
    s.multiply();
    Token stored = s.store();
    s.zero_acc(); // next tile: overwrites acc while "store c" may still read it
    s.core.dma_wait(stored, "wait store");
    Report r = s.machine.finish();
    ASSERT_EQ(r.races.size(), 1u);
    EXPECT_EQ(r.races[0].buffer, "acc");
    EXPECT_EQ(r.races[0].first, "dma 'store c' (dma channel 0, core 0)");
    EXPECT_EQ(r.races[0].second, "vector 'zero acc' (vector, core 0)");
}

TEST(ZpuRaces, CorrectVersionsAreQuiet) {
    MatmulSetup s;
    s.zero_acc();
    Token ta = s.load_a(), tb = s.load_b();
    s.core.dma_wait(ta, "wait a");
    s.core.dma_wait(tb, "wait b");
    s.multiply();
    Token stored = s.store();
    s.core.dma_wait(stored, "wait store");
    s.zero_acc();
    // The operand tiles are reloaded after the mma that read them: ordered by the issue.
    ta = s.load_a();
    tb = s.load_b();
    s.core.dma_wait(tb, "wait b");
    s.core.dma_wait(ta, "wait a");
    s.multiply();
    s.core.dma_wait(s.store(), "wait store");
    Report r = s.machine.finish();
    EXPECT_TRUE(r.races.empty()) << r.races[0].str();
    EXPECT_EQ(r.race_count, 0);
}

TEST(ZpuRaces, StoreThenReloadOfDramWithoutWaitRaces) {
    MatmulSetup s;
    Token stored = s.store();
    // Reading C back (into acc) while the store may still write it.
    Token back = s.core.dma_start(s.acc, dense(64, 32), s.c_dram, dense(64, 32), "reload c");
    s.core.dma_wait(back, "w");
    s.core.dma_wait(stored, "w");
    Report r = s.machine.finish();
    ASSERT_GE(r.races.size(), 1u);
    EXPECT_EQ(r.races[0].first, "dma 'store c' (dma channel 0, core 0)");
    EXPECT_EQ(r.races[0].second, "dma 'reload c' (dma channel 1, core 0)");
}

TEST(ZpuRaces, ATokenOrdersOnlyItsOwnTransfer) {
    // One channel runs its transfers in issue order (timing), but the engine, not the program,
    // picks the channel: waiting for a later transfer orders nothing about an earlier one.
    ZpuParams p = one_core();
    p.dma_channels = 1;
    Machine machine(p, false);
    int dram = machine.add_dram("D", DType::F32, 512);
    int sram = machine.add_sram(0, "S", Space::RSRAM, DType::F32, 512);
    Core &core = machine.core(0);
    Box first{0, {{256, 1}}}, second{256, {{256, 1}}};
    Token t0 = core.dma_start(sram, first, dram, first, "load first");
    Token t1 = core.dma_start(sram, second, dram, second, "load second");
    core.dma_wait(t1, "wait second");
    EXPECT_EQ(core.now(), 2 * 101); // in order on the one channel
    core.vector_op("read first", 256, {{sram, first, false}}, nullptr);
    core.dma_wait(t0, "wait first (too late)");
    Report r = machine.finish();
    ASSERT_EQ(r.race_count, 1);
    EXPECT_EQ(r.races[0].first, "dma 'load first' (dma channel 0, core 0)");
    EXPECT_EQ(r.races[0].second, "vector 'read first' (vector, core 0)");

    // Nor are two transfers of one channel ordered with each other.
    Machine pair(p, false);
    dram = pair.add_dram("D", DType::F32, 256);
    sram = pair.add_sram(0, "S", Space::RSRAM, DType::F32, 256);
    Core &c = pair.core(0);
    Box all{0, {{256, 1}}};
    Token load = c.dma_start(sram, all, dram, all, "load");
    Token store = c.dma_start(dram, all, sram, all, "store"); // reads S before "load" was waited
    c.dma_wait(store, "wait store");
    c.dma_wait(load, "wait load");
    Report q = pair.finish();
    ASSERT_GE(q.races.size(), 1u);
    EXPECT_EQ(q.races[0].first, "dma 'load' (dma channel 0, core 0)");
    EXPECT_EQ(q.races[0].second, "dma 'store' (dma channel 0, core 0)");
}

// ---------------------------------------------------------------------------------------------
// Asynchronous tensor and vector cores
// ---------------------------------------------------------------------------------------------

TEST(ZpuEngines, TensorAndVectorCoresRunConcurrentlyEachInOrder) {
    Machine machine(one_core(), false);
    int a = machine.add_sram(0, "a", Space::ASRAM, DType::BF16, 64 * 32);
    int b = machine.add_sram(0, "b", Space::WSRAM, DType::BF16, 64 * 64);
    int acc = machine.add_sram(0, "acc", Space::RSRAM, DType::F32, 64 * 32);
    int x = machine.add_sram(0, "x", Space::RSRAM, DType::F32, 1000);
    Core &core = machine.core(0);
    core.mma(acc, dense(64, 32), a, dense(64, 32), b, dense(64, 64), "first");  // 114 cycles
    core.mma(acc, dense(64, 32), a, dense(64, 32), b, dense(64, 64), "second"); // after the first
    core.vector_op("scale", 1000, {{x, Box{0, {{1000, 1}}}, true}}, nullptr);   // 4, meanwhile
    EXPECT_EQ(core.now(), 0);
    core.sync(Engine::Vector, "sync vector");
    EXPECT_EQ(core.now(), 4);
    core.sync(Engine::Tensor, "sync tensor");
    EXPECT_EQ(core.now(), 228);
    core.sync(Engine::Tensor, "again: free");
    EXPECT_EQ(core.now(), 228);
    Report r = machine.finish();
    EXPECT_EQ(r.cycles, 228);
    EXPECT_EQ(busy(r, "tensor"), 228);
    EXPECT_EQ(busy(r, "vector"), 4);
    EXPECT_EQ(r.bound_cycles, 228); // the busiest engine, not the sum
    EXPECT_TRUE(r.races.empty()) << r.races[0].str();
}

TEST(ZpuRaces, EpilogueWithoutSyncingTheTensorCoreRaces) {
    MatmulSetup s;
    s.core.dma_wait(s.load_a(), "wait a");
    s.core.dma_wait(s.load_b(), "wait b");
    s.core.mma(s.acc, dense(s.N, s.M), s.a, dense(s.K, s.M), s.b, dense(s.N, s.K), "multiply");
    s.core.sync(Engine::Vector, "syncs the wrong engine");
    s.core.vector_op("epilogue", s.N * s.M, {{s.acc, dense(s.N, s.M), false}}, nullptr);
    s.core.sync(Engine::Tensor, "too late");
    s.core.sync(Engine::Vector, "drain");
    Report r = s.machine.finish();
    ASSERT_EQ(r.race_count, 1);
    EXPECT_EQ(r.races[0].buffer, "acc");
    EXPECT_EQ(r.races[0].first, "mma 'multiply' (tensor, core 0)");
    EXPECT_EQ(r.races[0].second, "vector 'epilogue' (vector, core 0)");
}

TEST(ZpuRaces, StoreIssuedBeforeTheVectorCoreWroteItsSourceRaces) {
    MatmulSetup s;
    s.core.vector_op("fill acc", s.N * s.M, {{s.acc, dense(s.N, s.M), true}}, nullptr);
    Token stored = s.store(); // the issue edge orders only what the control stream waited for
    s.core.sync(Engine::Vector, "too late");
    s.core.dma_wait(stored, "wait store");
    Report r = s.machine.finish();
    ASSERT_EQ(r.race_count, 1);
    EXPECT_EQ(r.races[0].first, "vector 'fill acc' (vector, core 0)");
    EXPECT_EQ(r.races[0].second, "dma 'store c' (dma channel 0, core 0)");
}

TEST(ZpuRaces, ProgramEndingWithoutSyncingAnEngineRaces) {
    MatmulSetup s;
    s.core.dma_wait(s.load_a(), "wait a");
    s.core.dma_wait(s.load_b(), "wait b");
    s.core.mma(s.acc, dense(s.N, s.M), s.a, dense(s.K, s.M), s.b, dense(s.N, s.K), "multiply");
    Report r = s.machine.finish();
    ASSERT_EQ(r.race_count, 1);
    EXPECT_EQ(r.races[0].first, "mma 'multiply' (tensor, core 0)");
    EXPECT_EQ(r.races[0].second, "end of the program of core 0");
    EXPECT_TRUE(contains(r.races[0].str(), "before syncing"));
}

TEST(ZpuRaces, ProgramEndingWithATransferInFlightRaces) {
    MatmulSetup s;
    s.zero_acc();
    Token ta = s.load_a(), tb = s.load_b();
    s.core.dma_wait(ta, "wait a");
    s.core.dma_wait(tb, "wait b");
    s.multiply();
    s.store(); // never waited: the kernel may return before C lands
    Report r = s.machine.finish();
    ASSERT_EQ(r.race_count, 1);
    EXPECT_EQ(r.races[0].first, "dma 'store c' (dma channel 0, core 0)");
    EXPECT_EQ(r.races[0].second, "end of the program of core 0");
    EXPECT_EQ(r.races[0].buffer, "C");
    EXPECT_TRUE(contains(r.races[0].str(), "ended before waiting"));
}

TEST(ZpuRaces, ReportedOnceAndCapped) {
    MatmulSetup s;
    for (int i = 0; i < 10; ++i) { // the same broken iteration ten times
        Token ta = s.load_a();
        s.multiply();
        s.core.dma_wait(ta, "late wait");
    }
    Report r = s.machine.finish();
    // Once per distinct op name: "load a" ran on channel 0 and on channel 1.
    ASSERT_EQ(r.races.size(), 2u);
    EXPECT_EQ(r.race_count, 2);
    EXPECT_EQ(r.races[0].first, "dma 'load a' (dma channel 0, core 0)");
    EXPECT_EQ(r.races[1].first, "dma 'load a' (dma channel 1, core 0)");

    Machine machine(one_core(), false);
    int dram = machine.add_dram("D", DType::F32, 16);
    int sram = machine.add_sram(0, "S", Space::RSRAM, DType::F32, 16);
    Core &core = machine.core(0);
    Box all{0, {{16, 1}}};
    for (int i = 0; i < 150; ++i) {
        Token t = core.dma_start(sram, all, dram, all, "load " + std::to_string(i));
        core.vector_op("use " + std::to_string(i), 16, {{sram, all, false}}, nullptr);
        core.sync(Engine::Vector, "used");
        core.dma_wait(t, "late");
    }
    Report many = machine.finish();
    EXPECT_EQ(many.races.size(), 100u);
    EXPECT_EQ(many.race_count, 150);
}

TEST(ZpuRaces, DisjointStridedBoxesDoNotRace) {
    // Even and odd elements of one buffer, written by two transfers in flight at once.
    Machine machine(one_core(), false);
    int dram = machine.add_dram("D", DType::F32, 64);
    int sram = machine.add_sram(0, "S", Space::RSRAM, DType::F32, 64);
    Core &core = machine.core(0);
    Box half{0, {{32, 1}}};
    Token even = core.dma_start(sram, Box{0, {{32, 2}}}, dram, half, "even");
    Token odd = core.dma_start(sram, Box{1, {{32, 2}}}, dram, half, "odd");
    core.dma_wait(even, "w");
    core.dma_wait(odd, "w");
    EXPECT_TRUE(machine.finish().races.empty());

    Machine clash(one_core(), false);
    dram = clash.add_dram("D", DType::F32, 64);
    sram = clash.add_sram(0, "S", Space::RSRAM, DType::F32, 64);
    Core &c = clash.core(0);
    Token t0 = c.dma_start(sram, Box{0, {{21, 3}}}, dram, Box{0, {{21, 1}}}, "every third");
    Token t1 = c.dma_start(sram, Box{1, {{32, 2}}}, dram, half, "odd"); // shares 3, 9, ...
    c.dma_wait(t0, "w");
    c.dma_wait(t1, "w");
    EXPECT_EQ(clash.finish().races.size(), 1u);
}

TEST(ZpuRaces, CrossCoreDramWritesAreExact) {
    // A 4 x 8 row-major matrix C. Core 0 writes columns 0..3; core 1 writes columns 4..7 (hulls
    // overlap, elements do not), or columns 2..5 (elements overlap).
    for (int second_col : {4, 2}) {
        ZpuParams p = any_routes();
        p.cores = 2;
        Machine machine(p, false);
        int c_dram = machine.add_dram("C", DType::F32, 4 * 8);
        int a_dram = machine.add_dram("A", DType::F32, 4 * 4);
        for (int core = 0; core < 2; ++core) {
            int t = machine.add_sram(core, "c_tile", Space::RSRAM, DType::F32, 16);
            Core &c = machine.core(core);
            c.dma_wait(c.dma_start(t, dense(4, 4), a_dram, dense(4, 4), "read A"), "w");
            int col = core == 0 ? 0 : second_col;
            c.dma_wait(c.dma_start(c_dram, tile(0, col, 4, 4, 8), t, dense(4, 4), "store C"), "w");
        }
        Report r = machine.finish();
        if (second_col == 4) {
            EXPECT_TRUE(r.races.empty()) << r.races[0].str();
        } else {
            ASSERT_EQ(r.races.size(), 1u);
            EXPECT_EQ(r.races[0].buffer, "C");
            // Channel 1 frees first: channel 0 ran "read A".
            EXPECT_EQ(r.races[0].first, "dma 'store C' (dma channel 1, core 0)");
            EXPECT_EQ(r.races[0].second, "dma 'store C' (dma channel 1, core 1)");
        }
    }
}

/** A random box of 1 to 3 dims (strides may be negative or 0) inside [0, size). */
Box random_box(std::mt19937 &rng, int64_t size) {
    std::uniform_int_distribution<int> rank(1, 3), extent(1, 6), stride(-12, 12);
    while (true) {
        Box box;
        int64_t lo = 0, hi = 0;
        for (int d = rank(rng); d > 0; --d) {
            Dim dim{extent(rng), stride(rng)};
            box.dims.push_back(dim);
            int64_t reach = (dim.extent - 1) * dim.stride;
            (reach < 0 ? lo : hi) += reach;
        }
        if (hi - lo < size) {
            box.offset = -lo + std::uniform_int_distribution<int64_t>(0, size - 1 - (hi - lo))(rng);
            return box;
        }
    }
}

std::vector<bool> elements_of(const Box &box, int64_t size) {
    std::vector<bool> in(size_t(size), false);
    std::vector<int64_t> index(box.dims.size(), 0);
    for (int64_t e = 0; e < box.elements(); ++e) {
        int64_t at = box.offset, rest = e;
        for (const Dim &d : box.dims) {
            at += (rest % d.extent) * d.stride;
            rest /= d.extent;
        }
        in[size_t(at)] = true;
    }
    return in;
}

bool meet(const std::vector<bool> &x, const std::vector<bool> &y) {
    for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] && y[i]) {
            return true;
        }
    }
    return false;
}

TEST(ZpuRaces, OverlapMatchesBruteForce) {
    // "write x" and "write y" in flight at once (one channel, but tokens order transfers, not
    // channels) and "read z" (a vector op issued without waiting): no two are ordered. Some race
    // must be reported exactly when two of them meet.
    const int64_t size = 160;
    std::mt19937 rng(11);
    ZpuParams p = any_routes();
    p.cores = 2;
    p.dma_channels = 1;
    int overlapping = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        Box x = random_box(rng, size), y = random_box(rng, size), z = random_box(rng, size);
        std::vector<bool> xs = elements_of(x, size), ys = elements_of(y, size);
        std::vector<bool> zs = elements_of(z, size);
        bool expected = meet(xs, ys) || meet(xs, zs) || meet(ys, zs);
        overlapping += expected;

        Machine machine(p, false);
        int dram = machine.add_dram("D", DType::F32, 256);
        int sram = machine.add_sram(0, "S", Space::RSRAM, DType::F32, size);
        Core &core = machine.core(0);
        Token tx = core.dma_start(sram, x, dram, Box{0, {{x.elements(), 1}}}, "write x");
        Token ty = core.dma_start(sram, y, dram, Box{0, {{y.elements(), 1}}}, "write y");
        core.vector_op("read z", 1, {{sram, z, false}}, nullptr);
        core.dma_wait(tx, "drain x");
        core.dma_wait(ty, "drain y");
        ASSERT_EQ(!machine.finish().races.empty(), expected)
            << "x " << x.str() << " y " << y.str() << " z " << z.str();

        // Across cores: core 0 writes x in DRAM, core 1 reads z.
        Machine pair(p, false);
        int shared = pair.add_dram("shared", DType::F32, size);
        int tile0 = pair.add_sram(0, "t0", Space::RSRAM, DType::F32, 256);
        int tile1 = pair.add_sram(1, "t1", Space::RSRAM, DType::F32, 256);
        pair.core(0).dma_wait(
            pair.core(0).dma_start(shared, x, tile0, Box{0, {{x.elements(), 1}}}, "store x"),
            "drain");
        pair.core(1).dma_wait(
            pair.core(1).dma_start(tile1, Box{0, {{z.elements(), 1}}}, shared, z, "load z"),
            "drain");
        ASSERT_EQ(!pair.finish().races.empty(), meet(xs, zs))
            << "x " << x.str() << " z " << z.str();
    }
    EXPECT_GT(overlapping, 200); // both outcomes well exercised
    EXPECT_LT(overlapping, 1800);
}

// ---------------------------------------------------------------------------------------------
// A double-buffered GEMM over several cores: numerics, no races, and its broken variant
// ---------------------------------------------------------------------------------------------

struct GemmShape {
    int64_t M, N, K, tm, tn, tk;
};

/** C(n, m) = sum_k A(k, m) B(n, k) on `cores` cores (output tiles dealt round-robin), A and B
 * tiles double-buffered one step ahead, two accumulators. Returns C's buffer id. */
int run_gemm(Machine &machine, const GemmShape &g, int a_dram, int b_dram, bool wait_stores) {
    int c_dram = machine.add_dram("C", DType::F32, g.N * g.M);
    int64_t tiles_m = g.M / g.tm, tiles_n = g.N / g.tn, steps_k = g.K / g.tk;
    for (int c = 0; c < machine.num_cores(); ++c) {
        Core &core = machine.core(c);
        int a[2], b[2], acc[2];
        Token acc_stored[2];
        for (int s = 0; s < 2; ++s) {
            std::string slot = std::to_string(s);
            a[s] = machine.add_sram(c, "a" + slot, Space::ASRAM, DType::BF16, g.tk * g.tm);
            b[s] = machine.add_sram(c, "b" + slot, Space::WSRAM, DType::BF16, g.tn * g.tk);
            acc[s] = machine.add_sram(c, "acc" + slot, Space::RSRAM, DType::F32, g.tn * g.tm);
        }
        struct Step {
            int64_t tm_index, tn_index, k_index, tile;
        };
        std::vector<Step> steps;
        int64_t my_tile = 0;
        for (int64_t t = c; t < tiles_m * tiles_n; t += machine.num_cores(), ++my_tile) {
            for (int64_t k = 0; k < steps_k; ++k) {
                steps.push_back({t / tiles_n, t % tiles_n, k, my_tile});
            }
        }
        Token loaded[2][2];
        auto issue = [&](size_t i) {
            const Step &s = steps[i];
            int slot = int(i % 2);
            Box a_src = box2(s.k_index * g.tk + s.tm_index * g.tm * g.K, g.tk, 1, g.tm, g.K);
            Box b_src = box2(s.tn_index * g.tn + s.k_index * g.tk * g.N, g.tn, 1, g.tk, g.N);
            loaded[slot][0] = core.dma_start(a[slot], dense(g.tk, g.tm), a_dram, a_src, "load a");
            loaded[slot][1] = core.dma_start(b[slot], dense(g.tn, g.tk), b_dram, b_src, "load b");
        };
        if (!steps.empty()) {
            issue(0);
        }
        for (size_t i = 0; i < steps.size(); ++i) {
            const Step &s = steps[i];
            int slot = int(i % 2), acc_slot = int(s.tile % 2);
            if (i + 1 < steps.size()) {
                core.sync(Engine::Tensor, "previous mma done"); // the other slot's last reader
                issue(i + 1);
            }
            core.dma_wait(loaded[slot][0], "wait a");
            core.dma_wait(loaded[slot][1], "wait b");
            if (s.k_index == 0) {
                if (wait_stores) {
                    core.dma_wait(acc_stored[acc_slot], "wait acc released");
                }
                int target = acc[acc_slot];
                int64_t count = g.tn * g.tm;
                core.vector_op("zero acc", count, {{target, dense(g.tn, g.tm), true}},
                               [&machine, target, count] {
                                   float *p = static_cast<float *>(machine.data(target));
                                   std::fill(p, p + count, 0.0f);
                               });
                core.sync(Engine::Vector, "zeroed");
            }
            core.mma(acc[acc_slot], dense(g.tn, g.tm), a[slot], dense(g.tk, g.tm), b[slot],
                     dense(g.tn, g.tk), "mma");
            if (s.k_index == steps_k - 1) {
                core.sync(Engine::Tensor, "tile done");
                Box c_dst = box2(s.tn_index * g.tn + s.tm_index * g.tm * g.N, g.tn, 1, g.tm, g.N);
                acc_stored[acc_slot] =
                    core.dma_start(c_dram, c_dst, acc[acc_slot], dense(g.tn, g.tm), "store c");
            }
        }
        for (Token t : acc_stored) {
            core.dma_wait(t, "drain stores");
        }
    }
    return c_dram;
}

TEST(ZpuGemm, PipelinedGemmOnFourCoresIsCorrectAndRaceFree) {
    ZpuParams p = any_routes();
    p.cores = 4;
    GemmShape g{64, 96, 96, 16, 32, 32};
    Machine machine(p, true);
    int a_dram = machine.add_dram("A", DType::BF16, g.K * g.M);
    int b_dram = machine.add_dram("B", DType::BF16, g.N * g.K);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> a_values(size_t(g.K * g.M)), b_values(size_t(g.N * g.K));
    for (auto [buffer, values] : {std::pair{a_dram, &a_values}, std::pair{b_dram, &b_values}}) {
        for (size_t i = 0; i < values->size(); ++i) {
            uint16_t bits = float_to_bf16(value(rng));
            static_cast<uint16_t *>(machine.data(buffer))[i] = bits;
            (*values)[i] = bf16_to_float(bits);
        }
    }
    int c_dram = run_gemm(machine, g, a_dram, b_dram, true);
    Report r = machine.finish();
    EXPECT_TRUE(r.races.empty()) << r.races[0].str();
    EXPECT_FALSE(r.deadlock);
    const float *c = static_cast<const float *>(machine.data(c_dram));
    for (int64_t m = 0; m < g.M; ++m) {
        for (int64_t n = 0; n < g.N; ++n) {
            float sum = 0.0f;
            for (int64_t k = 0; k < g.K; ++k) {
                sum += a_values[size_t(k + m * g.K)] * b_values[size_t(n + k * g.N)];
            }
            ASSERT_NEAR(c[n + m * g.N], sum, 1e-4f * (1.0f + std::fabs(sum))) << n << "," << m;
        }
    }
    // The pipeline overlaps loads with compute: faster than the serial sum of all work.
    Cycles serial = busy(r, "tensor") + busy(r, "vector") + busy(r, "dma");
    EXPECT_LT(r.cycles, serial / 4);
    EXPECT_GT(r.efficiency(), 0.0);
    EXPECT_LE(r.efficiency(), 1.0);
}

TEST(ZpuGemm, ForgettingTheStoreWaitRaces) {
    ZpuParams p = any_routes();
    p.cores = 2;
    GemmShape g{64, 64, 32, 16, 32, 32}; // one k step: each tile's store is followed closely
    Machine machine(p, false);
    int a_dram = machine.add_dram("A", DType::BF16, g.K * g.M);
    int b_dram = machine.add_dram("B", DType::BF16, g.N * g.K);
    run_gemm(machine, g, a_dram, b_dram, /*wait_stores=*/false);
    Report r = machine.finish();
    ASSERT_FALSE(r.races.empty());
    EXPECT_EQ(r.races[0].first, "dma 'store c' (dma channel 0, core 0)");
    EXPECT_EQ(r.races[0].second, "vector 'zero acc' (vector, core 0)");
    EXPECT_TRUE(r.races[0].buffer == "acc0" || r.races[0].buffer == "acc1");
}

// ---------------------------------------------------------------------------------------------
// Deadlock and user errors
// ---------------------------------------------------------------------------------------------

TEST(ZpuDeadlock, WaitOnATokenNeverIssued) {
    ZpuParams p = any_routes();
    p.cores = 2;
    Machine machine(p, false);
    machine.core(1).dma_wait(Token{}, "null token"); // free
    EXPECT_EQ(machine.core(1).now(), 0);
    try {
        machine.core(1).dma_wait(Token{42}, "wait for tile");
        FAIL() << "no DeadlockError";
    } catch (const DeadlockError &e) {
        EXPECT_TRUE(contains(e.what(), "core 1")) << e.what();
        EXPECT_TRUE(contains(e.what(), "wait for tile")) << e.what();
        EXPECT_TRUE(contains(e.what(), "token 42")) << e.what();
    }
    Report r = machine.finish();
    EXPECT_TRUE(r.deadlock);
    EXPECT_TRUE(contains(r.deadlock_message, "core 1")) << r.deadlock_message;
}

TEST(ZpuDeadlock, WaitOnAnotherCoresToken) {
    ZpuParams p = any_routes();
    p.cores = 2;
    Machine machine(p, false);
    int dram = machine.add_dram("D", DType::F32, 16);
    int sram = machine.add_sram(0, "S", Space::RSRAM, DType::F32, 16);
    Token t = machine.core(0).dma_start(sram, Box{0, {{16, 1}}}, dram, Box{0, {{16, 1}}}, "load");
    try {
        machine.core(1).dma_wait(t, "wait for core 0");
        FAIL() << "no DeadlockError";
    } catch (const DeadlockError &e) {
        EXPECT_TRUE(contains(e.what(), "core 1")) << e.what();
        EXPECT_TRUE(contains(e.what(), "core 0 issued")) << e.what();
    }
    try {
        machine.core(1).dma_wait(t, "wait for core 0");
    } catch (const DeadlockError &e) {
        machine.report_deadlock(e.what()); // reporting the thrown message again adds nothing
    }
    machine.report_deadlock("caller's note"); // the caller may add its own message too
    Report r = machine.finish();
    EXPECT_EQ(r.deadlock_message.find("core 0 issued"), r.deadlock_message.rfind("core 0 issued"));
    EXPECT_TRUE(r.deadlock);
    EXPECT_TRUE(contains(r.deadlock_message, "core 0 issued"));
    EXPECT_TRUE(contains(r.deadlock_message, "caller's note"));
}

TEST(ZpuErrors, SramOverflowNamesBufferAndScope) {
    Machine machine(any_routes(), false);
    machine.add_sram(0, "a_stage0", Space::ASRAM, DType::BF16, 300000); // 600000 of 1 MB
    try {
        machine.add_sram(0, "a_stage1", Space::ASRAM, DType::BF16, 300000);
        FAIL() << "no SimError";
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(), "a_stage1")) << e.what();
        EXPECT_TRUE(contains(e.what(), "ASRAM")) << e.what();
        EXPECT_TRUE(contains(e.what(), "core 0")) << e.what();
        EXPECT_TRUE(contains(e.what(), "600000")) << e.what(); // requested bytes
        EXPECT_TRUE(contains(e.what(), std::to_string((1 << 20) - 600000))) << e.what(); // free
    }
    machine.add_sram(1, "a_stage1", Space::ASRAM, DType::BF16, 300000); // other core: fits
    machine.add_sram(0, "w", Space::WSRAM, DType::BF16, 300000);        // other scope: fits
}

TEST(ZpuErrors, BoxOutsideItsBuffer) {
    Machine machine(one_core(), false);
    int dram = machine.add_dram("A", DType::F32, 64);
    int sram = machine.add_sram(0, "a_tile", Space::RSRAM, DType::F32, 16);
    Core &core = machine.core(0);
    try {
        core.dma_start(sram, box2(4, 4, 1, 4, 4), dram, dense(4, 4), "load tile");
        FAIL() << "no SimError";
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(), "load tile")) << e.what();
        EXPECT_TRUE(contains(e.what(), "a_tile")) << e.what();
    }
    EXPECT_THROW(core.dma_start(sram, Box{0, {{16, -1}}}, dram, Box{0, {{16, 1}}}, "backwards"),
                 SimError);
    EXPECT_THROW(core.dma_start(sram, dense(4, 4), dram, dense(4, 3), "count mismatch"), SimError);
    EXPECT_THROW(core.vector_op("v", 1, {{dram, Box{60, {{8, 1}}}, false}}, nullptr), SimError);
    EXPECT_THROW(core.dma_start(sram, dense(4, 4), 99, dense(4, 4), "no such buffer"), SimError);
    EXPECT_TRUE(machine.finish().races.empty()); // failed ops left no trace
}

TEST(ZpuErrors, DmaNeedsOneElementType) {
    Machine machine(one_core(), false);
    int dram = machine.add_dram("A", DType::F32, 16);
    int sram = machine.add_sram(0, "a_tile", Space::ASRAM, DType::BF16, 16);
    try {
        machine.core(0).dma_start(sram, dense(4, 4), dram, dense(4, 4), "convert");
        FAIL();
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(), "bf16") && contains(e.what(), "f32")) << e.what();
    }
}

TEST(ZpuErrors, AnotherCoresSram) {
    ZpuParams p = any_routes();
    p.cores = 2;
    Machine machine(p, false);
    int dram = machine.add_dram("A", DType::F32, 16);
    int theirs = machine.add_sram(1, "their_tile", Space::RSRAM, DType::F32, 16);
    try {
        machine.core(0).dma_start(theirs, dense(4, 4), dram, dense(4, 4), "steal");
        FAIL();
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(), "their_tile") && contains(e.what(), "core 1")) << e.what();
    }
}

TEST(ZpuErrors, MmaShapesAndScopes) {
    Machine machine(one_core(), false);
    int a = machine.add_sram(0, "a", Space::ASRAM, DType::BF16, 32 * 16);
    int b = machine.add_sram(0, "b", Space::WSRAM, DType::BF16, 32 * 32);
    int acc = machine.add_sram(0, "acc", Space::RSRAM, DType::F32, 32 * 16);
    int not_w = machine.add_sram(0, "b_in_rsram", Space::RSRAM, DType::BF16, 32 * 32);
    Core &core = machine.core(0);
    core.mma(acc, dense(32, 16), a, dense(32, 16), b, dense(32, 32), "fine");
    try {
        core.mma(acc, dense(32, 16), a, dense(32, 16), b, dense(16, 32), "bad n");
        FAIL();
    } catch (const SimError &e) {
        EXPECT_TRUE(contains(e.what(), "bad n") && contains(e.what(), "shapes")) << e.what();
    }
    EXPECT_THROW(core.mma(acc, dense(32, 16), a, dense(32, 16), not_w, dense(32, 32), "scope"),
                 SimError);
    EXPECT_THROW(core.mma(acc, Box{0, {{32, 1}}}, a, dense(32, 16), b, dense(32, 32), "rank"),
                 SimError);
    EXPECT_THROW(core.mma(a, dense(32, 16), a, dense(32, 16), b, dense(32, 32), "acc type"),
                 SimError);
}

TEST(ZpuErrors, BadParametersAndIds) {
    ZpuParams p = any_routes();
    p.dma_channels = 0;
    EXPECT_THROW(Machine(p, false), SimError);
    Machine machine(any_routes(), false);
    EXPECT_THROW(machine.core(16), SimError);
    EXPECT_THROW(machine.add_sram(0, "x", Space::DRAM, DType::F32, 4), SimError);
    EXPECT_THROW(machine.name(3), SimError);
}

// ---------------------------------------------------------------------------------------------
// Trace
// ---------------------------------------------------------------------------------------------

/** A minimal JSON syntax check (values, objects, arrays, strings with escapes, numbers). */
class JsonChecker {
public:
    explicit JsonChecker(const std::string &text) : s_(text) {}
    bool valid() {
        skip();
        if (!value()) {
            return false;
        }
        skip();
        return at_ == s_.size();
    }

private:
    void skip() {
        while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) {
            ++at_;
        }
    }
    bool literal(const char *word) {
        size_t n = std::strlen(word);
        if (s_.compare(at_, n, word) != 0) {
            return false;
        }
        at_ += n;
        return true;
    }
    bool string() {
        if (s_[at_] != '"') {
            return false;
        }
        for (++at_; at_ < s_.size(); ++at_) {
            char c = s_[at_];
            if (c == '"') {
                ++at_;
                return true;
            }
            if (static_cast<unsigned char>(c) < 0x20) {
                return false;
            }
            if (c == '\\') {
                ++at_;
                if (at_ >= s_.size() || !std::strchr("\"\\/bfnrtu", s_[at_])) {
                    return false;
                }
            }
        }
        return false;
    }
    bool number() {
        size_t start = at_;
        while (at_ < s_.size() && std::strchr("+-0123456789.eE", s_[at_])) {
            ++at_;
        }
        return at_ > start;
    }
    bool value() {
        if (at_ >= s_.size()) {
            return false;
        }
        char c = s_[at_];
        if (c == '{' || c == '[') {
            char close = c == '{' ? '}' : ']';
            ++at_;
            skip();
            if (at_ < s_.size() && s_[at_] == close) {
                ++at_;
                return true;
            }
            while (true) {
                skip();
                if (c == '{') {
                    if (!string()) {
                        return false;
                    }
                    skip();
                    if (at_ >= s_.size() || s_[at_++] != ':') {
                        return false;
                    }
                    skip();
                }
                if (!value()) {
                    return false;
                }
                skip();
                if (at_ >= s_.size()) {
                    return false;
                }
                if (s_[at_] == close) {
                    ++at_;
                    return true;
                }
                if (s_[at_++] != ',') {
                    return false;
                }
            }
        }
        if (c == '"') {
            return string();
        }
        return literal("true") || literal("false") || literal("null") || number();
    }
    const std::string &s_;
    size_t at_ = 0;
};

TEST(ZpuRoutes, PinnedUnitsAndNoDramToAsram) {
    // SUNMMIO/Tilelang-Mesh: DRAM -> ASRAM is not one transfer; DRAM loads take ODMA unit 0 and
    // RSRAM -> ASRAM unit 1 (machines/zpu.json).
    ZpuParams p;
    p.cores = 1;
    EXPECT_LT(p.route_unit(Space::DRAM, Space::ASRAM), 0);
    EXPECT_EQ(p.route_unit(Space::DRAM, Space::RSRAM), 0);
    EXPECT_EQ(p.route_unit(Space::DRAM, Space::WSRAM), 0);
    EXPECT_EQ(p.route_unit(Space::RSRAM, Space::ASRAM), 1);
    EXPECT_LT(p.route_unit(Space::ASRAM, Space::DRAM), 0);
    Machine machine(p, false);
    int dram = machine.add_dram("D", DType::BF16, 2 * 4096);
    int a = machine.add_sram(0, "a", Space::ASRAM, DType::BF16, 4096);
    int r = machine.add_sram(0, "r", Space::RSRAM, DType::BF16, 4096);
    int w = machine.add_sram(0, "w", Space::WSRAM, DType::BF16, 4096);
    Core &core = machine.core(0);
    Box tile{0, {{4096, 1}}}, second{4096, {{4096, 1}}};
    EXPECT_THROW(core.dma_start(a, tile, dram, tile, "straight to ASRAM"), SimError);
    // Two DRAM loads share unit 0: the second starts when the first ends (8192 bytes: 108).
    Token t1 = core.dma_start(r, tile, dram, tile, "to RSRAM");
    Token t2 = core.dma_start(w, tile, dram, second, "to WSRAM");
    core.dma_wait(t2, "wait both");
    EXPECT_EQ(core.now(), 2 * 108);
    core.dma_wait(t1, "wait first");
    // RSRAM -> ASRAM on unit 1.
    Token hop = core.dma_start(a, tile, r, tile, "hop");
    core.dma_wait(hop, "wait hop");
    EXPECT_EQ(core.now(), 3 * 108);
    Report rep = machine.finish();
    EXPECT_TRUE(rep.races.empty());
}

TEST(ZpuTrace, WritesValidJsonWithEngineTracks) {
    ZpuParams p = one_core();
    p.dma_queue_depth = 1;
    Machine machine(p, false, /*trace=*/true);
    int dram = machine.add_dram("D", DType::F32, 2048);
    int sram = machine.add_sram(0, "S", Space::RSRAM, DType::F32, 2048);
    Core &core = machine.core(0);
    Box low{0, {{1024, 1}}}, high{1024, {{1024, 1}}};
    core.dma_start(sram, low, dram, low, "load \"low\"\\half");
    Token t = core.dma_start(sram, high, dram, high, "load high"); // stalls: depth 1
    core.dma_wait(t, "wait high");
    core.vector_op("scale", 2048, {{sram, Box{0, {{2048, 1}}}, true}}, nullptr);
    std::string path = ::testing::TempDir() + "zpu_sim_test.trace.json";
    machine.write_trace(path);
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.front(), '{');
    EXPECT_TRUE(JsonChecker(text).valid());
    for (const char *track : {"\"control\"", "\"tensor\"", "\"vector\"", "\"dma0\"", "\"dma1\""}) {
        EXPECT_TRUE(contains(text, track)) << track;
    }
    EXPECT_TRUE(contains(text, R"("load \"low\"\\half")"));
    EXPECT_TRUE(contains(text, "\"ph\": \"X\""));
    EXPECT_TRUE(contains(text, "\"cat\": \"stall\""));
    std::remove(path.c_str());

    Machine untraced(one_core(), false, false);
    EXPECT_THROW(untraced.write_trace(path), SimError);
}

TEST(ZpuTrace, SvgTimelineDrawsLanesAndFoldsManyCores) {
    ZpuParams p; // 16 cores
    Machine machine(p, false, /*trace=*/true);
    int dram = machine.add_dram("D", DType::F32, 16 * 1024);
    for (int c = 0; c < p.cores; ++c) {
        int sram = machine.add_sram(c, "S", Space::RSRAM, DType::F32, 1024);
        Box box{0, {{1024, 1}}}, part{int64_t(c) * 1024, {{1024, 1}}};
        Core &core = machine.core(c);
        Token t = core.dma_start(sram, box, dram, part, "load");
        core.dma_wait(t, "wait");
        core.vector_op("scale", 1024, {{sram, box, true}}, nullptr);
    }
    std::string path = ::testing::TempDir() + "zpu_sim_test.timeline.svg";
    machine.write_trace(path);
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    EXPECT_EQ(text.rfind("<svg", 0), 0u);
    EXPECT_TRUE(contains(text, "</svg>"));
    // The first four cores get a lane per engine they used; the other twelve are folded.
    for (const char *lane :
         {">core 0 control<", ">core 0 vector<", ">core 0 dma0<", ">core 3 vector<"})
        EXPECT_TRUE(contains(text, lane)) << lane;
    EXPECT_FALSE(contains(text, ">core 4 vector<"));
    EXPECT_FALSE(contains(text, ">core 0 tensor<")); // no MMA ran: no lane
    EXPECT_TRUE(contains(text, "and 12 more cores or SMs, folded"));
    EXPECT_TRUE(contains(text, "<title>dma</title>"));
    EXPECT_TRUE(contains(text, "<title>vector</title>"));
    std::remove(path.c_str());
}

} // namespace
} // namespace tandem::sim
