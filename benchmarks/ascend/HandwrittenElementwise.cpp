// The anchor for vector kernels: the elementwise app's out = a * b + max(c, 0) * 0.5 written by
// hand in AscendC with the real vector instructions (Mul, Maxs, Muls, Add, PipeBarrier<PIPE_V>
// between dependent ones), double-buffered the way AscendC programmers do it: two UB slots per
// tensor, MTE2 loads tile i + 1 while V computes tile i and MTE3 stores tile i - 1, joined by
// flags. AIV-only: the tiles spread over the vector cores.
#include "Handwritten.h"

extern "C" __global__ __aicore__ void handwritten_elementwise(GM_ADDR a, GM_ADDR b, GM_ADDR c,
                                                              GM_ADDR out, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    AscendC::GlobalTensor<int32_t> shape;
    shape.SetGlobalBuffer((__gm__ int32_t *)tiling, 2);
    const int32_t n = shape.GetValue(0), tile = shape.GetValue(1);
    AscendC::GlobalTensor<float> a_gm, b_gm, c_gm, out_gm;
    a_gm.SetGlobalBuffer((__gm__ float *)a, n);
    b_gm.SetGlobalBuffer((__gm__ float *)b, n);
    c_gm.SetGlobalBuffer((__gm__ float *)c, n);
    out_gm.SetGlobalBuffer((__gm__ float *)out, n);

    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::VECCALC> a_buf, b_buf, c_buf, out_buf, tmp_buf;
    const uint32_t slots = 2 * tile * sizeof(float);
    pipe.InitBuffer(a_buf, slots);
    pipe.InitBuffer(b_buf, slots);
    pipe.InitBuffer(c_buf, slots);
    pipe.InitBuffer(out_buf, slots);
    pipe.InitBuffer(tmp_buf, tile * sizeof(float));
    AscendC::LocalTensor<float> a_ub = a_buf.Get<float>(), b_ub = b_buf.Get<float>(),
                                c_ub = c_buf.Get<float>();
    AscendC::LocalTensor<float> out_ub = out_buf.Get<float>(), tmp = tmp_buf.Get<float>();
    pipe.Destroy();

    for (int32_t side = 0; side < 2; side++) {
        AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(side); // the input slot is free
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(side); // the output slot is stored
    }
    const int32_t tiles = n / tile;
    int32_t i = 0;
    for (int32_t t = AscendC::GetBlockIdx(); t < tiles; t += AscendC::GetBlockNum(), i++) {
        const int32_t side = i % 2, at = side * tile;
        const int64_t from = int64_t(t) * tile;
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(side);
        AscendC::DataCopy(a_ub[at], a_gm[from], tile);
        AscendC::DataCopy(b_ub[at], b_gm[from], tile);
        AscendC::DataCopy(c_ub[at], c_gm[from], tile);
        AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(side);
        AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(side);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(side);
        AscendC::PipeBarrier<PIPE_V>(); // the last tile's Add has read tmp
        AscendC::Mul(out_ub[at], a_ub[at], b_ub[at], tile);
        AscendC::Maxs(tmp, c_ub[at], 0.0f, tile);
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Muls(tmp, tmp, 0.5f, tile);
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Add(out_ub[at], out_ub[at], tmp, tile);
        AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(side);
        AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(side);
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(side);
        AscendC::DataCopy(out_gm[from], out_ub[at], tile);
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(side);
    }
    for (int32_t side = 0; side < 2; side++) {
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(side);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(side);
    }
}
