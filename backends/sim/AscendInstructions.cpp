// The Ascend model's instructions as a core records them: each call checks its arguments (SimError
// naming the op, pipe and core), the core's kind, pipes and memories, and appends one op with its
// pipe, cost and numerics (DataCopy, the cube's fractal instructions, AscendC's vector
// instructions, flags, barriers, cross-core flags). The state: AscendRun.h; how the ops run:
// AscendScheduler.cpp.

#include "sim/AscendRun.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

namespace tandem::sim::ascend {

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

const char *core_kind_name(CoreKind k) {
    return k == CoreKind::AIC ? "AIC" : "AIV";
}

bool has_pipe(CoreKind k, Pipe p) {
    switch (p) {
    case Pipe::S:
    case Pipe::MTE2:
    case Pipe::ALL:
        return true;
    case Pipe::MTE1:
    case Pipe::M:
    case Pipe::FIX:
        return k == CoreKind::AIC;
    case Pipe::V:
    case Pipe::MTE3:
        return k == CoreKind::AIV;
    }
    return false;
}

bool has_memory(CoreKind k, Mem m) {
    switch (m) {
    case Mem::GM:
        return true;
    case Mem::L1:
    case Mem::L0A:
    case Mem::L0B:
    case Mem::L0C:
        return k == CoreKind::AIC;
    case Mem::UB:
        return k == CoreKind::AIV;
    }
    return false;
}

// --- recording ----------------------------------------------------------------------------------

void Machine::Impl::fail(const std::string &what, int core, const std::string &message) const {
    throw SimError(what + " on " + core_text(core) + ": " + message);
}

void Machine::Impl::check_pipe(const std::string &what, int core, Pipe p) const {
    if (!has_pipe(kind(core), p)) {
        fail(
            what, core,
            std::string("pipe ") + pipe_name(p) + " is on the " +
                (kind(core) == CoreKind::AIC ? "vector cores (AIV)" : "cube cores (AIC)") +
                "; an " + core_kind_name(kind(core)) + " has " +
                (kind(core) == CoreKind::AIC ? "S, MTE2, MTE1, M and FIX" : "S, MTE2, V and MTE3"));
    }
}

Core::State &Machine::Impl::recording(const std::string &what, int core) {
    Core::State &state = *cores[size_t(core)]->state_;
    if (state.ran) {
        fail(what, core,
             "the core already ran; record its whole program before run_core(" +
                 std::to_string(core) + ")");
    }
    return state;
}

const Machine::Impl::Buffer &Machine::Impl::checked_buffer(const std::string &what, int core,
                                                           const char *role, int buffer,
                                                           const Box &box) const {
    if (buffer < 0 || size_t(buffer) >= buffers.size()) {
        fail(what, core,
             std::string(role) + " buffer id " + std::to_string(buffer) +
                 " does not exist (the machine has " + std::to_string(buffers.size()) +
                 " buffers)");
    }
    const Buffer &b = buffers[size_t(buffer)];
    if (b.core >= 0 && b.core != core) {
        fail(what, core,
             std::string(role) + " buffer '" + b.name + "' is " + mem_name(b.mem) + " of " +
                 core_text(b.core) + "; a core can only touch its own local memories and GM");
    }
    std::string outside = detail::box_outside_error(role, box, b.name, b.elements);
    if (!outside.empty()) {
        fail(what, core, outside);
    }
    return b;
}

void Machine::Impl::check_aligned(const std::string &what, int core, const char *role,
                                  const Buffer &b, const Box &box) const {
    if (b.mem != Mem::L0A && b.mem != Mem::L0B) {
        return;
    }
    int64_t byte = box.offset * bytes_of(b.type);
    if (byte % params.l0ab_align != 0) {
        fail(what, core,
             std::string(role) + " box on buffer '" + b.name + "' (" + mem_name(b.mem) +
                 ") starts at byte " + std::to_string(byte) + " (element offset " +
                 std::to_string(box.offset) + "), which is not a multiple of " +
                 std::to_string(params.l0ab_align) + "; " + mem_name(b.mem) +
                 " operands start at " + std::to_string(params.l0ab_align) +
                 "-byte boundaries: pad the tile or move its offset");
    }
}

void Machine::Impl::data_copy(int core, int dst, const Box &dst_box, int src, const Box &src_box,
                              const std::string &label) {
    std::string what = "DataCopy '" + label + "'";
    Core::State &state = recording(what, core);
    const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
    const Buffer &from = checked_buffer(what, core, "source", src, src_box);
    const Path *path = find_path(from.mem, to.mem);
    if (!path) {
        fail(what, core,
             std::string("no pipe copies ") + mem_name(from.mem) + " -> " + mem_name(to.mem) +
                 " ('" + from.name + "' -> '" + to.name + "'); the data paths are " + paths_text());
    }
    what += std::string(" (") + pipe_name(path->pipe) + ")";
    if (from.mem == Mem::L0C) {
        fail(what, core, "only Fixpipe reads L0C (Nz -> ND, converting); use fixpipe_nz2nd");
    }
    if (to.type != from.type) {
        fail(what, core,
             "destination '" + to.name + "' is " + dtype_name(to.type) + " but source '" +
                 from.name + "' is " + dtype_name(from.type) +
                 "; DataCopy moves elements without conversion (fixpipe converts from L0C)");
    }
    int64_t count = dst_box.elements();
    if (count != src_box.elements()) {
        fail(what, core,
             "destination box " + dst_box.str() + " has " + std::to_string(count) +
                 " elements but source box " + src_box.str() + " has " +
                 std::to_string(src_box.elements()));
    }
    check_aligned(what, core, "destination", to, dst_box);
    check_aligned(what, core, "source", from, src_box);
    Op op;
    op.kind = path->pipe == Pipe::MTE1 && (to.mem == Mem::L0A || to.mem == Mem::L0B)
                  ? OpKind::LoadData
                  : OpKind::DataCopy;
    op.pipe = path->pipe;
    op.label = labels.id(label);
    op.cost = params.copy_cycles(from.mem, to.mem, count * bytes_of(to.type));
    op.dst = dst;
    op.dst_box = dst_box;
    op.src = src;
    op.src_box = src_box;
    state.program.push_back(std::move(op));
}

// --- the real cube instructions on fractal data -------------------------------------------------

void Machine::Impl::nd2nz(int core, int dst, int64_t dst_offset, int src, int64_t src_offset,
                          const Nd2Nz &p, const std::string &label) {
    std::string what = "DataCopy '" + label + "' (Nd2Nz, MTE2)";
    Core::State &state = recording(what, core);
    if (p.n_value < 0 || p.d_value < 0 || p.dst_nz_c0_stride < 0 || p.dst_nz_n_stride < 1) {
        fail(what, core, "nValue, dValue and the strides must not be negative (dstNzNStride >= 1)");
    }
    // Nd2NzParams' fields are 16 bits; nValue at most 16384 (the AscendC docs).
    if (p.n_value > 16384 || p.d_value > 65535 || p.src_d_value > 65535 ||
        p.dst_nz_c0_stride > 65535 || p.dst_nz_n_stride > 65535) {
        fail(what, core,
             "nValue " + std::to_string(p.n_value) + ", dValue " + std::to_string(p.d_value) +
                 ", srcDValue " + std::to_string(p.src_d_value) + ", dstNzC0Stride " +
                 std::to_string(p.dst_nz_c0_stride) +
                 ": Nd2NzParams holds 16-bit fields (nValue at most 16384)");
    }
    const int64_t c0 =
        dst >= 0 && size_t(dst) < buffers.size() ? c0_of(buffers[size_t(dst)].type) : 1;
    const int64_t blocks = ceil_div(p.d_value, c0);
    Box dst_box{dst_offset,
                {{c0, 1}, {p.n_value, p.dst_nz_n_stride * c0}, {blocks, p.dst_nz_c0_stride * c0}}};
    Box src_box{src_offset, {{p.d_value, 1}, {p.n_value, p.src_d_value}}};
    const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
    const Buffer &from = checked_buffer(what, core, "source", src, src_box);
    if (to.mem != Mem::L1 || from.mem != Mem::GM || to.type != from.type) {
        fail(what, core,
             "Nd2Nz copies GM to L1 without conversion; got " + std::string(mem_name(from.mem)) +
                 " " + dtype_name(from.type) + " -> " + mem_name(to.mem) + " " +
                 dtype_name(to.type));
    }
    if (p.dst_nz_c0_stride < p.n_value * p.dst_nz_n_stride && blocks > 1) {
        fail(what, core,
             "dstNzC0Stride " + std::to_string(p.dst_nz_c0_stride) + " is less than the " +
                 std::to_string(p.n_value) + " rows a column block holds");
    }
    Op op;
    op.kind = OpKind::DataCopy;
    op.pipe = Pipe::MTE2;
    op.label = labels.id(label);
    op.cost = params.copy_cycles(Mem::GM, Mem::L1, p.n_value * blocks * 32);
    op.dst = dst;
    op.dst_box = dst_box;
    op.src = src;
    op.src_box = src_box;
    if (numerics && p.n_value > 0 && p.d_value > 0) {
        std::byte *d = to.data.get();
        const std::byte *s = from.data.get();
        const int64_t e = bytes_of(to.type);
        op.compute = [d, s, e, c0, blocks, p, dst_offset, src_offset] {
            for (int64_t n = 0; n < p.n_value; ++n) {
                for (int64_t col = 0; col < blocks * c0; ++col) {
                    std::byte *out = d + (dst_offset + (col / c0) * p.dst_nz_c0_stride * c0 +
                                          n * p.dst_nz_n_stride * c0 + col % c0) *
                                             e;
                    if (col < p.d_value) {
                        std::memcpy(out, s + (src_offset + n * p.src_d_value + col) * e, size_t(e));
                    } else {
                        std::memset(out, 0, size_t(e)); // padded to 32 bytes with zeros
                    }
                }
            }
        };
    }
    state.program.push_back(std::move(op));
}

void Machine::Impl::load_data_2d(int core, int dst, int64_t dst_offset, int src, int64_t src_offset,
                                 const LoadData2D &p, const std::string &label) {
    std::string what = "LoadData '" + label + "' (MTE1)";
    recording(what, core);
    if (p.repeat_times < 0 || p.repeat_times > 255 || p.start_index < 0 || p.start_index > 65535 ||
        p.src_stride < 0 || p.src_stride > 65535 || p.dst_gap < 0 || p.dst_gap > 65535) {
        fail(what, core,
             "repeatTimes must be in 0..255 (one 512-byte fractal each) and startIndex, "
             "srcStride and dstGap in 0..65535 (LoadData2DParams' field widths)");
    }
    const DType type =
        dst >= 0 && size_t(dst) < buffers.size() ? buffers[size_t(dst)].type : DType::BF16;
    const int64_t fractal = 512 / bytes_of(type);
    if (p.transpose && bytes_of(type) != 2) {
        fail(what, core,
             "ifTranspose transposes 16 x 16 fractals of 16-bit data; " +
                 std::string(dtype_name(type)) + " takes LoadDataWithTranspose");
    }
    Box dst_box, src_box;
    const int64_t first = src_offset + p.start_index * fractal;
    if (p.transpose) {
        dst_box = {dst_offset, {{16, 1}, {16, 16}, {p.repeat_times, (1 + p.dst_gap) * fractal}}};
        src_box = {first, {{16, 16}, {16, 1}, {p.repeat_times, p.src_stride * fractal}}};
    } else {
        dst_box = {dst_offset, {{fractal, 1}, {p.repeat_times, (1 + p.dst_gap) * fractal}}};
        src_box = {first, {{fractal, 1}, {p.repeat_times, p.src_stride * fractal}}};
    }
    const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
    checked_buffer(what, core, "source", src, src_box);
    if (to.mem != Mem::L0A && to.mem != Mem::L0B) {
        fail(what, core,
             "LoadData2D loads L0A or L0B; '" + to.name + "' is in " + mem_name(to.mem));
    }
    data_copy(core, dst, dst_box, src, src_box, label);
}

void Machine::Impl::load_data_transpose_8(int core, int dst, int64_t dst_offset, int src,
                                          int64_t src_offset, const LoadDataTranspose8 &p,
                                          const std::string &label) {
    std::string what = "LoadDataWithTranspose '" + label + "' (MTE1)";
    recording(what, core);
    if (p.repeat_times < 0 || p.repeat_times > 255 || p.start_index < 0 || p.start_index > 65535 ||
        p.src_stride < 0 || p.src_stride > 65535 || p.dst_gap < 0 || p.dst_gap > 65535 ||
        p.dst_frac_gap < 0 || p.dst_frac_gap > 65535) {
        fail(what, core,
             "repeatTimes must be in 0..255 and startIndex, srcStride, dstGap and dstFracGap in "
             "0..65535 (LoadData2dTransposeParams' field widths)");
    }
    for (int b : {dst, src}) {
        if (b >= 0 && size_t(b) < buffers.size() && bytes_of(buffers[size_t(b)].type) != 1)
            fail(what, core,
                 "this form transposes 32 x 32 blocks of 8-bit data; '" + buffers[size_t(b)].name +
                     "' is " + dtype_name(buffers[size_t(b)].type));
    }
    // Block element (row, col) lies at row * 32 + col (two 16 x 32 fractals); it goes to row
    // col, column row of the destination: fractal col / 16, row col % 16 of it.
    const int64_t fractal = 512, block = 1024;
    const Box src_box{src_offset + p.start_index * block,
                      {{32, 32}, {16, 1}, {2, 16}, {p.repeat_times, p.src_stride * block}}};
    const Box dst_box{dst_offset,
                      {{32, 1},
                       {16, 32},
                       {2, (1 + p.dst_frac_gap) * fractal},
                       {p.repeat_times, (1 + p.dst_gap) * fractal}}};
    const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
    checked_buffer(what, core, "source", src, src_box);
    if (to.mem != Mem::L0A && to.mem != Mem::L0B) {
        fail(what, core,
             "LoadDataWithTranspose loads L0A or L0B; '" + to.name + "' is in " + mem_name(to.mem));
    }
    data_copy(core, dst, dst_box, src, src_box, label);
}

void Machine::Impl::mmad_fractal(int core, int c, int64_t c_offset, int a, int64_t a_offset, int b,
                                 int64_t b_offset, int64_t m, int64_t n, int64_t k, bool accumulate,
                                 const std::string &label) {
    std::string what = "Mmad '" + label + "' (M)";
    Core::State &state = recording(what, core);
    if (m < 0 || n < 0 || k < 0 || m > 4095 || n > 4095 || k > 4095) {
        fail(what, core, "MmadParams m, n and k must be in 0..4095");
    }
    const DType type = a >= 0 && size_t(a) < buffers.size() ? buffers[size_t(a)].type : DType::BF16;
    const int64_t c0 = c0_of(type);
    const int64_t mp = ceil_div(m, 16) * 16, np = ceil_div(n, 16) * 16, kp = ceil_div(k, c0) * c0;
    Box c_box{c_offset, {{mp * np, 1}}}, a_box{a_offset, {{mp * kp, 1}}},
        b_box{b_offset, {{kp * np, 1}}};
    const Buffer &cb = checked_buffer(what, core, "c", c, c_box);
    const Buffer &ab = checked_buffer(what, core, "a", a, a_box);
    const Buffer &bb = checked_buffer(what, core, "b", b, b_box);
    if (cb.mem != Mem::L0C || ab.mem != Mem::L0A || bb.mem != Mem::L0B) {
        fail(what, core,
             "Mmad takes c from L0C, a from L0A and b from L0B; got " +
                 std::string(mem_name(cb.mem)) + ", " + mem_name(ab.mem) + ", " + mem_name(bb.mem));
    }
    std::string types =
        detail::mma_type_error(cb.name, cb.type, ab.name, ab.type, bb.name, bb.type, "Mmad", true);
    if (!types.empty() || ab.type != bb.type) {
        fail(what, core, types.empty() ? "a and b must have one type" : types);
    }
    check_aligned(what, core, "a", ab, a_box);
    check_aligned(what, core, "b", bb, b_box);
    Op op;
    op.kind = OpKind::Mmad;
    op.pipe = Pipe::M;
    op.label = labels.id(label);
    op.cost = params.mmad_cycles(m, n, k, type);
    op.dst = c;
    op.dst_box = c_box;
    op.src = a;
    op.src_box = a_box;
    op.src2 = b;
    op.src2_box = b_box;
    op.accumulate = accumulate;
    if (numerics && m > 0 && n > 0) {
        uint32_t *cd = reinterpret_cast<uint32_t *>(cb.data.get()); // f32 or i32 words
        const std::byte *ad = ab.data.get(), *bd = bb.data.get();
        const int64_t e = bytes_of(type);
        Impl *impl = this;
        op.compute = [=] {
            // Gather the fractal operands into dense a(k, m), b(n, k), c(n, m), multiply,
            // scatter.
            std::vector<std::byte> ga(size_t(k * m * e)), gb(size_t(n * k * e));
            std::vector<uint32_t> gc(size_t(n * m));
            for (int64_t mi = 0; mi < m; ++mi)
                for (int64_t ki = 0; ki < k; ++ki)
                    std::memcpy(&ga[size_t((mi * k + ki) * e)],
                                ad + (a_offset + (mi / 16) * kp * 16 + (ki / c0) * 16 * c0 +
                                      (mi % 16) * c0 + ki % c0) *
                                         e,
                                size_t(e));
            for (int64_t ki = 0; ki < k; ++ki)
                for (int64_t ni = 0; ni < n; ++ni)
                    std::memcpy(&gb[size_t((ki * n + ni) * e)],
                                bd + (b_offset + (ki / c0) * np * c0 + (ni / 16) * 16 * c0 +
                                      (ni % 16) * c0 + ki % c0) *
                                         e,
                                size_t(e));
            auto c_at = [&](int64_t mi, int64_t ni) -> uint32_t & {
                return cd[c_offset + (ni / 16) * mp * 16 + mi * 16 + ni % 16];
            };
            for (int64_t mi = 0; mi < m; ++mi)
                for (int64_t ni = 0; ni < n; ++ni)
                    gc[size_t(mi * n + ni)] = c_at(mi, ni);
            impl->multiplier.multiply_add(
                reinterpret_cast<std::byte *>(gc.data()), Box{0, {{n, 1}, {m, n}}}, ga.data(), type,
                Box{0, {{k, 1}, {m, k}}}, gb.data(), type, Box{0, {{n, 1}, {k, n}}}, accumulate);
            for (int64_t mi = 0; mi < m; ++mi)
                for (int64_t ni = 0; ni < n; ++ni)
                    c_at(mi, ni) = gc[size_t(mi * n + ni)];
        };
    }
    state.program.push_back(std::move(op));
}

void Machine::Impl::fixpipe_nz2nd(int core, int dst, int64_t dst_offset, int src,
                                  int64_t src_offset, const FixpipeNz2Nd &p,
                                  const std::string &label) {
    std::string what = "Fixpipe '" + label + "' (FIX)";
    Core::State &state = recording(what, core);
    if (p.n_size < 0 || p.m_size < 0 || p.src_stride < 0 || p.dst_stride < 0 || p.n_size > 65535 ||
        p.m_size > 65535 || p.src_stride > 65535 || p.dst_stride > 0xffffffffLL) {
        fail(what, core,
             "nSize, mSize and srcStride must be in 0..65535 and dstStride in 32 bits "
             "(FixpipeParamsV220's field widths)");
    }
    if (p.src_stride < p.m_size && p.n_size > 16) {
        fail(what, core,
             "srcStride " + std::to_string(p.src_stride) + " is less than mSize " +
                 std::to_string(p.m_size) + ": L0C column blocks would overlap");
    }
    Box src_box{src_offset, {{16, 1}, {p.m_size, 16}, {ceil_div(p.n_size, 16), p.src_stride * 16}}};
    Box dst_box{dst_offset, {{p.n_size, 1}, {p.m_size, p.dst_stride}}};
    const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
    const Buffer &from = checked_buffer(what, core, "source", src, src_box);
    if (from.mem != Mem::L0C || (from.type != DType::F32 && from.type != DType::I32)) {
        fail(what, core,
             "fixpipe reads f32 or i32 from L0C; '" + from.name + "' is " + dtype_name(from.type) +
                 " in " + mem_name(from.mem));
    }
    if (from.type == DType::I32 && (to.mem != Mem::GM || to.type != DType::I32)) {
        fail(what, core,
             "Fixpipe (CFG_ROW_MAJOR) writes an i32 accumulator as i32 (NoQuant) to GM; '" +
                 to.name + "' is " + dtype_name(to.type) + " in " + mem_name(to.mem));
    }
    if (from.type == DType::F32 &&
        (to.mem != Mem::GM ||
         (to.type != DType::BF16 && to.type != DType::F16 && to.type != DType::F32))) {
        fail(what, core,
             "Fixpipe (CFG_ROW_MAJOR) writes bf16 (F322BF16), f16 (F322F16) or f32 (NoQuant) to "
             "GM; '" +
                 to.name + "' is " + dtype_name(to.type) + " in " + mem_name(to.mem));
    }
    Op op;
    op.kind = OpKind::Fixpipe;
    op.pipe = Pipe::FIX;
    op.label = labels.id(label);
    op.cost = params.copy_cycles(Mem::L0C, Mem::GM, p.m_size * p.n_size * bytes_of(to.type));
    op.dst = dst;
    op.dst_box = dst_box;
    op.src = src;
    op.src_box = src_box;
    if (numerics && p.m_size > 0 && p.n_size > 0) {
        std::byte *d = to.data.get();
        const float *s = reinterpret_cast<const float *>(from.data.get());
        const int32_t *si = reinterpret_cast<const int32_t *>(from.data.get());
        const DType type = to.type;
        op.compute = [=] {
            for (int64_t mi = 0; mi < p.m_size; ++mi) {
                for (int64_t ni = 0; ni < p.n_size; ++ni) {
                    const int64_t from_at =
                        src_offset + (ni / 16) * p.src_stride * 16 + mi * 16 + ni % 16;
                    if (type == DType::I32) {
                        const int32_t v = p.relu ? std::max(si[from_at], 0) : si[from_at];
                        std::memcpy(d + (dst_offset + mi * p.dst_stride + ni) * 4, &v, 4);
                        continue;
                    }
                    float v = s[from_at];
                    if (p.relu)
                        v = std::max(v, 0.0f);
                    int64_t at = dst_offset + mi * p.dst_stride + ni;
                    if (type != DType::F32) {
                        uint16_t bits = float_to_half(type, v);
                        std::memcpy(d + at * 2, &bits, 2);
                    } else {
                        std::memcpy(d + at * 4, &v, 4);
                    }
                }
            }
        };
    }
    state.program.push_back(std::move(op));
}

std::vector<int64_t> Machine::Impl::lanes(const VectorCall &c, const VectorOperand &o,
                                          int per_block) {
    std::vector<int64_t> at;
    if (c.count >= 0) {
        for (int64_t i = 0; i < c.count; ++i)
            at.push_back(o.offset + i);
        return at;
    }
    for (int64_t r = 0; r < c.repeats; ++r) {
        for (int j = 0; j < c.mask; ++j) {
            at.push_back(o.offset + r * o.repeat_stride * per_block +
                         (j / per_block) * o.block_stride * per_block + j % per_block);
        }
    }
    return at;
}

std::vector<Box> Machine::Impl::boxes(const VectorCall &c, const VectorOperand &o, int per_block) {
    if (c.count >= 0)
        return {Box{o.offset, {{c.count, 1}}}};
    const int64_t full = c.mask / per_block, part = c.mask % per_block;
    std::vector<Box> out;
    const Dim repeat{c.repeats, int64_t(o.repeat_stride) * per_block};
    if (full > 0)
        out.push_back(
            Box{o.offset, {{per_block, 1}, {full, int64_t(o.block_stride) * per_block}, repeat}});
    if (part > 0)
        out.push_back(Box{o.offset + full * o.block_stride * per_block, {{part, 1}, repeat}});
    return out;
}

namespace {

/** ReduceMax's / ReduceMin's sharedTmpBuffer in the count form without the index: the first
 * round's (value, index) per 64-element repeat, rounded up to whole 32-byte blocks (the docs'
 * "firstMaxRepeat * 2", RoundUp to elementsPerBlock; a partial last repeat counted). */
int64_t extreme_tmp_elements(int64_t count) {
    const int64_t repeats = std::max<int64_t>(1, (count + 63) / 64);
    return (repeats * 2 + 7) / 8 * 8;
}

} // namespace

void Machine::Impl::vector_instruction(int core, const VectorCall &c) {
    struct Shape {
        size_t sources;
        double weight; // cost units per lane byte
    };
    static const std::map<std::string, Shape> shapes = {
        {"Add", {2, 1}},
        {"Sub", {2, 1}},
        {"Mul", {2, 1}},
        {"Div", {2, 2}},
        {"Max", {2, 1}},
        {"Min", {2, 1}},
        {"Adds", {1, 1}},
        {"Muls", {1, 1}},
        {"Maxs", {1, 1}},
        {"Mins", {1, 1}},
        {"Exp", {1, 2}},
        {"Ln", {1, 2}},
        {"Sqrt", {1, 2}},
        {"Abs", {1, 1}},
        {"Relu", {1, 1}},
        {"Duplicate", {0, 1}},
        {"Brcb", {1, 1}},
        {"ReduceSum", {2, 2}},
        {"Compare", {2, 1}},
        {"Select", {3, 1}},
        {"Cast", {1, 1}},
        // ReduceMax / ReduceMin (count form): two passes, as ReduceSum (Tandem assumption: the
        // docs give no rate for them). WholeReduceMax / WholeReduceMin: the docs' ReduceRepeat
        // rate, 64/7 f32 elements per cycle (docs/ascendc_api_facts.md section 10).
        {"ReduceMax", {2, 2}},
        {"ReduceMin", {2, 2}},
        {"WholeReduceMax", {1, 7}},
        {"WholeReduceMin", {1, 7}},
        {"WholeReduceSum", {1, 7}},
        // BlockReduceSum / Max / Min: the docs' ReduceDataBlock rate, 64 f32 elements per cycle
        // (docs/ascendc_api_facts.md section 10; Max and Min at Sum's rate: a Tandem assumption).
        {"BlockReduceSum", {1, 1}},
        {"BlockReduceMax", {1, 1}},
        {"BlockReduceMin", {1, 1}},
        // Gather: 8 elements per cycle (one 32-byte block; a Tandem assumption, the docs give no
        // rate). CreateVecIndex: a lane per lane, as Duplicate.
        {"Gather", {2, 8}},
        {"CreateVecIndex", {0, 1}}};
    const std::string what = "vector " + c.op;
    auto shape = shapes.find(c.op);
    if (shape == shapes.end())
        fail(what, core, "no such vector instruction in the model");
    if (c.srcs.size() != shape->second.sources)
        fail(what, core, "takes " + std::to_string(shape->second.sources) + " source tensors");
    const bool brcb = c.op == "Brcb", reduce = c.op == "ReduceSum", compare = c.op == "Compare",
               select = c.op == "Select", cast = c.op == "Cast", gather = c.op == "Gather";
    // The int32_t forms (a Gather's offsets are computed so): every operand int32_t.
    const bool integer = c.dst.buffer >= 0 && size_t(c.dst.buffer) < buffers.size() &&
                         buffers[size_t(c.dst.buffer)].type == DType::I32;
    if (integer && c.op != "Duplicate" && c.op != "Adds" && c.op != "Muls" &&
        c.op != "CreateVecIndex")
        fail(what, core, "the model has Duplicate, Adds, Muls and CreateVecIndex on int32_t");
    const bool create_index = c.op == "CreateVecIndex"; // int32_t or float
    if (create_index && c.count < 0)
        fail(what, core, "is used here in its count form only");
    const bool reduce_extreme = c.op == "ReduceMax" || c.op == "ReduceMin";
    const bool whole_sum = c.op == "WholeReduceSum";
    const bool whole_reduce = c.op == "WholeReduceMax" || c.op == "WholeReduceMin" || whole_sum;
    const bool block_reduce = c.op.rfind("BlockReduce", 0) == 0;
    const bool maximum =
        c.op == "ReduceMax" || c.op == "WholeReduceMax" || c.op == "BlockReduceMax";
    if ((whole_reduce || block_reduce) && c.count >= 0)
        fail(what, core, "is used here in its repeat form only");
    if (whole_reduce && !whole_sum && c.mode != 2)
        fail(what, core, "only ReduceOrder::ORDER_ONLY_VALUE (2) is in the model");
    if (block_reduce && c.mask % 8 != 0)
        fail(what, core,
             "mask " + std::to_string(c.mask) + " is not whole 32-byte blocks (the model's form)");
    if (reduce_extreme && c.mode != 0)
        fail(what, core, "only calIndex = false is in the model");
    if (c.count < 0) {
        if (reduce || compare || select || cast || reduce_extreme || gather || integer)
            fail(what, core, "is used here in its count form only");
        if (c.repeats < 0 || c.repeats > 255)
            fail(what, core,
                 "repeatTime " + std::to_string(c.repeats) + " is outside 0..255 (uint8_t)");
        if (!brcb && (c.mask < 1 || c.mask > 64))
            fail(what, core,
                 "mask " + std::to_string(c.mask) + " is outside 1..64 (f32 lanes of a repeat)");
        for (const VectorOperand *o : operands(c)) {
            // (WholeReduce*'s dstRepStride counts values, up to 65535)
            const bool wide = brcb || ((whole_reduce || block_reduce) && o == &c.dst);
            if (o->block_stride < 0 || o->repeat_stride < 0 ||
                o->repeat_stride > (wide ? 65535 : 255) || o->block_stride > 65535)
                fail(what, core, "a stride is outside its field's range");
        }
        if (c.dst.block_stride == 0)
            fail(what, core, "dstBlkStride 0 is not allowed");
    } else if (brcb) {
        fail(what, core, "has no count form");
    }
    if (compare && c.count % 64 != 0)
        fail(what, core,
             "count " + std::to_string(c.count) +
                 " is not a multiple of 64: Compare's count form compares whole 256-byte "
                 "repeats");
    if (select && c.mode != 2)
        fail(what, core, "only VSEL_TENSOR_TENSOR_MODE (2) is in the model");
    if (compare && (c.mode < 0 || c.mode > 5))
        fail(what, core, "CMPMODE " + std::to_string(c.mode) + " is unknown");
    if (cast && c.mode != 0 && c.mode != 1)
        fail(what, core,
             "only RoundMode::CAST_NONE (0) from int32_t to float and CAST_RINT (1) from float to "
             "bfloat16_t or half are in the model");
    const bool int_cast = cast && c.mode == 0; // int32_t -> float
    if (gather && (c.gather_base < 0 || c.gather_base % 4 != 0 || c.gather_window < 1))
        fail(what, core,
             "srcBaseAddr " + std::to_string(c.gather_base) +
                 " is not a non-negative multiple of the element width (4), or the src tensor "
                 "is empty");

    // Operands, their types and places.
    std::vector<Access> accesses;
    auto check = [&](const VectorOperand &o, bool write, bool is_mask,
                     const char *role) -> const Buffer & {
        if (o.buffer < 0 || size_t(o.buffer) >= buffers.size())
            fail(what, core,
                 std::string(role) + " buffer id " + std::to_string(o.buffer) + " does not exist");
        const Buffer &b = buffers[size_t(o.buffer)];
        const bool offsets = gather && &o == &c.srcs[1];
        const DType want = is_mask              ? DType::U8
                           : int_cast           ? (write ? DType::F32 : DType::I32)
                           : cast && write      ? DType::BF16
                           : integer || offsets ? DType::I32
                                                : DType::F32;
        const bool half_cast = cast && write && b.type == DType::F16; // bf16 or half
        if (b.mem != Mem::UB || (b.type != want && !half_cast))
            fail(what, core,
                 std::string(role) + " '" + b.name + "' is " + dtype_name(b.type) + " in " +
                     mem_name(b.mem) + "; it takes " + dtype_name(want) + " UB tensors");
        const int64_t byte = o.offset * bytes_of(b.type);
        // ReduceSum's and WholeReduce*'s (value only) f32 destination: 4 bytes; ReduceMax's /
        // ReduceMin's: 8 (it has room for the index).
        const int64_t align = (reduce || whole_reduce) && write ? 4
                              : block_reduce && write           ? 32
                              : reduce_extreme && write         ? 8
                                                                : 32;
        if (byte % align != 0)
            fail(what, core,
                 std::string(role) + " '" + b.name + "' starts at byte " + std::to_string(byte) +
                     ": AscendC's vector operands start on " + std::to_string(align) +
                     "-byte boundaries");
        std::vector<Box> touched;
        if (is_mask) {
            touched.push_back(Box{o.offset, {{(c.count + 7) / 8, 1}}});
        } else if (brcb && write) {
            touched.push_back(Box{o.offset,
                                  {{8, 1},
                                   {8, int64_t(o.block_stride) * 8},
                                   {c.repeats, int64_t(o.repeat_stride) * 8}}});
        } else if (brcb) {
            touched.push_back(Box{o.offset, {{8 * c.repeats, 1}}});
        } else if ((reduce || reduce_extreme) && write) {
            touched.push_back(Box{o.offset, {{1, 1}}});
        } else if (reduce && &o == &c.srcs[1]) {
            // sharedTmpBuffer: the count form does not use it on the 910B
        } else if (reduce_extreme && &o == &c.srcs[1]) {
            // sharedTmpBuffer: the first round's (value, index) per repeat, in whole blocks
            // (the docs' minimum without the index)
            touched.push_back(Box{o.offset, {{extreme_tmp_elements(c.count), 1}}});
        } else if (gather && &o == &c.srcs[0]) {
            touched.push_back(Box{o.offset, {{c.gather_window, 1}}}); // its lanes lie inside
        } else if (whole_reduce && write) {
            touched.push_back(Box{o.offset, {{1, 1}, {c.repeats, int64_t(o.repeat_stride)}}});
        } else if (block_reduce && write) { // a value per block, dstRepStride in blocks
            touched.push_back(
                Box{o.offset, {{c.mask / 8, 1}, {c.repeats, int64_t(o.repeat_stride) * 8}}});
        } else {
            touched = boxes(c, o, 8);
        }
        for (const Box &box : touched) {
            checked_buffer(what, core, role, o.buffer, box);
            accesses.push_back({o.buffer, box, write});
        }
        return b;
    };
    check(c.dst, true, compare, "destination");
    for (size_t i = 0; i < c.srcs.size(); ++i)
        check(c.srcs[i], reduce_extreme && i == 1, select && i == 0, "source");

    const int64_t lanes_done =
        c.count >= 0 ? c.count : c.repeats * 64; // a repeat costs all its lanes
    const int64_t work = int64_t(std::ceil(double(lanes_done) * 4 * shape->second.weight));
    std::function<void()> compute;
    if (numerics) {
        auto data = [&](const VectorOperand &o) { return buffers[size_t(o.buffer)].data.get(); };
        std::byte *out = data(c.dst);
        std::vector<const std::byte *> in;
        for (const VectorOperand &o : c.srcs)
            in.push_back(data(o));
        if (gather) {
            // dst[i] = the f32 at byte gather_base + srcOffset[i] of the src tensor, inside it.
            const int64_t count = c.count, dst = c.dst.offset, src = c.srcs[0].offset,
                          at = c.srcs[1].offset, base = c.gather_base, window = c.gather_window;
            const std::string where = what + " on " + core_text(core);
            compute = [out, in, count, dst, src, at, base, window, where] {
                const float *x = reinterpret_cast<const float *>(in[0]) + src;
                const int32_t *offset = reinterpret_cast<const int32_t *>(in[1]) + at;
                float *o = reinterpret_cast<float *>(out) + dst;
                std::vector<float> result(size_t(std::max<int64_t>(count, 0)));
                for (int64_t i = 0; i < count; ++i) {
                    const int64_t byte = base + int64_t(uint32_t(offset[i]));
                    if (byte % 4 != 0 || byte / 4 >= window)
                        throw SimError(where + ": lane " + std::to_string(i) + " reads byte " +
                                       std::to_string(byte) + ", outside its src tensor of " +
                                       std::to_string(window) + " elements");
                    result[size_t(i)] = x[byte / 4];
                }
                std::copy(result.begin(), result.end(), o);
            };
        } else if (create_index && !integer) {
            // float (the AscendC docs' CreateVecIndex: int16_t, half, int32_t, float on Atlas A2)
            const int64_t count = c.count, dst = c.dst.offset;
            const float first = c.scalar;
            compute = [out, count, dst, first] {
                float *o = reinterpret_cast<float *>(out) + dst;
                for (int64_t i = 0; i < count; ++i)
                    o[i] = first + float(i);
            };
        } else if (integer) {
            // Duplicate, Adds, Muls, CreateVecIndex on int32_t (count form).
            const int64_t count = c.count, dst = c.dst.offset,
                          src = c.srcs.empty() ? 0 : c.srcs[0].offset;
            const int32_t scalar = int32_t(c.scalar);
            const int code = c.op == "Adds" ? 0 : c.op == "Muls" ? 1 : c.op == "Duplicate" ? 2 : 3;
            compute = [out, in, count, dst, src, scalar, code] {
                const int32_t *x =
                    in.empty() ? nullptr : reinterpret_cast<const int32_t *>(in[0]) + src;
                int32_t *o = reinterpret_cast<int32_t *>(out) + dst;
                std::vector<int32_t> result(size_t(std::max<int64_t>(count, 0)));
                for (int64_t i = 0; i < count; ++i)
                    result[size_t(i)] = code == 0   ? x[i] + scalar
                                        : code == 1 ? x[i] * scalar
                                        : code == 2 ? scalar
                                                    : scalar + int32_t(i);
                std::copy(result.begin(), result.end(), o);
            };
        } else if (brcb) {
            const VectorOperand d = c.dst, src = c.srcs[0];
            const int64_t repeats = c.repeats;
            compute = [out, in, d, src, repeats] {
                const float *s = reinterpret_cast<const float *>(in[0]);
                float *o = reinterpret_cast<float *>(out);
                for (int64_t r = 0; r < repeats; ++r)
                    for (int j = 0; j < 8; ++j)
                        for (int l = 0; l < 8; ++l)
                            o[d.offset + r * d.repeat_stride * 8 + j * d.block_stride * 8 + l] =
                                s[src.offset + r * 8 + j];
            };
        } else if (reduce) {
            const int64_t count = c.count, dst = c.dst.offset, src = c.srcs[0].offset;
            compute = [out, in, count, dst, src] {
                const float *s = reinterpret_cast<const float *>(in[0]) + src;
                float total = 0;
                for (int64_t base = 0; base < count; base += 64) { // a tree within each repeat
                    float level[64];
                    int n = int(std::min<int64_t>(64, count - base));
                    for (int i = 0; i < n; ++i)
                        level[i] = s[base + i];
                    while (n > 1) {
                        const int half = (n + 1) / 2;
                        for (int i = 0; i + half < n; ++i)
                            level[i] = level[i] + level[i + half];
                        n = half;
                    }
                    total = base == 0 ? level[0] : total + level[0]; // the repeats in order
                }
                reinterpret_cast<float *>(out)[dst] = count > 0 ? total : 0.0f;
            };
        } else if (reduce_extreme) {
            // dst[0] = the extreme of src[0, count); sharedTmpBuffer gets each repeat's (value,
            // index bits) as the first round leaves them.
            const int64_t count = c.count, dst = c.dst.offset, src = c.srcs[0].offset,
                          tmp = c.srcs[1].offset;
            std::byte *work = data(c.srcs[1]);
            compute = [out, in, work, count, dst, src, tmp, maximum] {
                const float *s = reinterpret_cast<const float *>(in[0]) + src;
                float *t = reinterpret_cast<float *>(work) + tmp;
                float best = 0;
                for (int64_t base = 0; base < count; base += 64) {
                    const int64_t n = std::min<int64_t>(64, count - base);
                    uint32_t at = 0;
                    for (int64_t i = 1; i < n; ++i)
                        if (maximum ? s[base + i] > s[base + at] : s[base + i] < s[base + at])
                            at = uint32_t(i);
                    const float v = s[base + at];
                    t[2 * (base / 64)] = v;
                    std::memcpy(&t[2 * (base / 64) + 1], &at, 4);
                    best = base == 0 ? v : maximum ? std::max(best, v) : std::min(best, v);
                }
                if (count > 0)
                    reinterpret_cast<float *>(out)[dst] = best;
            };
        } else if (whole_reduce || block_reduce) {
            // WholeReduce*: dst[r * dstRepStride] = the sum or extreme of repeat r's masked
            // lanes; BlockReduce*: dst[(r * dstRepStride) * 8 + b] = that of block b's (lanes 8b
            // .. 8b + 7). Sums add pairwise, a binary tree, as the hardware does.
            const std::vector<int64_t> s = lanes(c, c.srcs[0], 8);
            const int64_t dst = c.dst.offset, repeats = c.repeats;
            const int64_t stride = c.dst.repeat_stride * (block_reduce ? 8 : 1);
            const int mask = c.mask, group = block_reduce ? 8 : c.mask;
            const bool sum = whole_sum || c.op == "BlockReduceSum";
            compute = [out, in, s, dst, stride, repeats, mask, group, sum, maximum] {
                const float *x = reinterpret_cast<const float *>(in[0]);
                float *o = reinterpret_cast<float *>(out);
                std::vector<float> v(static_cast<size_t>(group));
                for (int64_t r = 0; r < repeats; ++r) {
                    for (int g = 0; g < mask / group; ++g) {
                        for (int j = 0; j < group; ++j)
                            v[size_t(j)] = x[s[size_t(r * mask + g * group + j)]];
                        for (int width = group; width > 1; width = (width + 1) / 2) {
                            for (int j = 0; j < width / 2; ++j) {
                                const float a = v[size_t(j)], b = v[size_t(j + (width + 1) / 2)];
                                v[size_t(j)] = sum       ? a + b
                                               : maximum ? std::max(a, b)
                                                         : std::min(a, b);
                            }
                        }
                        o[dst + r * stride + g] = v[0];
                    }
                }
            };
        } else if (compare) {
            const int64_t count = c.count, dst = c.dst.offset, a = c.srcs[0].offset,
                          b = c.srcs[1].offset;
            const int mode = c.mode;
            compute = [out, in, count, dst, a, b, mode] {
                const float *x = reinterpret_cast<const float *>(in[0]) + a;
                const float *y = reinterpret_cast<const float *>(in[1]) + b;
                uint8_t *bits = reinterpret_cast<uint8_t *>(out) + dst;
                for (int64_t i = 0; i < count; i += 8)
                    bits[i / 8] = 0;
                for (int64_t i = 0; i < count; ++i) {
                    const bool r = mode == 0   ? x[i] < y[i]
                                   : mode == 1 ? x[i] > y[i]
                                   : mode == 2 ? x[i] == y[i]
                                   : mode == 3 ? x[i] <= y[i]
                                   : mode == 4 ? x[i] >= y[i]
                                               : x[i] != y[i];
                    if (r)
                        bits[i / 8] = uint8_t(bits[i / 8] | (1u << (i % 8)));
                }
            };
        } else if (int_cast) {
            const int64_t count = c.count, dst = c.dst.offset, src = c.srcs[0].offset;
            compute = [out, in, count, dst, src] {
                const int32_t *x = reinterpret_cast<const int32_t *>(in[0]) + src;
                float *o = reinterpret_cast<float *>(out) + dst;
                for (int64_t i = 0; i < count; ++i)
                    o[i] = float(x[i]); // CAST_NONE: exact below 2^24, else to nearest
            };
        } else if (cast) {
            const int64_t count = c.count, dst = c.dst.offset, src = c.srcs[0].offset;
            const DType to = buffers[size_t(c.dst.buffer)].type;
            compute = [out, in, count, dst, src, to] {
                const float *x = reinterpret_cast<const float *>(in[0]) + src;
                uint16_t *o = reinterpret_cast<uint16_t *>(out) + dst;
                for (int64_t i = 0; i < count; ++i)
                    o[i] = float_to_half(to, x[i]); // CAST_RINT: ties to even
            };
        } else if (select) {
            const int64_t count = c.count, dst = c.dst.offset, m = c.srcs[0].offset,
                          a = c.srcs[1].offset, b = c.srcs[2].offset;
            compute = [out, in, count, dst, m, a, b] {
                const uint8_t *bits = reinterpret_cast<const uint8_t *>(in[0]) + m;
                const float *x = reinterpret_cast<const float *>(in[1]) + a;
                const float *y = reinterpret_cast<const float *>(in[2]) + b;
                float *o = reinterpret_cast<float *>(out) + dst;
                for (int64_t i = 0; i < count; ++i)
                    o[i] = (bits[i / 8] >> (i % 8)) & 1 ? x[i] : y[i];
            };
        } else {
            static const std::vector<std::string> order = {
                "Add", "Adds", "Sub", "Mul", "Muls", "Div", "Max",  "Maxs",
                "Min", "Mins", "Exp", "Ln",  "Sqrt", "Abs", "Relu", "Duplicate"};
            const int code = int(std::find(order.begin(), order.end(), c.op) - order.begin());
            const std::vector<int64_t> d = lanes(c, c.dst, 8);
            std::vector<std::vector<int64_t>> s;
            for (const VectorOperand &o : c.srcs)
                s.push_back(lanes(c, o, 8));
            const float scalar = c.scalar;
            compute = [code, in, out, scalar, d, s] {
                const float *x = in.empty() ? nullptr : reinterpret_cast<const float *>(in[0]);
                const float *y = in.size() > 1 ? reinterpret_cast<const float *>(in[1]) : nullptr;
                float *o = reinterpret_cast<float *>(out);
                // Every lane reads before any writes: a source may be the destination.
                std::vector<float> result(d.size());
                for (size_t i = 0; i < d.size(); ++i) {
                    const float a = x ? x[s[0][i]] : 0.0f, b = y ? y[s[1][i]] : scalar;
                    float r = scalar; // Duplicate
                    switch (code) {
                    case 0:
                    case 1:
                        r = a + b;
                        break;
                    case 2:
                        r = a - b;
                        break;
                    case 3:
                    case 4:
                        r = a * b;
                        break;
                    case 5:
                        r = a / b;
                        break;
                    case 6:
                    case 7:
                        r = std::max(a, b);
                        break;
                    case 8:
                    case 9:
                        r = std::min(a, b);
                        break;
                    case 10:
                        r = std::exp(a);
                        break;
                    case 11:
                        r = std::log(a);
                        break;
                    case 12:
                        r = std::sqrt(a);
                        break;
                    case 13:
                        r = std::abs(a);
                        break;
                    case 14:
                        r = std::max(a, 0.0f);
                        break;
                    }
                    result[i] = r;
                }
                for (size_t i = 0; i < d.size(); ++i)
                    o[d[i]] = result[i];
            };
        }
    }
    vector_op(core, c.op + " " + buffers[size_t(c.dst.buffer)].name, work, accesses, compute);
}

std::vector<const VectorOperand *> Machine::Impl::operands(const VectorCall &c) {
    std::vector<const VectorOperand *> all = {&c.dst};
    for (const VectorOperand &o : c.srcs)
        all.push_back(&o);
    return all;
}

void Machine::Impl::vector_op(int core, const std::string &label, int64_t work,
                              const std::vector<Access> &accesses,
                              const std::function<void()> &compute) {
    std::string what = "vector '" + label + "' (V)";
    Core::State &state = recording(what, core);
    check_pipe(what, core, Pipe::V);
    if (work < 0) {
        fail(what, core, "negative work " + std::to_string(work));
    }
    for (const Access &x : accesses) {
        const Buffer &b = checked_buffer(what, core, x.write ? "written" : "read", x.buffer, x.box);
        if (b.mem != Mem::UB) {
            fail(what, core,
                 "buffer '" + b.name + "' is in " + mem_name(b.mem) +
                     "; vector ops read and write UB only");
        }
    }
    Op op;
    op.kind = OpKind::Vector;
    op.pipe = Pipe::V;
    op.label = labels.id(label);
    op.cost = params.vector_cycles(work);
    op.accesses = accesses;
    op.compute = compute;
    state.program.push_back(std::move(op));
}

void Machine::Impl::flag(int core, bool set, Pipe src, Pipe dst, int event,
                         const std::string &label) {
    const char *kind = set ? "SetFlag" : "WaitFlag";
    std::string text = flag_text(kind, src, dst, event);
    std::string what = text + (label.empty() ? "" : " '" + label + "'");
    Core::State &state = recording(what, core);
    if (!is_queue_pipe(src) || !is_queue_pipe(dst) || src == dst) {
        fail(what, core,
             "a flag joins two different pipes among S, MTE2, MTE1, M, FIX, V, MTE3; use "
             "PipeBarrier to order a pipe with itself or PIPE_ALL to drain all");
    }
    if (event < 0 || event >= params.event_ids) {
        fail(what, core,
             "event id " + std::to_string(event) + " is outside 0.." +
                 std::to_string(params.event_ids - 1) + " (" + std::to_string(params.event_ids) +
                 " event ids per pipe pair)");
    }
    check_pipe(what, core, src);
    check_pipe(what, core, dst);
    size_t key = size_t(flag_key(src, dst, event));
    Op op;
    op.kind = set ? OpKind::SetFlag : OpKind::WaitFlag;
    op.pipe = set ? src : dst;
    op.label = labels.id(label.empty() ? text : label);
    op.cost = params.flag_cycles;
    op.flag_src = src;
    op.flag_dst = dst;
    op.event = event;
    if (set) {
        if (state.sets[key] - state.waits[key] > 0) {
            fail(what, core,
                 "set twice without a wait: the previous " + flag_text("SetFlag", src, dst, event) +
                     " '" + labels.text(state.last_set[key]) +
                     "' is not consumed by a WaitFlag recorded since; wait for it first "
                     "(or use another event id)");
        }
        state.last_set[key] = op.label;
        op.ordinal = state.sets[key]++;
    } else {
        op.ordinal = state.waits[key]++;
    }
    state.program.push_back(std::move(op));
}

void Machine::Impl::pipe_barrier(int core, Pipe pipe) {
    std::string what = barrier_text(pipe);
    Core::State &state = recording(what, core);
    if (pipe != Pipe::ALL && !is_queue_pipe(pipe)) {
        fail(what, core, "no such pipe");
    }
    check_pipe(what, core, pipe);
    Op op;
    op.kind = OpKind::Barrier;
    op.pipe = pipe == Pipe::ALL ? Pipe::S : pipe;
    op.barrier = pipe;
    op.label = labels.id(what);
    op.cost = params.pipe_barrier_cycles;
    state.program.push_back(std::move(op));
}

void Machine::Impl::cross_flag(int core, bool set, Pipe pipe, int flag, const std::string &label) {
    std::string text = set ? std::string("CrossCoreSetFlag<2, PIPE_") + pipe_name(pipe) + ">(" +
                                 std::to_string(flag) + ")"
                           : "CrossCoreWaitFlag(" + std::to_string(flag) + ")";
    std::string what = text + (label.empty() ? "" : " '" + label + "'");
    Core::State &state = recording(what, core);
    if (!mix) {
        fail(what, core,
             "cross-core flags need a mix kernel (KERNEL_TYPE_MIX_AIC_1_2: an AIC and its two "
             "AIVs); "
             "this launch is AIC-only or AIV-only");
    }
    if (set && (pipe == Pipe::S || pipe == Pipe::ALL)) {
        fail(what, core,
             "a cross-core set is queued on PIPE_V, M, MTE1, MTE2, MTE3 or FIX, not PIPE_S or "
             "PIPE_ALL");
    }
    if (set) {
        check_pipe(what, core, pipe);
    }
    Op op;
    op.kind = set ? OpKind::CrossSet : OpKind::CrossWait;
    op.pipe = set ? pipe : Pipe::S; // a wait stalls the issue of every later instruction
    op.label = labels.id(label.empty() ? text : label);
    op.cost = params.flag_cycles;
    op.event = flag & (kCrossFlags - 1); // the hardware keeps the id's low 4 bits
    op.ordinal = (set ? state.cross_sets : state.cross_waits)[size_t(op.event)]++;
    state.program.push_back(std::move(op));
}

// ---------------------------------------------------------------------------------------------
// Core
// ---------------------------------------------------------------------------------------------

Core::Core(Machine *m, int id) : machine_(m), id_(id), state_(std::make_shared<State>()) {
    size_t keys = size_t(kPipes * kPipes * m->params().event_ids);
    state_->sets.assign(keys, 0);
    state_->waits.assign(keys, 0);
    state_->last_set.assign(keys, 0);
}

void Core::data_copy(int dst, const Box &dst_box, int src, const Box &src_box,
                     const std::string &label) {
    machine_->impl_->data_copy(id_, dst, dst_box, src, src_box, label);
}

void Core::nd2nz(int dst, int64_t dst_offset, int src, int64_t src_offset, const Nd2Nz &p,
                 const std::string &label) {
    machine_->impl_->nd2nz(id_, dst, dst_offset, src, src_offset, p, label);
}

void Core::load_data_transpose_8(int dst, int64_t dst_offset, int src, int64_t src_offset,
                                 const LoadDataTranspose8 &p, const std::string &label) {
    machine_->impl_->load_data_transpose_8(id_, dst, dst_offset, src, src_offset, p, label);
}

void Core::load_data_2d(int dst, int64_t dst_offset, int src, int64_t src_offset,
                        const LoadData2D &p, const std::string &label) {
    machine_->impl_->load_data_2d(id_, dst, dst_offset, src, src_offset, p, label);
}

void Core::mmad_fractal(int c, int64_t c_offset, int a, int64_t a_offset, int b, int64_t b_offset,
                        int64_t m, int64_t n, int64_t k, bool accumulate,
                        const std::string &label) {
    machine_->impl_->mmad_fractal(id_, c, c_offset, a, a_offset, b, b_offset, m, n, k, accumulate,
                                  label);
}

void Core::fixpipe_nz2nd(int dst, int64_t dst_offset, int src, int64_t src_offset,
                         const FixpipeNz2Nd &p, const std::string &label) {
    machine_->impl_->fixpipe_nz2nd(id_, dst, dst_offset, src, src_offset, p, label);
}

void Core::vector_instruction(const VectorCall &call) {
    machine_->impl_->vector_instruction(id_, call);
}

void Core::vector_op(const std::string &label, int64_t work, const std::vector<Access> &accesses,
                     const std::function<void()> &compute) {
    machine_->impl_->vector_op(id_, label, work, accesses, compute);
}

void Core::set_flag(Pipe src, Pipe dst, int event, const std::string &label) {
    machine_->impl_->flag(id_, true, src, dst, event, label);
}

void Core::wait_flag(Pipe src, Pipe dst, int event, const std::string &label) {
    machine_->impl_->flag(id_, false, src, dst, event, label);
}

void Core::pipe_barrier(Pipe pipe) {
    machine_->impl_->pipe_barrier(id_, pipe);
}

void Core::cross_core_set_flag(Pipe pipe, int flag, const std::string &label) {
    machine_->impl_->cross_flag(id_, true, pipe, flag, label);
}

void Core::cross_core_wait_flag(int flag, const std::string &label) {
    machine_->impl_->cross_flag(id_, false, Pipe::S, flag, label);
}

} // namespace tandem::sim::ascend
