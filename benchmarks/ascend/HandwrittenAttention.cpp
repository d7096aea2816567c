// The anchor for fused attention on Ascend (issue 34): FlashAttention's forward pass written by
// hand as an AscendC mix kernel (KERNEL_TYPE_MIX_AIC_1_2), the way hand-written NPU attention
// is structured, compiled against Tandem's CPU runtime and run on the same Ascend model as
// Tandem's generated attention (benchmarks/ascend_anchor.sh).
//
// out (S x D, f32) = softmax(Q K^T / sqrt(D)) V, Q (S x D), K and V (L x D) row-major bf16, one
// head, non-causal; query tiles of TM rows, key blocks of TJ; S a multiple of TM, L of TJ, D 64
// or 128 (a hand-written kernel's usual contract). Tiling: int32 {S, L, D, TM, TJ} in GM.
//
// Cube (AIC), per query tile: Q into L1 and L0A once; per key block j, S_j = Q K_j^T into L0C
// and by Fixpipe to the S workspace (two slots per AIC); then block j - 1's P (made by the vector
// cores, from the P workspace) and V into L0A / L0B and O_j-1 = P V to the O workspace. Block
// j's scores are computed while the vector cores make block j - 1's P. K, V, P and the
// accumulators ping-pong where L0 has room for two (side = block % 2).
// Vector (AIV 2i + sub): rows [sub * TM / 2, (sub + 1) * TM / 2) of AIC i's tile, the online
// softmax: per block the row max, m_new = max(m, scale * max), the factor exp(m - m_new), P =
// exp(scale * S - m_new) (its bf16 copy to the P workspace), l = l * factor + rowsum(P); when
// O_j arrives acc = acc * factor_j + O_j; at the tile's end out = acc / l. S loads ping-pong.
// Cross-core flags (mode 2), each + the slot: S stored 0 / read 2, P made 4 / taken 6, O stored
// 8 / read 10.

#include "Handwritten.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

using AscendC::HardEvent;

constexpr int32_t kFractal = 16;
constexpr int kSStored = 0, kSRead = 2, kPMade = 4, kPTaken = 6, kOStored = 8, kORead = 10;

/** What a row's value does to each element of its row. */
enum class ByRow { Subtract, Multiply, Divide };

/** Two slots where `bytes` of each fit twice in `room`, else one. */
int32_t slots(int64_t bytes, int64_t room) {
    return 2 * bytes <= room ? 2 : 1;
}

} // namespace

extern "C" __global__ __aicore__ void handwritten_attention(GM_ADDR q, GM_ADDR k, GM_ADDR v,
                                                            GM_ADDR out, GM_ADDR tiling,
                                                            GM_ADDR workspace) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    AscendC::GlobalTensor<int32_t> shape;
    shape.SetGlobalBuffer((__gm__ int32_t *)tiling, 5);
    const int32_t S = shape.GetValue(0), L = shape.GetValue(1), D = shape.GetValue(2),
                  TM = shape.GetValue(3), TJ = shape.GetValue(4);
    const int32_t HM = TM / 2; // an AIV's rows
    const int32_t aics = AscendC::GetBlockNum(), tiles = S / TM, blocks = L / TJ;
    const float scale = 1.0f / std::sqrt(float(D));
    AscendC::GlobalTensor<bfloat16_t> q_gm, k_gm, v_gm, p_ws;
    AscendC::GlobalTensor<float> out_gm, s_ws, o_ws;
    q_gm.SetGlobalBuffer((__gm__ bfloat16_t *)q, int64_t(S) * D);
    k_gm.SetGlobalBuffer((__gm__ bfloat16_t *)k, int64_t(L) * D);
    v_gm.SetGlobalBuffer((__gm__ bfloat16_t *)v, int64_t(L) * D);
    out_gm.SetGlobalBuffer((__gm__ float *)out, int64_t(S) * D);
    // Workspaces, two slots per AIC each: S (f32 TM x TJ), O (f32 TM x D), P (bf16 TM x TJ).
    GM_ADDR ws = AscendC::GetUserWorkspace(workspace);
    const int64_t s_slot = int64_t(TM) * TJ, o_slot = int64_t(TM) * D;
    s_ws.SetGlobalBuffer((__gm__ float *)ws, aics * 2 * s_slot);
    o_ws.SetGlobalBuffer((__gm__ float *)(ws + aics * 2 * s_slot * 4), aics * 2 * o_slot);
    p_ws.SetGlobalBuffer((__gm__ bfloat16_t *)(ws + aics * 2 * (s_slot + o_slot) * 4),
                         aics * 2 * s_slot);

    if ASCEND_IS_AIC {
        const int32_t aic = AscendC::GetBlockIdx();
        const int64_t q_tile = int64_t(TM) * D, kv_tile = int64_t(TJ) * D, p_tile = s_slot;
        // L0B holds K^T and V blocks, L0A Q and P, L0C S and O: two slots where both fit.
        const int32_t kv_slots = slots(2 * kv_tile * 2, 65536),
                      p_slots = slots(p_tile * 2, 65536 - q_tile * 2),
                      c_slots = slots((s_slot + o_slot) * 4, 131072);
        AscendC::TPipe pipe;
        AscendC::TBuf<AscendC::TPosition::A1> q_l1_buf, p_l1_buf;
        AscendC::TBuf<AscendC::TPosition::B1> k_l1_buf, v_l1_buf;
        AscendC::TBuf<AscendC::TPosition::A2> q_l0_buf, p_l0_buf;
        AscendC::TBuf<AscendC::TPosition::B2> k_l0_buf, v_l0_buf;
        AscendC::TBuf<AscendC::TPosition::CO1> s_l0_buf, o_l0_buf;
        pipe.InitBuffer(q_l1_buf, q_tile * 2);
        pipe.InitBuffer(p_l1_buf, 2 * p_tile * 2);
        pipe.InitBuffer(k_l1_buf, 2 * kv_tile * 2);
        pipe.InitBuffer(v_l1_buf, 2 * kv_tile * 2);
        pipe.InitBuffer(q_l0_buf, q_tile * 2);
        pipe.InitBuffer(p_l0_buf, p_slots * p_tile * 2);
        pipe.InitBuffer(k_l0_buf, kv_slots * kv_tile * 2);
        pipe.InitBuffer(v_l0_buf, kv_slots * kv_tile * 2);
        pipe.InitBuffer(s_l0_buf, c_slots * s_slot * 4);
        pipe.InitBuffer(o_l0_buf, c_slots * o_slot * 4);
        AscendC::LocalTensor<bfloat16_t> q_l1 = q_l1_buf.Get<bfloat16_t>();
        AscendC::LocalTensor<bfloat16_t> p_l1 = p_l1_buf.Get<bfloat16_t>();
        AscendC::LocalTensor<bfloat16_t> k_l1 = k_l1_buf.Get<bfloat16_t>();
        AscendC::LocalTensor<bfloat16_t> v_l1 = v_l1_buf.Get<bfloat16_t>();
        AscendC::LocalTensor<bfloat16_t> q_l0 = q_l0_buf.Get<bfloat16_t>();
        AscendC::LocalTensor<bfloat16_t> p_l0 = p_l0_buf.Get<bfloat16_t>();
        AscendC::LocalTensor<bfloat16_t> k_l0 = k_l0_buf.Get<bfloat16_t>();
        AscendC::LocalTensor<bfloat16_t> v_l0 = v_l0_buf.Get<bfloat16_t>();
        AscendC::LocalTensor<float> s_l0 = s_l0_buf.Get<float>();
        AscendC::LocalTensor<float> o_l0 = o_l0_buf.Get<float>();
        pipe.Destroy(); // the kernel owns every event id from here

        // Event ids: MTE2 <-> MTE1 per L1 buffer (Q 0, K 1-2, V 3-4, P 5-6); M -> MTE1 per L0
        // buffer (the same ids), MTE1 -> M per MMA (Q 0, S 1-2, P V 3-4); M <-> FIX per L0C
        // buffer (S 0-1, O 2-3). Every slot starts free.
        for (int32_t e = 0; e < 7; e++) {
            AscendC::SetFlag<HardEvent::MTE1_MTE2>(e);
            AscendC::SetFlag<HardEvent::M_MTE1>(e);
        }
        for (int32_t e = 0; e < 4; e++)
            AscendC::SetFlag<HardEvent::FIX_M>(e);
        int64_t n_s = 0, n_p = 0; // blocks whose S (P V) this AIC computed

        // The MMA's TM x `columns` accumulator (L0C event `event`) by Fixpipe into this AIC's
        // slot of `ws` for block `n`, once the vector cores read the slot's block before.
        auto to_workspace = [&](const AscendC::GlobalTensor<float> &ws,
                                const AscendC::LocalTensor<float> &acc, int32_t columns,
                                int32_t event, int64_t n, int stored, int read) {
            const int32_t slot = n % 2;
            AscendC::SetFlag<HardEvent::M_FIX>(event);
            AscendC::WaitFlag<HardEvent::M_FIX>(event);
            if (n >= 2)
                AscendC::CrossCoreWaitFlag(read + slot);
            AscendC::FixpipeParamsV220 store;
            store.nSize = columns;
            store.mSize = TM;
            store.srcStride = TM;
            store.dstStride = columns;
            store.quantPre = AscendC::NoQuant;
            AscendC::Fixpipe<float, float, AscendC::CFG_ROW_MAJOR>(
                ws[(int64_t(aic) * 2 + slot) * TM * columns], acc, store);
            AscendC::SetFlag<HardEvent::FIX_M>(event);
            AscendC::CrossCoreSetFlag<2, PIPE_FIX>(stored + slot);
        };

        // S_j = Q K_j^T to the S workspace.
        auto scores = [&](int32_t j) {
            const int32_t l1 = n_s % 2, kv = n_s % kv_slots, c = n_s % c_slots;
            AscendC::WaitFlag<HardEvent::MTE1_MTE2>(1 + l1);
            AscendC::DataCopy(k_l1[l1 * kv_tile], k_gm[int64_t(j) * kv_tile],
                              AscendC::Nd2NzParams(1, TJ, D, 0, D, TJ, 1, 0));
            AscendC::SetFlag<HardEvent::MTE2_MTE1>(1 + l1);
            AscendC::WaitFlag<HardEvent::MTE2_MTE1>(1 + l1);
            AscendC::WaitFlag<HardEvent::M_MTE1>(1 + kv);
            for (int32_t block = 0; block < D / kFractal; block++)
                AscendC::LoadData(k_l0[kv * kv_tile + block * kFractal * TJ], k_l1[l1 * kv_tile],
                                  AscendC::LoadData2DParams(block * (TJ / kFractal), TJ / kFractal,
                                                            1, 0, 0, false, 0));
            AscendC::SetFlag<HardEvent::MTE1_MTE2>(1 + l1);
            AscendC::SetFlag<HardEvent::MTE1_M>(1 + kv);
            AscendC::WaitFlag<HardEvent::MTE1_M>(1 + kv);
            AscendC::WaitFlag<HardEvent::FIX_M>(c);
            AscendC::MmadParams mmad;
            mmad.m = TM;
            mmad.n = TJ;
            mmad.k = D;
            mmad.cmatrixInitVal = true;
            AscendC::Mmad(s_l0[c * s_slot], q_l0, k_l0[kv * kv_tile], mmad);
            AscendC::SetFlag<HardEvent::M_MTE1>(1 + kv);
            to_workspace(s_ws, s_l0[c * s_slot], TJ, c, n_s, kSStored, kSRead);
            n_s++;
        };
        // O_j = P_j V_j to the O workspace, once the vector cores made P_j.
        auto values = [&](int32_t j) {
            const int32_t l1 = n_p % 2, kv = n_p % kv_slots, pl0 = n_p % p_slots, c = n_p % c_slots,
                          slot = n_p % 2;
            AscendC::WaitFlag<HardEvent::MTE1_MTE2>(3 + l1);
            AscendC::DataCopy(v_l1[l1 * kv_tile], v_gm[int64_t(j) * kv_tile],
                              AscendC::Nd2NzParams(1, TJ, D, 0, D, TJ, 1, 0));
            AscendC::SetFlag<HardEvent::MTE2_MTE1>(3 + l1);
            AscendC::CrossCoreWaitFlag(kPMade + slot);
            AscendC::WaitFlag<HardEvent::MTE1_MTE2>(5 + l1);
            AscendC::DataCopy(p_l1[l1 * p_tile], p_ws[(int64_t(aic) * 2 + slot) * s_slot],
                              AscendC::Nd2NzParams(1, TM, TJ, 0, TJ, TM, 1, 0));
            AscendC::SetFlag<HardEvent::MTE2_MTE1>(5 + l1);
            AscendC::CrossCoreSetFlag<2, PIPE_MTE2>(kPTaken + slot);
            AscendC::WaitFlag<HardEvent::MTE2_MTE1>(3 + l1);
            AscendC::WaitFlag<HardEvent::MTE2_MTE1>(5 + l1);
            AscendC::WaitFlag<HardEvent::M_MTE1>(5 + pl0);
            for (int32_t strip = 0; strip < TM / kFractal; strip++)
                AscendC::LoadData(
                    p_l0[pl0 * p_tile + strip * kFractal * TJ], p_l1[l1 * p_tile],
                    AscendC::LoadData2DParams(strip, TJ / kFractal, TM / kFractal, 0, 0, false, 0));
            AscendC::WaitFlag<HardEvent::M_MTE1>(3 + kv);
            for (int32_t block = 0; block < TJ / kFractal; block++)
                AscendC::LoadData(
                    v_l0[kv * kv_tile + block * kFractal * D], v_l1[l1 * kv_tile],
                    AscendC::LoadData2DParams(block, D / kFractal, TJ / kFractal, 0, 0, true, 0));
            AscendC::SetFlag<HardEvent::MTE1_MTE2>(3 + l1);
            AscendC::SetFlag<HardEvent::MTE1_MTE2>(5 + l1);
            AscendC::SetFlag<HardEvent::MTE1_M>(3 + pl0);
            AscendC::WaitFlag<HardEvent::MTE1_M>(3 + pl0);
            AscendC::WaitFlag<HardEvent::FIX_M>(2 + c);
            AscendC::MmadParams mmad;
            mmad.m = TM;
            mmad.n = D;
            mmad.k = TJ;
            mmad.cmatrixInitVal = true;
            AscendC::Mmad(o_l0[c * o_slot], p_l0[pl0 * p_tile], v_l0[kv * kv_tile], mmad);
            AscendC::SetFlag<HardEvent::M_MTE1>(5 + pl0);
            AscendC::SetFlag<HardEvent::M_MTE1>(3 + kv);
            to_workspace(o_ws, o_l0[c * o_slot], D, 2 + c, n_p, kOStored, kORead);
            n_p++;
        };

        for (int32_t t = aic; t < tiles; t += aics) {
            // Q into L1, then L0A (a strip of 16 rows per call), once per tile.
            AscendC::WaitFlag<HardEvent::MTE1_MTE2>(0);
            AscendC::DataCopy(q_l1, q_gm[int64_t(t) * q_tile],
                              AscendC::Nd2NzParams(1, TM, D, 0, D, TM, 1, 0));
            AscendC::SetFlag<HardEvent::MTE2_MTE1>(0);
            AscendC::WaitFlag<HardEvent::MTE2_MTE1>(0);
            AscendC::WaitFlag<HardEvent::M_MTE1>(0);
            for (int32_t strip = 0; strip < TM / kFractal; strip++)
                AscendC::LoadData(
                    q_l0[strip * kFractal * D], q_l1,
                    AscendC::LoadData2DParams(strip, D / kFractal, TM / kFractal, 0, 0, false, 0));
            AscendC::SetFlag<HardEvent::MTE1_MTE2>(0);
            AscendC::SetFlag<HardEvent::MTE1_M>(0);
            AscendC::WaitFlag<HardEvent::MTE1_M>(0);
            for (int32_t j = 0; j < blocks; j++) {
                scores(j);
                if (j > 0)
                    values(j - 1);
            }
            values(blocks - 1);
            AscendC::SetFlag<HardEvent::M_MTE1>(0); // Q's L0A is free
        }
        for (int32_t e = 0; e < 7; e++) {
            AscendC::WaitFlag<HardEvent::MTE1_MTE2>(e);
            AscendC::WaitFlag<HardEvent::M_MTE1>(e);
        }
        for (int32_t e = 0; e < 4; e++)
            AscendC::WaitFlag<HardEvent::FIX_M>(e);
        // The vector cores' last two reads of each workspace.
        for (int64_t n = std::max<int64_t>(n_s - 2, 0); n < n_s; n++) {
            AscendC::CrossCoreWaitFlag(kSRead + n % 2);
            AscendC::CrossCoreWaitFlag(kORead + n % 2);
        }
    }

    if ASCEND_IS_AIV {
        const int32_t aic = AscendC::GetBlockIdx() / 2, sub = AscendC::GetSubBlockIdx();
        const int32_t s_half = HM * TJ, o_half = HM * D;
        AscendC::TPipe pipe;
        AscendC::TBuf<AscendC::TPosition::VECCALC> s_buf, o_buf, acc_buf, fold_buf, row_buf;
        AscendC::TBuf<AscendC::TPosition::VECCALC> p_buf;
        pipe.InitBuffer(s_buf, 2 * s_half * 4); // S (then P in f32), two slots
        pipe.InitBuffer(o_buf, o_half * 4);     // O_j
        pipe.InitBuffer(acc_buf, o_half * 4);   // the running output
        pipe.InitBuffer(fold_buf, HM * 72 * 4); // row reductions: 64 lanes per row, then 8
        pipe.InitBuffer(row_buf, 16 * HM * 4);  // per-row values and their broadcasts
        pipe.InitBuffer(p_buf, 2 * s_half * 2); // P in bf16, two slots
        AscendC::LocalTensor<float> s_ub = s_buf.Get<float>(), o_ub = o_buf.Get<float>(),
                                    acc = acc_buf.Get<float>(), fold = fold_buf.Get<float>(),
                                    rows = row_buf.Get<float>();
        AscendC::LocalTensor<bfloat16_t> p_ub = p_buf.Get<bfloat16_t>();
        pipe.Destroy();
        // Per-row values, HM each: the running max and sum, the block's max, its sum, the factors
        // of two blocks; then broadcasts, a 32-byte block per row (HM * 8).
        AscendC::LocalTensor<float> m = rows, l = rows[HM], block_max = rows[2 * HM],
                                    block_sum = rows[3 * HM], factor = rows[4 * HM],
                                    wide = rows[8 * HM];

        // Event ids: MTE2 -> V per S slot (0-1) and O (2); V -> MTE2 back; V -> MTE3 and MTE3 ->
        // V per P slot (0-1) and the output (2).
        for (int32_t e = 0; e < 3; e++) {
            AscendC::SetFlag<HardEvent::V_MTE2>(e);
            AscendC::SetFlag<HardEvent::MTE3_V>(e);
        }
        int64_t n_s = 0, n_o = 0;
        const AscendC::BinaryRepeatParams fold_halves(1, 1, 1, 8, TJ / 8, TJ / 8);

        // The row reduction of `src` (HM rows of TJ, TJ = 64 or 128) into dst (HM values).
        auto reduce_rows = [&](const AscendC::LocalTensor<float> &dst,
                               const AscendC::LocalTensor<float> &src, bool max) {
            AscendC::LocalTensor<float> lanes = src;
            if (TJ == 128) { // the two halves of each row into 64 lanes
                if (max)
                    AscendC::Max(fold, src, src[64], 64, HM, fold_halves);
                else
                    AscendC::Add(fold, src, src[64], 64, HM, fold_halves);
                AscendC::PipeBarrier<PIPE_V>();
                lanes = fold;
            }
            const int32_t stride = TJ == 128 ? 8 : TJ / 8;
            if (max) {
                AscendC::BlockReduceMax(fold[HM * 64], lanes, HM, 64, 1, 1, stride);
                AscendC::PipeBarrier<PIPE_V>();
                AscendC::BlockReduceMax(dst, fold[HM * 64], HM / 8, 64, 1, 1, 8);
            } else {
                AscendC::BlockReduceSum(fold[HM * 64], lanes, HM, 64, 1, 1, stride);
                AscendC::PipeBarrier<PIPE_V>();
                AscendC::BlockReduceSum(dst, fold[HM * 64], HM / 8, 64, 1, 1, 8);
            }
            AscendC::PipeBarrier<PIPE_V>();
        };
        // Each row of `x` (HM rows of `width`) op= its row's value in `per_row`.
        auto by_rows = [&](const AscendC::LocalTensor<float> &x,
                           const AscendC::LocalTensor<float> &per_row, int32_t width, ByRow op) {
            AscendC::Brcb(wide, per_row, HM / 8, AscendC::BrcbRepeatParams(1, 8));
            AscendC::PipeBarrier<PIPE_V>();
            const AscendC::BinaryRepeatParams p(1, 1, 0, width / 8, width / 8, 1);
            for (int32_t c = 0; c < width; c += 64) {
                if (op == ByRow::Subtract)
                    AscendC::Sub(x[c], x[c], wide, 64, HM, p);
                else if (op == ByRow::Multiply)
                    AscendC::Mul(x[c], x[c], wide, 64, HM, p);
                else
                    AscendC::Div(x[c], x[c], wide, 64, HM, p);
            }
            AscendC::PipeBarrier<PIPE_V>();
        };

        // Block n_s's P from its S: the online softmax's statistics, then P to the cube.
        auto softmax = [&]() {
            const int32_t slot = n_s % 2, f = n_s % 2;
            AscendC::LocalTensor<float> s = s_ub[slot * s_half];
            AscendC::CrossCoreWaitFlag(kSStored + slot);
            AscendC::WaitFlag<HardEvent::V_MTE2>(slot);
            AscendC::DataCopy(s, s_ws[(int64_t(aic) * 2 + slot) * s_slot + sub * s_half], s_half);
            AscendC::SetFlag<HardEvent::MTE2_V>(slot);
            AscendC::CrossCoreSetFlag<2, PIPE_MTE2>(kSRead + slot);
            AscendC::WaitFlag<HardEvent::MTE2_V>(slot);
            reduce_rows(block_max, s, true);
            // m_new = max(m, scale * max); factor = exp(m - m_new); P = exp((S - m_new / scale)
            // * scale).
            AscendC::Muls(block_max, block_max, scale, HM);
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Max(block_max, block_max, m, HM);
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Sub(factor[f * HM], m, block_max, HM);
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Exp(factor[f * HM], factor[f * HM], HM);
            AscendC::Muls(m, block_max, 1.0f / scale, HM);
            AscendC::PipeBarrier<PIPE_V>();
            by_rows(s, m, TJ, ByRow::Subtract);
            AscendC::Muls(m, block_max, 1.0f, HM); // the running max: m_new
            AscendC::Muls(s, s, scale, s_half);
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Exp(s, s, s_half);
            AscendC::PipeBarrier<PIPE_V>();
            // P in bf16 to the cube, once its slot was taken.
            AscendC::WaitFlag<HardEvent::MTE3_V>(slot);
            AscendC::Cast(p_ub[slot * s_half], s, AscendC::RoundMode::CAST_RINT, s_half);
            AscendC::SetFlag<HardEvent::V_MTE3>(slot);
            AscendC::WaitFlag<HardEvent::V_MTE3>(slot);
            if (n_s >= 2)
                AscendC::CrossCoreWaitFlag(kPTaken + slot);
            AscendC::DataCopy(p_ws[(int64_t(aic) * 2 + slot) * s_slot + sub * s_half],
                              p_ub[slot * s_half],
                              AscendC::DataCopyParams(1, uint16_t(s_half * 2 / 32), 0, 0));
            AscendC::SetFlag<HardEvent::MTE3_V>(slot);
            AscendC::CrossCoreSetFlag<2, PIPE_MTE3>(kPMade + slot);
            // l = l * factor + rowsum(P).
            reduce_rows(block_sum, s, false);
            AscendC::SetFlag<HardEvent::V_MTE2>(slot);
            AscendC::Mul(l, l, factor[f * HM], HM);
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Add(l, l, block_sum, HM);
            AscendC::PipeBarrier<PIPE_V>();
            n_s++;
        };
        // Block n_o's P V: acc = acc * factor + O.
        auto rescale = [&]() {
            const int32_t slot = n_o % 2, f = n_o % 2;
            AscendC::CrossCoreWaitFlag(kOStored + slot);
            AscendC::WaitFlag<HardEvent::V_MTE2>(2);
            AscendC::DataCopy(o_ub, o_ws[(int64_t(aic) * 2 + slot) * o_slot + sub * o_half],
                              o_half);
            AscendC::SetFlag<HardEvent::MTE2_V>(2);
            AscendC::CrossCoreSetFlag<2, PIPE_MTE2>(kORead + slot);
            by_rows(acc, factor[f * HM], D, ByRow::Multiply);
            AscendC::WaitFlag<HardEvent::MTE2_V>(2);
            AscendC::Add(acc, acc, o_ub, o_half);
            AscendC::SetFlag<HardEvent::V_MTE2>(2);
            AscendC::PipeBarrier<PIPE_V>();
            n_o++;
        };

        for (int32_t t = aic; t < tiles; t += aics) {
            AscendC::WaitFlag<HardEvent::MTE3_V>(2); // the last tile's output is stored
            AscendC::Duplicate(acc, 0.0f, o_half);
            AscendC::Duplicate(m, -__builtin_inff(), HM);
            AscendC::Duplicate(l, 0.0f, HM);
            AscendC::PipeBarrier<PIPE_V>();
            for (int32_t j = 0; j < blocks; j++) {
                softmax();
                if (j > 0)
                    rescale();
            }
            rescale();
            by_rows(acc, l, D, ByRow::Divide);
            AscendC::SetFlag<HardEvent::V_MTE3>(2);
            AscendC::WaitFlag<HardEvent::V_MTE3>(2);
            AscendC::DataCopy(out_gm[(int64_t(t) * TM + sub * HM) * D], acc,
                              AscendC::DataCopyParams(1, uint16_t(o_half * 4 / 32), 0, 0));
            AscendC::SetFlag<HardEvent::MTE3_V>(2);
        }
        for (int32_t e = 0; e < 3; e++) {
            AscendC::WaitFlag<HardEvent::V_MTE2>(e);
            AscendC::WaitFlag<HardEvent::MTE3_V>(e);
        }
        // The cube's last two takes of P.
        for (int64_t n = std::max<int64_t>(n_s - 2, 0); n < n_s; n++)
            AscendC::CrossCoreWaitFlag(kPTaken + n % 2);
    }
}

tandem::sim::Report run_handwritten_attention(tandem::sim::ascend::Machine &machine,
                                              const std::array<int, 4> &buffers,
                                              const std::array<int32_t, 5> &shape) {
    using tandem::sim::DType;
    const int tiling = machine.add_gm("tiling", DType::I32, 5);
    std::memcpy(machine.data(tiling), shape.data(), sizeof(int32_t) * 5);
    const int64_t aics = machine.params().cube_cores, s_slot = int64_t(shape[3]) * shape[4],
                  o_slot = int64_t(shape[3]) * shape[2];
    std::vector<tandem_ascend::GmArgument> args;
    for (int b : buffers)
        args.push_back({{b, 0}});
    args.push_back({{tiling, 0}});
    args.emplace_back();
    args.back().push_back({machine.add_gm("s.workspace", DType::F32, aics * 2 * s_slot), 0});
    args.back().push_back(
        {machine.add_gm("o.workspace", DType::F32, aics * 2 * o_slot), aics * 2 * s_slot * 4});
    args.back().push_back({machine.add_gm("p.workspace", DType::BF16, aics * 2 * s_slot),
                           aics * 2 * (s_slot + o_slot) * 4});
    tandem_ascend::run_parts(machine, handwritten_attention, args, AscendC::KernelMode::MIX_MODE);
    return machine.finish();
}

double handwritten_attention_error(tandem::sim::ascend::Machine &machine,
                                   const std::array<int, 4> &buffers,
                                   const std::array<int32_t, 5> &shape, int32_t every) {
    const auto [q, k, v, out] = buffers;
    const int32_t S = shape[0], L = shape[1], D = shape[2];
    auto at = [&](int buffer, int64_t i) {
        return double(
            tandem::sim::bf16_to_float(static_cast<const uint16_t *>(machine.data(buffer))[i]));
    };
    const auto *got = static_cast<const float *>(machine.data(out));
    double worst = 0, largest = 0;
    std::vector<double> p(L), o(D);
    for (int32_t i = 0; i < S; i += every) {
        double top = -1e300, sum = 0;
        for (int32_t j = 0; j < L; j++) {
            double dot = 0;
            for (int32_t d = 0; d < D; d++)
                dot += at(q, int64_t(i) * D + d) * at(k, int64_t(j) * D + d);
            p[j] = dot / std::sqrt(double(D));
            top = std::max(top, p[j]);
        }
        for (double &x : p)
            sum += x = std::exp(x - top);
        std::fill(o.begin(), o.end(), 0.0);
        for (int32_t j = 0; j < L; j++)
            for (int32_t d = 0; d < D; d++)
                o[d] += p[j] / sum * at(v, int64_t(j) * D + d);
        for (int32_t d = 0; d < D; d++) {
            worst = std::max(worst, std::abs(got[int64_t(i) * D + d] - o[d]));
            largest = std::max(largest, std::abs(o[d]));
        }
    }
    return worst / largest;
}
