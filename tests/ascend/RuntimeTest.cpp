// The AscendC CPU runtime (backends/ascend/runtime/kernel_operator.h) on hand-written kernels:
// TPipe's reserved events, the kernel type against the cores it runs on, block indices per kind.

#include "kernel_operator.h"

#include <gtest/gtest.h>

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
    std::string e = error_of([&] {
        tandem_ascend::run(wrong, vector_blocks, {y}, AscendC::KernelMode::AIC_MODE);
    });
    EXPECT_NE(e.find("KERNEL_TYPE_AIV_ONLY"), std::string::npos) << e;
    EXPECT_NE(e.find("AIV_MODE"), std::string::npos) << e;
}

} // namespace
