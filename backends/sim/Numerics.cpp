// Numerics shared by the machine models: element types, box copies, the matrix multiply and
// the messages for malformed boxes. See Numerics.h.

#include "sim/Numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace tandem::sim {

// ---------------------------------------------------------------------------------------------
// Element types and boxes (declared in Zpu.h, used by every model)
// ---------------------------------------------------------------------------------------------

int bytes_of(DType t) {
    switch (t) {
    case DType::BF16:
    case DType::F16:
        return 2;
    case DType::F32:
    case DType::I32:
        return 4;
    case DType::U8:
    case DType::I8:
    case DType::E4M3:
    case DType::E5M2:
        return 1;
    }
    return 4;
}

const char *dtype_name(DType t) {
    switch (t) {
    case DType::BF16:
        return "bf16";
    case DType::F16:
        return "f16";
    case DType::F32:
        return "f32";
    case DType::I32:
        return "i32";
    case DType::U8:
        return "u8";
    case DType::I8:
        return "i8";
    case DType::E4M3:
        return "e4m3";
    case DType::E5M2:
        return "e5m2";
    }
    return "?";
}

float bf16_to_float(uint16_t bits) {
    uint32_t word = uint32_t(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
}

uint16_t float_to_bf16(float f) {
    uint32_t word;
    std::memcpy(&word, &f, sizeof word);
    if ((word & 0x7fffffffu) > 0x7f800000u) {
        return uint16_t((word >> 16) | 0x40u); // NaN: keep sign and payload top, make it quiet
    }
    word += 0x7fffu + ((word >> 16) & 1u); // round to nearest, ties to even
    return uint16_t(word >> 16);
}

float f16_to_float(uint16_t bits) {
    const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    const uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
    uint32_t word;
    if (exponent == 0x1f) {
        word = sign | 0x7f800000u | (mantissa << 13); // inf, NaN
    } else if (exponent != 0) {
        word = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        word = sign; // +-0
    } else {         // subnormal: mantissa * 2^-24, exact in f32
        float value = float(mantissa) * 0x1p-24f;
        std::memcpy(&word, &value, sizeof word);
        word |= sign;
    }
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
}

uint16_t float_to_f16(float f) {
    uint32_t word;
    std::memcpy(&word, &f, sizeof word);
    const uint16_t sign = uint16_t((word >> 16) & 0x8000u);
    const uint32_t magnitude = word & 0x7fffffffu;
    if (magnitude > 0x7f800000u) // NaN: quiet, the payload's top bits kept
        return uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    if (magnitude >= 0x477ff000u) // rounds to 65520 or more: inf (as IEEE, Halide's float16_t)
        return uint16_t(sign | 0x7c00u);
    if (magnitude < 0x38800000u) { // below 2^-14: a subnormal half (or zero), in steps of 2^-24
        float m;
        uint32_t abs_word = magnitude;
        std::memcpy(&m, &abs_word, sizeof m);
        // m * 2^24 in f32 is exact; nearbyint rounds to nearest, ties to even.
        return uint16_t(sign | uint16_t(std::nearbyint(m * 0x1p24f)));
    }
    // Normal: drop 13 mantissa bits with round to nearest even; a carry moves up the exponent.
    uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return uint16_t(sign | uint16_t((rounded >> 13) - (112u << 10)));
}

float half_to_float(DType t, uint16_t bits) {
    return t == DType::F16 ? f16_to_float(bits) : bf16_to_float(bits);
}

uint16_t float_to_half(DType t, float f) {
    return t == DType::F16 ? float_to_f16(f) : float_to_bf16(f);
}

uint8_t float_to_fp8(DType t, float f) {
    const bool e4m3 = t == DType::E4M3;
    // The finite non-negative values rise with their codes: 0 up to 0x7e (e4m3, 448) or 0x7b
    // (e5m2, 57344).
    const int largest = e4m3 ? 0x7e : 0x7b;
    const uint8_t sign = std::signbit(f) ? 0x80 : 0;
    const float magnitude = std::fabs(f);
    if (std::isnan(f))
        return uint8_t(sign | 0x7f);
    if (magnitude >= fp8_value(uint8_t(largest), e4m3))
        return uint8_t(sign | largest);
    int lo = 0, hi = largest; // fp8_value(lo) <= magnitude < fp8_value(hi)
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        (fp8_value(uint8_t(mid), e4m3) <= magnitude ? lo : hi) = mid;
    }
    const float below = magnitude - fp8_value(uint8_t(lo), e4m3);
    const float above = fp8_value(uint8_t(hi), e4m3) - magnitude;
    const int code = below < above || (below == above && lo % 2 == 0) ? lo : hi;
    return uint8_t(sign | code);
}

int64_t Box::elements() const {
    int64_t count = 1;
    for (const Dim &d : dims) {
        count *= d.extent;
    }
    return count;
}

std::string Box::str() const {
    std::ostringstream out;
    out << "{offset " << offset << ", dims [";
    for (size_t d = 0; d < dims.size(); ++d) {
        out << (d ? ", " : "") << dims[d].extent << ":" << dims[d].stride;
    }
    out << "] (extent:stride)}";
    return out.str();
}

namespace detail {

// ---------------------------------------------------------------------------------------------
// Box copies
// ---------------------------------------------------------------------------------------------

namespace {

/** Enumerates a box's elements in order (dims[0] fastest) as runs along its innermost dim. */
class BoxWalk {
public:
    explicit BoxWalk(const Box &box) : run_start_(box.offset) {
        for (const Dim &d : box.dims) {
            if (d.extent == 1) {
                continue;
            }
            if (!dims_.empty() && d.stride == dims_.back().extent * dims_.back().stride) {
                dims_.back().extent *= d.extent; // contiguous continuation of the previous dim
                continue;
            }
            dims_.push_back(d);
        }
        index_.assign(dims_.size(), 0);
    }
    int64_t position() const { return run_start_ + in_run_ * stride(); }
    int64_t stride() const { return dims_.empty() ? 1 : dims_[0].stride; }
    int64_t left_in_run() const { return (dims_.empty() ? 1 : dims_[0].extent) - in_run_; }
    void advance(int64_t n) {
        in_run_ += n;
        if (left_in_run() == 0) {
            next_run();
        }
    }

private:
    void next_run() {
        in_run_ = 0;
        for (size_t d = 1; d < dims_.size(); ++d) {
            run_start_ += dims_[d].stride;
            if (++index_[d] < dims_[d].extent) {
                return;
            }
            run_start_ -= dims_[d].extent * dims_[d].stride;
            index_[d] = 0;
        }
    }
    std::vector<Dim> dims_;
    std::vector<int64_t> index_;
    int64_t run_start_;
    int64_t in_run_ = 0;
};

template <int Bytes>
void copy_strided(std::byte *dst, int64_t dst_stride, const std::byte *src, int64_t src_stride,
                  int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        std::memcpy(dst + i * dst_stride * Bytes, src + i * src_stride * Bytes, Bytes);
    }
}

} // namespace

void L2Lines::arrived(double when) {
    for (uint64_t key : missed_)
        ready_[key] = when;
    missed_.clear();
}

void for_each_run(const Box &box, int element_bytes,
                  const std::function<void(int64_t first, int64_t bytes)> &f) {
    const std::vector<Dim> &dims = box.dims;
    if (box.elements() == 0)
        return;
    bool contiguous = !dims.empty() && dims[0].stride == 1;
    size_t outer = contiguous ? 1 : 0;
    int64_t row = contiguous ? dims[0].extent * element_bytes : element_bytes;
    std::vector<int64_t> index(dims.size(), 0);
    for (;;) {
        int64_t offset = box.offset;
        for (size_t d = outer; d < dims.size(); ++d)
            offset += index[d] * dims[d].stride;
        f(offset * element_bytes, row);
        size_t d = outer;
        while (d < dims.size() && ++index[d] == dims[d].extent)
            index[d++] = 0;
        if (d == dims.size())
            break;
    }
}

void for_each_line(int buffer, const Box &box, int element_bytes, int64_t line,
                   const std::function<void(uint64_t key, int64_t bytes)> &f) {
    for_each_run(box, element_bytes, [&](int64_t first, int64_t bytes) {
        for (int64_t at = first; at < first + bytes;) {
            int64_t index = at / line, next = std::min((index + 1) * line, first + bytes);
            f((uint64_t(buffer) << 40) | uint64_t(index), next - at);
            at = next;
        }
    });
}

L2Lines::Split L2Lines::read(int buffer, const Box &box, int element_bytes) {
    Split split;
    missed_.clear();
    std::vector<uint64_t> used; // lines of this read, touched after it (a read does not hit itself)
    for_each_line(buffer, box, element_bytes, line_, [&](uint64_t key, int64_t bytes) {
        if (lines_.count(key)) {
            split.hit += bytes;
            auto ready = ready_.find(key);
            if (ready != ready_.end())
                split.ready = std::max(split.ready, ready->second);
        } else {
            split.miss += bytes;
            if (std::find(missed_.begin(), missed_.end(), key) == missed_.end()) {
                split.fill += line_;
                missed_.push_back(key);
            }
        }
        used.push_back(key);
    });
    for (uint64_t key : used)
        touch(key);
    return split;
}

void L2Lines::touch(uint64_t key) {
    if (capacity_ == 0)
        return;
    auto it = lines_.find(key);
    if (it != lines_.end()) {
        recent_.splice(recent_.begin(), recent_, it->second);
        return;
    }
    recent_.push_front(key);
    lines_[key] = recent_.begin();
    if (lines_.size() > capacity_) {
        lines_.erase(recent_.back());
        ready_.erase(recent_.back());
        recent_.pop_back();
    }
}

void copy_box(std::byte *dst, const Box &dst_box, const std::byte *src, const Box &src_box,
              int element_bytes) {
    int64_t left = dst_box.elements();
    BoxWalk to(dst_box), from(src_box);
    while (left > 0) {
        int64_t n = std::min({to.left_in_run(), from.left_in_run(), left});
        std::byte *d = dst + to.position() * element_bytes;
        const std::byte *s = src + from.position() * element_bytes;
        if (to.stride() == 1 && from.stride() == 1) {
            std::memmove(d, s, size_t(n * element_bytes));
        } else if (element_bytes == 1) {
            copy_strided<1>(d, to.stride(), s, from.stride(), n);
        } else if (element_bytes == 2) {
            copy_strided<2>(d, to.stride(), s, from.stride(), n);
        } else {
            copy_strided<4>(d, to.stride(), s, from.stride(), n);
        }
        to.advance(n);
        from.advance(n);
        left -= n;
    }
}

// ---------------------------------------------------------------------------------------------
// Matrix multiply
// ---------------------------------------------------------------------------------------------

namespace {

// c[m * c_row + n] += sum_k a[m * k_count + k] * b[k * n_count + n], k ascending (the order of a
// naive loop, so results match one bit for bit). Four rows of c share each row of b.
void add_rows4(float *__restrict c0, float *__restrict c1, float *__restrict c2,
               float *__restrict c3, const float *__restrict b, float a0, float a1, float a2,
               float a3, int64_t n_count) {
    for (int64_t n = 0; n < n_count; ++n) {
        float bn = b[n];
        c0[n] += a0 * bn;
        c1[n] += a1 * bn;
        c2[n] += a2 * bn;
        c3[n] += a3 * bn;
    }
}

void add_row(float *__restrict c, const float *__restrict b, float a, int64_t n_count) {
    for (int64_t n = 0; n < n_count; ++n) {
        c[n] += a * b[n];
    }
}

void multiply_add_rows(float *c, int64_t c_row, const float *a, const float *b, int64_t m_count,
                       int64_t n_count, int64_t k_count) {
    int64_t m = 0;
    for (; m + 4 <= m_count; m += 4) {
        float *c0 = c + m * c_row;
        const float *a0 = a + m * k_count;
        for (int64_t k = 0; k < k_count; ++k) {
            add_rows4(c0, c0 + c_row, c0 + 2 * c_row, c0 + 3 * c_row, b + k * n_count, a0[k],
                      a0[k_count + k], a0[2 * k_count + k], a0[3 * k_count + k], n_count);
        }
    }
    for (; m < m_count; ++m) {
        for (int64_t k = 0; k < k_count; ++k) {
            add_row(c + m * c_row, b + k * n_count, a[m * k_count + k], n_count);
        }
    }
}

float load_float(const std::byte *base, DType type, int64_t index) {
    if (type == DType::E4M3 || type == DType::E5M2)
        return fp8_value(uint8_t(base[index]), type == DType::E4M3);
    if (type == DType::BF16 || type == DType::F16) {
        uint16_t bits;
        std::memcpy(&bits, base + index * 2, 2);
        return half_to_float(type, bits);
    }
    float value;
    std::memcpy(&value, base + index * 4, 4);
    return value;
}

/** Gathers a 2-D box (dims[0] = inner, dims[1] = outer) into rows of floats: out[o * inner + i]. */
void gather_floats(std::vector<float> &out, const std::byte *base, DType type, const Box &box) {
    int64_t inner = box.dims[0].extent, outer = box.dims[1].extent;
    int64_t inner_stride = box.dims[0].stride, outer_stride = box.dims[1].stride;
    out.resize(size_t(inner * outer));
    for (int64_t o = 0; o < outer; ++o) {
        float *row = out.data() + o * inner;
        int64_t at = box.offset + o * outer_stride;
        if (type == DType::BF16 && inner_stride == 1) {
            const std::byte *p = base + at * 2;
            for (int64_t i = 0; i < inner; ++i) {
                uint16_t bits;
                std::memcpy(&bits, p + i * 2, 2);
                uint32_t word = uint32_t(bits) << 16;
                std::memcpy(&row[i], &word, 4);
            }
        } else if (type == DType::F32 && inner_stride == 1) {
            std::memcpy(row, base + at * 4, size_t(inner) * 4);
        } else {
            for (int64_t i = 0; i < inner; ++i) {
                row[i] = load_float(base, type, at + i * inner_stride);
            }
        }
    }
}

/** [k][m] layout of a box a(k, m) transposed into out[m * K + k]. */
void gather_transposed(std::vector<float> &out, const std::byte *base, DType type, const Box &box) {
    int64_t k_count = box.dims[0].extent, m_count = box.dims[1].extent;
    out.resize(size_t(k_count * m_count));
    for (int64_t m = 0; m < m_count; ++m) {
        for (int64_t k = 0; k < k_count; ++k) {
            out[size_t(m * k_count + k)] = load_float(
                base, type, box.offset + k * box.dims[0].stride + m * box.dims[1].stride);
        }
    }
}

/** acc(n, m) += sum_k a(k, m) * b(n, k) over int8 operands into an int32 accumulator, exactly
 * (wrapping on overflow, as the hardware's adders do). */
void multiply_add_int8(std::byte *acc, const Box &acc_box, const std::byte *a, const Box &a_box,
                       const std::byte *b, const Box &b_box) {
    const int64_t n_count = acc_box.dims[0].extent, m_count = acc_box.dims[1].extent;
    const int64_t k_count = a_box.dims[0].extent;
    auto at = [](const std::byte *base, const Box &box, int64_t i0, int64_t i1) {
        return int32_t(static_cast<int8_t>(
            base[box.offset + i0 * box.dims[0].stride + i1 * box.dims[1].stride]));
    };
    std::vector<uint32_t> row(static_cast<size_t>(n_count));
    std::vector<int32_t> b_rows(static_cast<size_t>(k_count * n_count));
    for (int64_t k = 0; k < k_count; ++k) {
        for (int64_t n = 0; n < n_count; ++n)
            b_rows[size_t(k * n_count + n)] = at(b, b_box, n, k);
    }
    for (int64_t m = 0; m < m_count; ++m) {
        for (int64_t n = 0; n < n_count; ++n) {
            int32_t value;
            std::memcpy(&value,
                        acc + 4 * (acc_box.offset + n * acc_box.dims[0].stride +
                                   m * acc_box.dims[1].stride),
                        4);
            row[size_t(n)] = uint32_t(value);
        }
        for (int64_t k = 0; k < k_count; ++k) {
            const uint32_t x = uint32_t(at(a, a_box, k, m));
            const int32_t *y = b_rows.data() + k * n_count;
            for (int64_t n = 0; n < n_count; ++n)
                row[size_t(n)] += x * uint32_t(y[n]);
        }
        for (int64_t n = 0; n < n_count; ++n) {
            std::memcpy(acc + 4 * (acc_box.offset + n * acc_box.dims[0].stride +
                                   m * acc_box.dims[1].stride),
                        &row[size_t(n)], 4);
        }
    }
}

} // namespace

void MatrixMultiplier::multiply_add(std::byte *acc, const Box &acc_box, const std::byte *a,
                                    DType a_type, const Box &a_box, const std::byte *b,
                                    DType b_type, const Box &b_box, bool accumulate) {
    int64_t n_count = acc_box.dims[0].extent, m_count = acc_box.dims[1].extent;
    int64_t k_count = a_box.dims[0].extent;
    if (!accumulate && n_count > 0 && m_count > 0) {
        std::vector<float> zeros(size_t(n_count * m_count), 0.0f);
        copy_box(acc, acc_box, reinterpret_cast<const std::byte *>(zeros.data()),
                 Box{0, {{n_count * m_count, 1}}}, 4);
    }
    if (m_count <= 0 || n_count <= 0 || k_count <= 0) {
        return;
    }
    if (a_type == DType::I8) { // b is too: the callers check mma_type_error first
        multiply_add_int8(acc, acc_box, a, a_box, b, b_box);
        return;
    }
    gather_transposed(scratch_a_, a, a_type, a_box); // [m][k]
    // b(n, k): dims[0] = n inner, dims[1] = k outer: rows of b over k, n contiguous.
    gather_floats(scratch_b_, b, b_type, b_box); // [k][n]
    float *acc_data = reinterpret_cast<float *>(acc);
    const Dim &acc_n = acc_box.dims[0], &acc_m = acc_box.dims[1];
    bool in_place = acc_n.stride == 1 && (m_count == 1 || acc_m.stride >= n_count);
    if (in_place) {
        multiply_add_rows(acc_data + acc_box.offset, acc_m.stride, scratch_a_.data(),
                          scratch_b_.data(), m_count, n_count, k_count);
        return;
    }
    gather_floats(scratch_acc_, acc, DType::F32, acc_box); // [m][n]
    multiply_add_rows(scratch_acc_.data(), n_count, scratch_a_.data(), scratch_b_.data(), m_count,
                      n_count, k_count);
    for (int64_t m = 0; m < m_count; ++m) {
        for (int64_t n = 0; n < n_count; ++n) {
            acc_data[acc_box.offset + n * acc_n.stride + m * acc_m.stride] =
                scratch_acc_[size_t(m * n_count + n)];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

std::string box_outside_error(const char *role, const Box &box, const std::string &buffer_name,
                              int64_t elements) {
    int64_t lo = box.offset, hi = box.offset;
    bool empty = false;
    for (const Dim &d : box.dims) {
        if (d.extent < 0) {
            return std::string(role) + " box " + box.str() + " on buffer '" + buffer_name +
                   "' has a negative extent";
        }
        empty = empty || d.extent == 0;
        int64_t reach = (d.extent - 1) * d.stride;
        (reach < 0 ? lo : hi) += reach;
    }
    if (!empty && (lo < 0 || hi >= elements)) {
        return std::string(role) + " box " + box.str() + " reaches elements [" +
               std::to_string(lo) + ", " + std::to_string(hi) + "] of buffer '" + buffer_name +
               "', which has " + std::to_string(elements) +
               " elements; every element of a box must lie inside its buffer";
    }
    return "";
}

std::string mma_rank_error(const char *role, const Box &box, const char *dims) {
    if (box.dims.size() == 2) {
        return "";
    }
    return std::string("operand ") + role + " box " + box.str() + " has " +
           std::to_string(box.dims.size()) + " dims; it needs 2: " + dims;
}

std::string mma_type_error(const std::string &acc, DType acc_type, const std::string &a,
                           DType a_type, const std::string &b, DType b_type, const char *unit,
                           bool takes_int8, bool takes_fp8) {
    const std::string types = std::string("bf16, f16, f32") + (takes_int8 ? ", i8" : "") +
                              (takes_fp8 ? ", e4m3, e5m2" : "");
    auto fp8 = [](DType t) { return t == DType::E4M3 || t == DType::E5M2; };
    for (const auto &[name, type] :
         {std::pair<const std::string &, DType>{a, a_type}, {b, b_type}}) {
        if (type != DType::BF16 && type != DType::F16 && type != DType::F32 &&
            (type != DType::I8 || !takes_int8) && (!fp8(type) || !takes_fp8)) {
            return "operand '" + name + "' is " + dtype_name(type) + "; " + unit + " takes " +
                   types;
        }
    }
    if (a_type != b_type && !(fp8(a_type) && fp8(b_type))) {
        return "operands '" + a + "' (" + dtype_name(a_type) + ") and '" + b + "' (" +
               dtype_name(b_type) + ") differ in type; " + unit +
               " multiplies one type (or two FP8 formats)";
    }
    const DType want = a_type == DType::I8 ? DType::I32 : DType::F32;
    if (acc_type != want) {
        return "acc '" + acc + "' is " + dtype_name(acc_type) + "; " + unit + " over " +
               dtype_name(a_type) + " operands accumulates in " + dtype_name(want);
    }
    return "";
}

std::string mma_shape_error(const Box &acc_box, const Box &a_box, const Box &b_box) {
    int64_t n_count = acc_box.dims[0].extent, m_count = acc_box.dims[1].extent;
    int64_t k_count = a_box.dims[0].extent;
    if (a_box.dims[1].extent == m_count && b_box.dims[0].extent == n_count &&
        b_box.dims[1].extent == k_count) {
        return "";
    }
    auto shape = [](const Box &x) {
        return "{" + std::to_string(x.dims[0].extent) + ", " + std::to_string(x.dims[1].extent) +
               "}";
    };
    return "shapes disagree: acc " + shape(acc_box) + " (N, M), a " + shape(a_box) + " (K, M), b " +
           shape(b_box) + " (N, K)";
}

} // namespace detail
} // namespace tandem::sim
