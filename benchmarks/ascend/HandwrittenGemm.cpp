// The anchor: a bf16 GEMM written by hand in AscendC, in the style of the founding request
// (../shared/seeds/004: MTE2 -> MTE1 -> M -> FIX joined by flags, L1/L0 slots chosen by
// side = i % 2, L0C ping-pong by tile), with the real cube instructions on fractal data: Nd2Nz
// GM -> L1, LoadData2D L1 -> L0A (one call per 16-row strip) and L0B (one per 16-row K block,
// each fractal transposed), Mmad, Fixpipe Nz -> ND with F322BF16. It compiles against Tandem's
// CPU runtime (backends/ascend/runtime/kernel_operator.h) and runs on the same Ascend model as
// Tandem's generated gemm, so the two are compared cycle for cycle (benchmarks/ascend_anchor.sh).
//
// C (M x N) = A (M x K) * B (K x N), row-major bf16, f32 accumulation; 128 x 128 output tiles,
// K in steps of 128; M, N and K multiples of 128 (a hand-written kernel's usual contract). The
// shape comes in a tiling struct in GM, as AscendC kernels take it.

#include "Handwritten.h"

namespace {

constexpr int32_t kTile = 128;   // TM = TN = TK
constexpr int32_t kFractal = 16; // rows of a fractal; C0 = 16 bf16

} // namespace

extern "C" __global__ __aicore__ void handwritten_gemm(GM_ADDR a, GM_ADDR b, GM_ADDR c,
                                                       GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);
    AscendC::GlobalTensor<int32_t> shape;
    shape.SetGlobalBuffer((__gm__ int32_t *)tiling, 3);
    const int32_t M = shape.GetValue(0), N = shape.GetValue(1), K = shape.GetValue(2);
    AscendC::GlobalTensor<bfloat16_t> a_gm, b_gm, c_gm;
    a_gm.SetGlobalBuffer((__gm__ bfloat16_t *)a, int64_t(M) * K);
    b_gm.SetGlobalBuffer((__gm__ bfloat16_t *)b, int64_t(K) * N);
    c_gm.SetGlobalBuffer((__gm__ bfloat16_t *)c, int64_t(M) * N);

    constexpr int32_t slot = kTile * kTile; // elements of one operand tile
    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::A1> a_l1_buf;
    AscendC::TBuf<AscendC::TPosition::B1> b_l1_buf;
    AscendC::TBuf<AscendC::TPosition::A2> a_l0_buf;
    AscendC::TBuf<AscendC::TPosition::B2> b_l0_buf;
    AscendC::TBuf<AscendC::TPosition::CO1> c_l0_buf;
    pipe.InitBuffer(a_l1_buf, 2 * slot * sizeof(bfloat16_t));
    pipe.InitBuffer(b_l1_buf, 2 * slot * sizeof(bfloat16_t));
    pipe.InitBuffer(a_l0_buf, 2 * slot * sizeof(bfloat16_t));
    pipe.InitBuffer(b_l0_buf, 2 * slot * sizeof(bfloat16_t));
    pipe.InitBuffer(c_l0_buf, 2 * slot * sizeof(float));
    AscendC::LocalTensor<bfloat16_t> a_l1 = a_l1_buf.Get<bfloat16_t>();
    AscendC::LocalTensor<bfloat16_t> b_l1 = b_l1_buf.Get<bfloat16_t>();
    AscendC::LocalTensor<bfloat16_t> a_l0 = a_l0_buf.Get<bfloat16_t>();
    AscendC::LocalTensor<bfloat16_t> b_l0 = b_l0_buf.Get<bfloat16_t>();
    AscendC::LocalTensor<float> c_l0 = c_l0_buf.Get<float>();
    pipe.Destroy(); // the kernel owns every event id from here

    // Every slot starts free.
    for (int32_t side = 0; side < 2; side++) {
        AscendC::SetFlag<AscendC::HardEvent::MTE1_MTE2>(side);
        AscendC::SetFlag<AscendC::HardEvent::M_MTE1>(side);
        AscendC::SetFlag<AscendC::HardEvent::FIX_M>(side);
    }
    const int32_t tiles_n = N / kTile, tiles = (M / kTile) * tiles_n, steps = K / kTile;
    int32_t i = 0; // operand slot counter: side = i % 2
    int32_t local = 0;
    for (int32_t t = AscendC::GetBlockIdx(); t < tiles; t += AscendC::GetBlockNum(), local++) {
        const int32_t row = t / tiles_n * kTile, col = t % tiles_n * kTile, out = local % 2;
        AscendC::WaitFlag<AscendC::HardEvent::FIX_M>(out); // the accumulator slot is stored
        for (int32_t k = 0; k < steps; k++, i++) {
            const int32_t side = i % 2;
            // MTE2: A and B tiles into L1, row-major to Nz.
            AscendC::WaitFlag<AscendC::HardEvent::MTE1_MTE2>(side);
            AscendC::DataCopy(a_l1[side * slot], a_gm[int64_t(row) * K + k * kTile],
                              AscendC::Nd2NzParams(1, kTile, kTile, 0, K, kTile, 1, 0));
            AscendC::DataCopy(b_l1[side * slot], b_gm[int64_t(k) * kTile * N + col],
                              AscendC::Nd2NzParams(1, kTile, kTile, 0, N, kTile, 1, 0));
            AscendC::SetFlag<AscendC::HardEvent::MTE2_MTE1>(side);
            // MTE1: L1 -> L0A (Zz, a strip of 16 rows per call), L0B (Zn, a K block per call).
            AscendC::WaitFlag<AscendC::HardEvent::MTE2_MTE1>(side);
            AscendC::WaitFlag<AscendC::HardEvent::M_MTE1>(side);
            for (int32_t strip = 0; strip < kTile / kFractal; strip++)
                AscendC::LoadData(a_l0[side * slot + strip * kTile * kFractal], a_l1[side * slot],
                                  AscendC::LoadData2DParams(strip, kTile / kFractal,
                                                            kTile / kFractal, 0, 0, false, 0));
            for (int32_t block = 0; block < kTile / kFractal; block++)
                AscendC::LoadData(b_l0[side * slot + block * kTile * kFractal], b_l1[side * slot],
                                  AscendC::LoadData2DParams(block, kTile / kFractal,
                                                            kTile / kFractal, 0, 0, true, 0));
            AscendC::SetFlag<AscendC::HardEvent::MTE1_MTE2>(side);
            AscendC::SetFlag<AscendC::HardEvent::MTE1_M>(side);
            // M: the first step of a tile overwrites the accumulator.
            AscendC::WaitFlag<AscendC::HardEvent::MTE1_M>(side);
            AscendC::MmadParams mmad;
            mmad.m = kTile;
            mmad.n = kTile;
            mmad.k = kTile;
            mmad.cmatrixInitVal = k == 0;
            AscendC::Mmad(c_l0[out * slot], a_l0[side * slot], b_l0[side * slot], mmad);
            AscendC::SetFlag<AscendC::HardEvent::M_MTE1>(side);
        }
        AscendC::SetFlag<AscendC::HardEvent::M_FIX>(out);
        // FIX: the tile to GM, Nz -> row-major, f32 -> bf16.
        AscendC::WaitFlag<AscendC::HardEvent::M_FIX>(out);
        AscendC::FixpipeParamsV220 store;
        store.nSize = kTile;
        store.mSize = kTile;
        store.srcStride = kTile;
        store.dstStride = N;
        store.quantPre = AscendC::F322BF16;
        AscendC::Fixpipe<bfloat16_t, float, AscendC::CFG_ROW_MAJOR>(c_gm[int64_t(row) * N + col],
                                                                    c_l0[out * slot], store);
        AscendC::SetFlag<AscendC::HardEvent::FIX_M>(out);
    }
    for (int32_t side = 0; side < 2; side++) {
        AscendC::WaitFlag<AscendC::HardEvent::MTE1_MTE2>(side);
        AscendC::WaitFlag<AscendC::HardEvent::M_MTE1>(side);
        AscendC::WaitFlag<AscendC::HardEvent::FIX_M>(side);
    }
}
