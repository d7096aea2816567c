// The AscendC CPU runtime (backends/ascend/runtime/kernel_operator.h) on hand-written kernels:
// TPipe's reserved events, the kernel type against the cores it runs on, block indices per kind.

#include "Handwritten.h"
#include "kernel_operator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using tandem::sim::DType;
using tandem::sim::SimError;
using tandem::sim::ascend::AscendParams;
using tandem::sim::ascend::Machine;

AscendParams small() {
    AscendParams p;
    p.cube_cores = 2;
    p.vector_cores = 4;
    return p;
}

template <class F> std::string error_of(F &&f) {
    try {
        f();
    } catch (const SimError &e) {
        return e.what();
    }
    return "";
}

// A cube kernel that pre-arms M -> MTE1 event 0 as its own ring's "slot free".
extern "C" __global__ __aicore__ void prearm_without_destroy(GM_ADDR) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);
    AscendC::TPipe pipe;
    AscendC::SetFlag<AscendC::HardEvent::M_MTE1>(0);
    AscendC::WaitFlag<AscendC::HardEvent::M_MTE1>(0);
}

extern "C" __global__ __aicore__ void prearm_after_destroy(GM_ADDR) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);
    AscendC::TPipe pipe;
    pipe.Destroy();
    AscendC::SetFlag<AscendC::HardEvent::M_MTE1>(0);
    AscendC::WaitFlag<AscendC::HardEvent::M_MTE1>(0);
}

// TPipe's constructor sets M_MTE1 0..2 on the AIC: a kernel's own set of event 0 collides (a hang
// on hardware), unless it called pipe.Destroy() first.
TEST(AscendRuntime, TPipeReservesThreeMte1EventsOnTheCube) {
    Machine collide(small(), false);
    int x = collide.add_gm("x", DType::F32, 16);
    std::string e = error_of([&] {
        tandem_ascend::run(collide, prearm_without_destroy, {x}, AscendC::KernelMode::AIC_MODE);
    });
    EXPECT_NE(e.find("set twice without a wait"), std::string::npos) << e;
    EXPECT_NE(e.find("SetFlag<M_MTE1>(0)"), std::string::npos) << e;

    Machine fine(small(), false);
    int y = fine.add_gm("x", DType::F32, 16);
    tandem_ascend::run(fine, prearm_after_destroy, {y}, AscendC::KernelMode::AIC_MODE);
    tandem::sim::Report r = fine.finish();
    EXPECT_FALSE(r.deadlock) << r.deadlock_message;
}

std::vector<int64_t> seen_blocks;
int64_t seen_block_num = 0;

extern "C" __global__ __aicore__ void vector_blocks(GM_ADDR) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    AscendC::TPipe pipe; // no reserved events on an AIV: the destructor only drains the pipes
    seen_blocks.push_back(AscendC::GetBlockIdx());
    seen_block_num = AscendC::GetBlockNum();
}

TEST(AscendRuntime, AVectorKernelRunsOnEveryAivWithItsOwnBlockIndex) {
    Machine machine(small(), false);
    int x = machine.add_gm("x", DType::F32, 16);
    seen_blocks.clear();
    tandem_ascend::run(machine, vector_blocks, {x}, AscendC::KernelMode::AIV_MODE);
    EXPECT_EQ(seen_blocks, (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(seen_block_num, 4);
    EXPECT_FALSE(machine.finish().deadlock);

    // The kernel type must match the cores the host runs it on.
    Machine wrong(small(), false);
    int y = wrong.add_gm("x", DType::F32, 16);
    std::string e = error_of(
        [&] { tandem_ascend::run(wrong, vector_blocks, {y}, AscendC::KernelMode::AIC_MODE); });
    EXPECT_NE(e.find("KERNEL_TYPE_AIV_ONLY"), std::string::npos) << e;
    EXPECT_NE(e.find("AIV_MODE"), std::string::npos) << e;
}

// The hand-written anchor GEMM (benchmarks/ascend/HandwrittenGemm.cpp) in real AscendC: Nd2Nz,
// LoadData2D strips and transposed K blocks, Mmad on Zz x Zn, Fixpipe Nz -> ND with F322BF16.
// Its numbers must be the GEMM's, and its flags race- and deadlock-free, on the model.
TEST(AscendRuntime, HandwrittenFractalGemmIsCorrect) {
    const int32_t M = 256, N = 384, K = 384;
    AscendParams p;
    p.cube_cores = 4; // 6 tiles: two cores take two, so the accumulator slots alternate
    Machine machine(p, true);
    int a = machine.add_gm("A", DType::BF16, M * K), b = machine.add_gm("B", DType::BF16, K * N);
    int c = machine.add_gm("C", DType::BF16, M * N),
        tiling = machine.add_gm("tiling", DType::I32, 3);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> af(size_t(M * K)), bf(size_t(K * N));
    auto fill = [&](int buffer, std::vector<float> &values) {
        auto *bits = static_cast<uint16_t *>(machine.data(buffer));
        for (size_t i = 0; i < values.size(); i++) {
            bits[i] = tandem::sim::float_to_bf16(dist(rng));
            values[i] = tandem::sim::bf16_to_float(bits[i]);
        }
    };
    fill(a, af);
    fill(b, bf);
    const int32_t shape[3] = {M, N, K};
    std::memcpy(machine.data(tiling), shape, sizeof(shape));
    tandem_ascend::run(machine, handwritten_gemm, {a, b, c, tiling}, AscendC::KernelMode::AIC_MODE);
    tandem::sim::Report r = machine.finish();
    EXPECT_FALSE(r.deadlock) << r.deadlock_message;
    EXPECT_EQ(r.race_count, 0);
    const auto *out = static_cast<const uint16_t *>(machine.data(c));
    int bad = 0;
    for (int32_t i = 0; i < M; i++) {
        for (int32_t j = 0; j < N; j++) {
            double want = 0;
            for (int32_t k = 0; k < K; k++)
                want += double(af[size_t(i * K + k)]) * bf[size_t(k * N + j)];
            double got = tandem::sim::bf16_to_float(out[i * N + j]);
            if (std::abs(got - want) >
                    std::ldexp(std::abs(want), -7) + 1e-3 * std::sqrt(double(K)) &&
                bad++ < 5)
                ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got << ", want " << want;
        }
    }
    EXPECT_EQ(bad, 0);
}

// The hand-written elementwise anchor (benchmarks/ascend/HandwrittenElementwise.cpp): the real
// vector instructions on the AIV, double-buffered; bit-exact with the same f32 operations.
TEST(AscendRuntime, HandwrittenElementwiseIsExact) {
    const int32_t n = 8 * 1024, tile = 1024;
    AscendParams p;
    p.vector_cores = 3; // 8 tiles: every core takes two or three, both slots reused
    Machine machine(p, true);
    int a = machine.add_gm("a", DType::F32, n), b = machine.add_gm("b", DType::F32, n);
    int c = machine.add_gm("c", DType::F32, n), out = machine.add_gm("out", DType::F32, n);
    int tiling = machine.add_gm("tiling", DType::I32, 2);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (int buffer : {a, b, c}) {
        auto *v = static_cast<float *>(machine.data(buffer));
        for (int32_t i = 0; i < n; i++)
            v[i] = dist(rng);
    }
    const int32_t shape[2] = {n, tile};
    std::memcpy(machine.data(tiling), shape, sizeof(shape));
    tandem_ascend::run(machine, handwritten_elementwise, {a, b, c, out, tiling},
                       AscendC::KernelMode::AIV_MODE);
    tandem::sim::Report r = machine.finish();
    EXPECT_FALSE(r.deadlock) << r.deadlock_message;
    std::string races;
    for (const auto &race : r.races)
        races += race.str() + "\n";
    EXPECT_EQ(r.race_count, 0) << races;
    const auto *av = static_cast<const float *>(machine.data(a)),
               *bv = static_cast<const float *>(machine.data(b));
    const auto *cv = static_cast<const float *>(machine.data(c)),
               *ov = static_cast<const float *>(machine.data(out));
    for (int32_t i = 0; i < n; i++) {
        volatile float prod = av[i] * bv[i], half = std::max(cv[i], 0.0f) * 0.5f; // no contraction
        ASSERT_EQ(ov[i], prod + half) << i;
    }
}

// The hand-written fused attention anchor (benchmarks/ascend/HandwrittenAttention.cpp): a mix
// kernel, cube and vector cores joined by cross-core flags through GM workspaces. Two AICs for
// three query tiles (one takes two: the counters and slots run on across tiles), three key
// blocks, both AIVs of an AIC taking half the rows; right against the reference in double, race-
// and deadlock-free, every flag balanced.
TEST(AscendRuntime, HandwrittenAttentionIsCorrect) {
    for (const auto &[D, TJ] : {std::pair{64, 128}, std::pair{128, 64}}) {
        const int32_t S = 192, L = 3 * TJ, TM = 64;
        AscendParams p;
        p.cube_cores = 2;
        p.vector_cores = 4;
        Machine machine(p, true);
        int q = machine.add_gm("q", DType::BF16, S * D),
            k = machine.add_gm("k", DType::BF16, L * D);
        int v = machine.add_gm("v", DType::BF16, L * D),
            out = machine.add_gm("out", DType::F32, S * D);
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (int buffer : {q, k, v}) {
            auto *bits = static_cast<uint16_t *>(machine.data(buffer));
            for (int64_t i = 0; i < machine.elements(buffer); i++)
                bits[i] = tandem::sim::float_to_bf16(dist(rng));
        }
        tandem::sim::Report r =
            run_handwritten_attention(machine, {q, k, v, out}, {S, L, D, TM, TJ});
        EXPECT_FALSE(r.deadlock) << r.deadlock_message;
        EXPECT_EQ(r.race_count, 0) << (r.races.empty() ? "" : r.races.front().str());
        EXPECT_LT(handwritten_attention_error(machine, {q, k, v, out}, {S, L, D, TM, TJ}, 1), 1e-2)
            << "D = " << D;
    }
}

// Row-wise vector work as a real rmsnorm-style kernel writes it: per-row sums (ReduceSum), a
// per-row value broadcast to blocks (Brcb), a division by it in the repeat form (a source block
// stride of 0), and Compare + Select; one AIV, four rows of 80 floats.
extern "C" __global__ __aicore__ void rows_kernel(GM_ADDR x_gm, GM_ADDR out_gm, GM_ADDR sel_gm) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    constexpr int rows = 4, cols = 80;
    AscendC::GlobalTensor<float> x, out, sel;
    x.SetGlobalBuffer((__gm__ float *)x_gm, rows * cols);
    out.SetGlobalBuffer((__gm__ float *)out_gm, rows * cols);
    sel.SetGlobalBuffer((__gm__ float *)sel_gm, 64);
    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::VECCALC> xb, sb, bb, ob, mb, tb;
    pipe.InitBuffer(xb, rows * cols * 4);
    pipe.InitBuffer(sb, 32);
    pipe.InitBuffer(bb, 8 * 32);
    pipe.InitBuffer(ob, rows * cols * 4);
    pipe.InitBuffer(mb, 32);
    pipe.InitBuffer(tb, 64 * 4);
    AscendC::LocalTensor<float> xl = xb.Get<float>(), sums = sb.Get<float>(),
                                blocks = bb.Get<float>(), ol = ob.Get<float>();
    AscendC::LocalTensor<uint8_t> mask = mb.Get<uint8_t>();
    AscendC::LocalTensor<float> tl = tb.Get<float>();
    pipe.Destroy();
    AscendC::DataCopy(xl, x, rows * cols);
    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(0);
    for (int r = 0; r < rows; r++)
        AscendC::ReduceSum(sums[r], xl[r * cols], tl, cols);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Brcb(blocks, sums, 1, AscendC::BrcbRepeatParams(1, 8));
    AscendC::PipeBarrier<PIPE_V>();
    // Columns 0..63 of every row in one instruction (repeats over rows), then the last 16.
    AscendC::Div(ol, xl, blocks, 64, rows,
                 AscendC::BinaryRepeatParams(1, 1, 0, cols / 8, cols / 8, 1));
    AscendC::Div(ol[64], xl[64], blocks, 16, rows,
                 AscendC::BinaryRepeatParams(1, 1, 0, cols / 8, cols / 8, 1));
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Compare(mask, xl, xl[64], AscendC::CMPMODE::LT, 64);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Select(tl, mask, xl, xl[64], AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, 64);
    AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(0);
    AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(0);
    AscendC::DataCopy(out, ol, rows * cols);
    AscendC::DataCopy(sel, tl, 64);
}

TEST(AscendRuntime, RowSumsBroadcastsAndSelectsAreExact) {
    constexpr int rows = 4, cols = 80;
    AscendParams p;
    p.vector_cores = 1;
    Machine machine(p, true);
    int x = machine.add_gm("x", DType::F32, rows * cols),
        out = machine.add_gm("out", DType::F32, rows * cols);
    int sel = machine.add_gm("sel", DType::F32, 64);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(0.5f, 2.0f);
    auto *xv = static_cast<float *>(machine.data(x));
    for (int i = 0; i < rows * cols; i++)
        xv[i] = dist(rng) * (i % 3 ? 1.0f : -1.0f);
    tandem_ascend::run(machine, rows_kernel, {x, out, sel}, AscendC::KernelMode::AIV_MODE);
    tandem::sim::Report r = machine.finish();
    EXPECT_FALSE(r.deadlock) << r.deadlock_message;
    EXPECT_EQ(r.race_count, 0);
    const auto *ov = static_cast<const float *>(machine.data(out)),
               *sv = static_cast<const float *>(machine.data(sel));
    for (int row = 0; row < rows; row++) {
        // ReduceSum's order: a binary tree within each 64-element repeat, the repeats in order.
        auto tree = [&](int from, int n) {
            std::vector<float> v(xv + row * cols + from, xv + row * cols + from + n);
            while (v.size() > 1) {
                const size_t half = (v.size() + 1) / 2;
                for (size_t i = 0; i + half < v.size(); i++)
                    v[i] = v[i] + v[i + half];
                v.resize(half);
            }
            return v[0];
        };
        const float sum = tree(0, 64) + tree(64, cols - 64);
        for (int c = 0; c < cols; c++)
            ASSERT_EQ(ov[row * cols + c], xv[row * cols + c] / sum) << row << "," << c;
    }
    for (int i = 0; i < 64; i++)
        ASSERT_EQ(sv[i], xv[i] < xv[64 + i] ? xv[i] : xv[64 + i]) << i;
}

TEST(AscendRuntime, VectorOperandsStartOn32ByteBoundaries) {
    AscendParams p;
    p.vector_cores = 1;
    Machine machine(p, true);
    const int a = machine.add_local(machine.core_of(tandem::sim::ascend::CoreKind::AIV, 0), "a",
                                    tandem::sim::ascend::Mem::UB, DType::F32, 256);
    tandem::sim::ascend::VectorCall v;
    v.op = "Adds";
    v.dst = {a, 3};
    v.srcs = {{a, 64}};
    v.count = 16;
    EXPECT_NE(error_of([&] {
                  machine.core(machine.core_of(tandem::sim::ascend::CoreKind::AIV, 0))
                      .vector_instruction(v);
              }).find("starts at byte 12: AscendC's vector operands start on 32-byte boundaries"),
              std::string::npos);
    v.dst = {a, 0};
    v.op = "Compare";
    EXPECT_NE(error_of([&] {
                  machine.core(machine.core_of(tandem::sim::ascend::CoreKind::AIV, 0))
                      .vector_instruction(v);
              }).find("takes 2 source tensors"),
              std::string::npos);
}

} // namespace
