// The ZPU machine model. See Zpu.h for the machine and its timing, happens-before and deadlock
// semantics; this file keeps the bookkeeping.
//
// Choices this implementation makes (all visible to callers):
// - Issuing a DMA descriptor costs the control stream 0 cycles. When `dma_queue_depth`
//   transfers are still in flight (end > now), the control stream stalls until the in-flight
//   transfer that ends first has ended; that stall is the "control_stall" busy time.
// - A descriptor runs on the channel that frees first (lowest channel index on a tie), starting
//   at max(now, that channel's free time). Transfers on one channel run in issue order, so they
//   are ordered for the happens-before check too.
// - Numerics: a transfer copies its data at issue, an MMA and a vector op at their start. The
//   happens-before check (not the numerics) is what finds a read of data still in flight.
// - A DMA pairs the elements of its two boxes in enumeration order (dims[0] fastest), so the
//   boxes need the same element count and type but not the same shape. No type conversion.
// - mma operands must be on-core SRAM in their scopes: a in ASRAM, b in WSRAM, acc in RSRAM.
// - SRAM is allocated in bytes without padding; buffers are never freed.
// - Races are reported once per (first op, second op, buffer), ops named by kind, label, engine
//   and core; Report::races keeps the first kMaxStoredRaces, Report::race_count counts them all.
// - Access histories are pruned: an access that happens before a later access covering its
//   elements (a write, or a read when both read) is dropped. A race against the dropped access
//   is then still found, against the later access (happens-before is transitive).
// - Overlap of two boxes is exact (an integer search over the union of their strides, with a
//   budget after which it answers "overlap", which is conservative); covering is exact for boxes
//   of nested strides and conservative ("not covered") otherwise.

#include "sim/Zpu.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

namespace tandem::sim {

// ---------------------------------------------------------------------------------------------
// Types, conversions, parameters
// ---------------------------------------------------------------------------------------------

int bytes_of(DType t) {
    switch (t) {
    case DType::BF16:
        return 2;
    case DType::F32:
    case DType::I32:
        return 4;
    }
    return 4;
}

const char *dtype_name(DType t) {
    switch (t) {
    case DType::BF16:
        return "bf16";
    case DType::F32:
        return "f32";
    case DType::I32:
        return "i32";
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

const char *space_name(Space s) {
    switch (s) {
    case Space::DRAM:
        return "DRAM";
    case Space::ASRAM:
        return "ASRAM";
    case Space::WSRAM:
        return "WSRAM";
    case Space::RSRAM:
        return "RSRAM";
    }
    return "?";
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { // b > 0, any sign of a
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

int64_t floor_div(int64_t a, int64_t b) { // b > 0, any sign of a
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

} // namespace

int64_t ZpuParams::capacity(Space s) const {
    switch (s) {
    case Space::DRAM:
        return std::numeric_limits<int64_t>::max(); // not modelled
    case Space::ASRAM:
        return asram_bytes;
    case Space::WSRAM:
        return wsram_bytes;
    case Space::RSRAM:
        return rsram_bytes;
    }
    return 0;
}

int64_t ZpuParams::dma_cycles(int64_t bytes) const {
    return dma_fixed + ceil_div(bytes, dma_bytes_per_cycle);
}

int64_t ZpuParams::mma_cycles(int64_t m, int64_t n, int64_t k, DType out) const {
    int64_t k_blocks = std::max<int64_t>(ceil_div(k, 32), mma_min_k_blocks);
    int64_t output = out == DType::F32 ? mma_fp32_out : mma_bf16_out;
    return mma_issue + output + ceil_div(m, 16) * ceil_div(n, 32) * k_blocks + mma_drain;
}

int64_t ZpuParams::vector_cycles(int64_t flops) const {
    return ceil_div(flops, vector_flops_per_cycle) + vector_fixed;
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

std::string Race::str() const {
    return "race on buffer '" + buffer + "': " + first + " and " + second +
           " touch the same elements (at least one writes) and neither happens before the other";
}

// ---------------------------------------------------------------------------------------------
// Element sets of boxes: exact overlap and (conservative) covering
// ---------------------------------------------------------------------------------------------

namespace {

constexpr int kMaxRank = 8;                       // dims kept after normalising a box
constexpr int64_t kOverlapSearchBudget = 1 << 16; // search nodes before answering "overlap"
constexpr size_t kMaxStoredRaces = 100;
constexpr size_t kMaxTraceEvents = 2000000;

/** The set of elements of a box, normalised: strides positive and strictly increasing, extents
 * > 1, progressions that fill an interval of the inner stride merged. Enumeration order is
 * forgotten; only the set matters here. */
struct ElementSet {
    int64_t offset = 0;
    int64_t lo = 0, hi = -1; // hull, inclusive
    int rank = 0;
    bool empty = false;
    bool exact = true; // false: too many dims, only the hull is known
    std::array<Dim, kMaxRank> dims;
};

ElementSet element_set(const Box &box) {
    ElementSet set;
    int64_t offset = box.offset;
    int64_t span = 0;
    std::array<Dim, 2 * kMaxRank> sorted;
    int count = 0;
    for (const Dim &d : box.dims) {
        if (d.extent <= 0) {
            set.empty = true;
            return set;
        }
        if (d.extent == 1 || d.stride == 0) {
            continue;
        }
        Dim dim = d;
        if (dim.stride < 0) {
            offset += (dim.extent - 1) * dim.stride;
            dim.stride = -dim.stride;
        }
        span += (dim.extent - 1) * dim.stride;
        if (count == int(sorted.size())) {
            set.exact = false;
            continue;
        }
        int at = count++;
        while (at > 0 && sorted[at - 1].stride > dim.stride) {
            sorted[at] = sorted[at - 1];
            --at;
        }
        sorted[at] = dim;
    }
    set.offset = offset;
    set.lo = offset;
    set.hi = offset + span;
    if (!set.exact) {
        return set;
    }
    for (int i = 0; i < count; ++i) {
        const Dim &dim = sorted[i];
        if (set.rank > 0) {
            Dim &last = set.dims[set.rank - 1];
            if (dim.stride % last.stride == 0 && dim.stride <= last.extent * last.stride) {
                // {i * s + j * r * s} with r <= extent fills [0, (e - 1) + (e' - 1) * r] * s.
                last.extent = last.extent + (dim.extent - 1) * (dim.stride / last.stride);
                continue;
            }
        }
        if (set.rank == kMaxRank) {
            set.exact = false;
            return set;
        }
        set.dims[set.rank++] = dim;
    }
    return set;
}

struct OverlapTerm {
    int64_t stride, k_min, k_max;
};

// Is there k with k_min <= k_t <= k_max and sum_{t' <= t} k_t' * stride_t' == rest?
bool solve_overlap(const OverlapTerm *terms, const int64_t *inner_lo, const int64_t *inner_hi,
                   int t, int64_t rest, int64_t &budget) {
    if (t < 0) {
        return rest == 0;
    }
    const OverlapTerm &term = terms[t];
    int64_t k_lo = std::max(term.k_min, ceil_div(rest - inner_hi[t], term.stride));
    int64_t k_hi = std::min(term.k_max, floor_div(rest - inner_lo[t], term.stride));
    if (t == 0) {
        return k_lo <= k_hi;
    }
    for (int64_t k = k_lo; k <= k_hi; ++k) {
        if (--budget < 0) {
            return true; // give up: conservative
        }
        if (solve_overlap(terms, inner_lo, inner_hi, t - 1, rest - k * term.stride, budget)) {
            return true;
        }
    }
    return false;
}

/** Do the element sets share an element? Exact unless the search budget runs out. */
bool overlaps(const ElementSet &a, const ElementSet &b) {
    if (a.empty || b.empty || a.hi < b.lo || b.hi < a.lo) {
        return false;
    }
    if (!a.exact || !b.exact) {
        return true;
    }
    // a.offset + sum i_t s_t == b.offset + sum j_t s_t  <=>  sum (i_t - j_t) s_t == delta, with
    // the strides of both boxes merged (a stride missing from one box has extent 1 there).
    std::array<OverlapTerm, 2 * kMaxRank> terms;
    int n = 0, i = 0, j = 0;
    while (i < a.rank || j < b.rank) {
        if (j == b.rank || (i < a.rank && a.dims[i].stride < b.dims[j].stride)) {
            terms[n++] = {a.dims[i].stride, 0, a.dims[i].extent - 1};
            ++i;
        } else if (i == a.rank || b.dims[j].stride < a.dims[i].stride) {
            terms[n++] = {b.dims[j].stride, -(b.dims[j].extent - 1), 0};
            ++j;
        } else {
            terms[n++] = {a.dims[i].stride, -(b.dims[j].extent - 1), a.dims[i].extent - 1};
            ++i;
            ++j;
        }
    }
    std::array<int64_t, 2 * kMaxRank> inner_lo, inner_hi;
    int64_t lo = 0, hi = 0;
    for (int t = 0; t < n; ++t) {
        inner_lo[t] = lo;
        inner_hi[t] = hi;
        lo += terms[t].k_min * terms[t].stride;
        hi += terms[t].k_max * terms[t].stride;
    }
    int64_t budget = kOverlapSearchBudget;
    return solve_overlap(terms.data(), inner_lo.data(), inner_hi.data(), n - 1, b.offset - a.offset,
                         budget);
}

/** Does `outer` contain every element of `inner`? May answer false when unsure. */
bool covers(const ElementSet &outer, const ElementSet &inner) {
    if (inner.empty) {
        return true;
    }
    if (outer.empty || !outer.exact || !inner.exact) {
        return false;
    }
    if (inner.lo < outer.lo || inner.hi > outer.hi) {
        return false;
    }
    if (outer.rank == 0 || (outer.rank == 1 && outer.dims[0].stride == 1)) {
        return true; // outer is one interval containing inner's hull
    }
    for (int d = 0; d + 1 < outer.rank; ++d) {
        if (outer.dims[d + 1].stride < outer.dims[d].extent * outer.dims[d].stride) {
            return false; // not nested: the digit decomposition below would not be unique
        }
    }
    std::array<int64_t, kMaxRank> digit{};
    int64_t rest = inner.offset - outer.offset;
    for (int d = outer.rank - 1; d >= 0; --d) {
        digit[d] = rest / outer.dims[d].stride;
        if (digit[d] >= outer.dims[d].extent) {
            return false;
        }
        rest -= digit[d] * outer.dims[d].stride;
    }
    if (rest != 0) {
        return false;
    }
    for (int t = 0; t < inner.rank; ++t) {
        const Dim &dim = inner.dims[t];
        int d = outer.rank - 1;
        while (d >= 0 && (outer.dims[d].stride > dim.stride || dim.stride % outer.dims[d].stride)) {
            --d;
        }
        if (d < 0) {
            return false;
        }
        digit[d] += (dim.extent - 1) * (dim.stride / outer.dims[d].stride);
        if (digit[d] >= outer.dims[d].extent) {
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Ops, accesses, per-core state
// ---------------------------------------------------------------------------------------------

enum class OpKind : uint8_t { Dma, Mma, Vector, Wait, Stall };

const char *op_kind_name(OpKind k) {
    switch (k) {
    case OpKind::Dma:
        return "dma";
    case OpKind::Mma:
        return "mma";
    case OpKind::Vector:
        return "vector";
    case OpKind::Wait:
        return "dma_wait";
    case OpKind::Stall:
        return "stall";
    }
    return "?";
}

// Trace tracks (Chrome "tid") of a core.
constexpr int kControlTrack = 0;
constexpr int kTensorTrack = 1;
constexpr int kVectorTrack = 2;
constexpr int kFirstDmaTrack = 3;

/** An op instance as races name it: kind, label, engine, core, packed in 64 bits. */
struct OpName {
    OpKind kind;
    int channel; // DMA channel, -1 for other engines
    int core;
    uint32_t label;

    uint64_t pack() const {
        return uint64_t(label) << 32 | uint64_t(uint16_t(core)) << 16 |
               uint64_t(uint8_t(channel + 1)) << 8 | uint64_t(kind);
    }
    static OpName unpack(uint64_t bits) {
        return {OpKind(bits & 0xff), int((bits >> 8) & 0xff) - 1, int((bits >> 16) & 0xffff),
                uint32_t(bits >> 32)};
    }
};

/** One access of one op to one buffer, as kept in a history. */
struct AccessRecord {
    ElementSet elements;
    int agent;     // 0: control stream, 1 + c: DMA channel c
    int64_t epoch; // the agent's own clock entry when it made the access
    uint64_t op;   // OpName::pack()
    bool write;
};

/** Records of one kind (reads or writes) ordered by hull start, so that a check visits only the
 * records whose hull can meet the new access: starts in [lo - longest hull, hi]. */
struct RecordList {
    std::multimap<int64_t, AccessRecord> by_lo;
    int64_t longest = 0; // longest hull (hi - lo) ever inserted

    bool empty() const { return by_lo.empty(); }
    void insert(const AccessRecord &record) {
        longest = std::max(longest, record.elements.hi - record.elements.lo);
        by_lo.emplace(record.elements.lo, record);
    }
};

struct BufferHistory {
    RecordList reads, writes;
};

struct CoreRun {
    int id = 0;
    int agents = 0;
    Cycles now = 0;
    std::vector<Cycles> channel_free;
    std::priority_queue<Cycles, std::vector<Cycles>, std::greater<Cycles>> in_flight_ends;
    std::vector<int64_t> clocks; // agents x agents; row a is agent a's vector clock
    Cycles tensor_busy = 0, vector_busy = 0, dma_busy = 0, control_stall = 0;
    Cycles longest_dma = 0, last_transfer_end = 0;
    std::vector<BufferHistory> history; // by buffer id

    int64_t *clock(int agent) { return clocks.data() + size_t(agent) * agents; }
    void join(int into, const int64_t *from) {
        int64_t *c = clock(into);
        for (int a = 0; a < agents; ++a) {
            c[a] = std::max(c[a], from[a]);
        }
    }
    BufferHistory &history_of(int buffer) {
        if (size_t(buffer) >= history.size()) {
            history.resize(size_t(buffer) + 1);
        }
        return history[buffer];
    }
};

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

void multiply_add(float *c, int64_t c_row, const float *a, const float *b, int64_t m_count,
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
    if (type == DType::BF16) {
        uint16_t bits;
        std::memcpy(&bits, base + index * 2, 2);
        return bf16_to_float(bits);
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

void json_string(std::ostream &out, const std::string &s) {
    out << '"';
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '"':
            out << "\\\"";
            break;
        case '\\':
            out << "\\\\";
            break;
        case '\n':
            out << "\\n";
            break;
        case '\t':
            out << "\\t";
            break;
        case '\r':
            out << "\\r";
            break;
        default:
            if (c < 0x20) {
                static const char hex[] = "0123456789abcdef";
                out << "\\u00" << hex[c >> 4] << hex[c & 15];
            } else {
                out << ch;
            }
        }
    }
    out << '"';
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Machine state
// ---------------------------------------------------------------------------------------------

struct Core::State {
    CoreRun run;
};

struct Machine::Impl {
    struct Buffer {
        std::string name;
        DType type;
        Space space;
        int core; // -1: DRAM, shared by all cores
        int64_t elements;
        std::unique_ptr<std::byte[]> data;
        bool written = false; // by some core (DRAM: enables the cross-core check)
    };
    struct Transfer {
        int core;
        Cycles end;
        size_t clock_at; // into transfer_clocks
    };
    struct TraceEvent {
        uint32_t label;
        OpKind kind;
        int16_t track;
        int32_t core;
        Cycles start, duration;
    };

    Impl(const ZpuParams &p, bool numerics_on, bool trace_on)
        : params(p), numerics(numerics_on), trace(trace_on),
          sram_used(size_t(p.cores), std::array<int64_t, 4>{}) {}

    ZpuParams params;
    bool numerics, trace;
    std::vector<Buffer> buffers;
    std::vector<std::array<int64_t, 4>> sram_used; // [core][Space]
    std::vector<std::unique_ptr<Core>> cores;

    std::vector<Transfer> transfers; // token id - 1
    std::vector<int64_t> transfer_clocks;

    std::vector<std::string> labels;
    std::unordered_map<std::string, uint32_t> label_ids;

    std::set<std::tuple<uint64_t, uint64_t, int>> race_keys;
    std::vector<Race> races;

    bool deadlock = false;
    std::string deadlock_message;

    std::vector<TraceEvent> events;
    bool trace_truncated = false;

    std::vector<float> scratch_a, scratch_b, scratch_acc; // mma numerics

    uint32_t label_id(const std::string &label) {
        auto it = label_ids.find(label);
        if (it != label_ids.end()) {
            return it->second;
        }
        uint32_t id = uint32_t(labels.size());
        labels.push_back(label);
        label_ids.emplace(label, id);
        return id;
    }

    std::string op_text(uint64_t packed) const {
        OpName op = OpName::unpack(packed);
        std::string text = std::string(op_kind_name(op.kind)) + " '" + labels[op.label] + "' (";
        switch (op.kind) {
        case OpKind::Dma:
            text += "dma channel " + std::to_string(op.channel);
            break;
        case OpKind::Mma:
            text += "tensor";
            break;
        case OpKind::Vector:
            text += "vector";
            break;
        default:
            text += "control";
        }
        return text + ", core " + std::to_string(op.core) + ")";
    }

    void add_race(uint64_t first, uint64_t second, int buffer) {
        if (!race_keys.emplace(first, second, buffer).second) {
            return;
        }
        if (races.size() < kMaxStoredRaces) {
            races.push_back({op_text(first), op_text(second), buffers[buffer].name});
        }
    }

    void add_event(OpKind kind, uint32_t label, int core, int track, Cycles start,
                   Cycles duration) {
        if (!trace) {
            return;
        }
        if (events.size() >= kMaxTraceEvents) {
            trace_truncated = true;
            return;
        }
        events.push_back({label, kind, int16_t(track), int32_t(core), start, duration});
    }

    // --- validation --------------------------------------------------------------------------

    [[noreturn]] static void fail(const std::string &what, const CoreRun &core,
                                  const std::string &message) {
        throw SimError(what + " on core " + std::to_string(core.id) + ": " + message);
    }

    const Buffer &checked_buffer(const std::string &what, const CoreRun &core, const char *role,
                                 int buffer, const Box &box) const {
        if (buffer < 0 || size_t(buffer) >= buffers.size()) {
            fail(what, core,
                 std::string(role) + " buffer id " + std::to_string(buffer) +
                     " does not exist (the machine has " + std::to_string(buffers.size()) +
                     " buffers)");
        }
        const Buffer &b = buffers[buffer];
        if (b.core >= 0 && b.core != core.id) {
            fail(what, core,
                 std::string(role) + " buffer '" + b.name + "' is " + space_name(b.space) +
                     " of core " + std::to_string(b.core) +
                     "; a core can only touch its own SRAM and DRAM");
        }
        int64_t lo = box.offset, hi = box.offset;
        bool empty = false;
        for (const Dim &d : box.dims) {
            if (d.extent < 0) {
                fail(what, core,
                     std::string(role) + " box " + box.str() + " on buffer '" + b.name +
                         "' has a negative extent");
            }
            empty = empty || d.extent == 0;
            int64_t reach = (d.extent - 1) * d.stride;
            (reach < 0 ? lo : hi) += reach;
        }
        if (!empty && (lo < 0 || hi >= b.elements)) {
            fail(what, core,
                 std::string(role) + " box " + box.str() + " reaches elements [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "] of buffer '" + b.name +
                     "', which has " + std::to_string(b.elements) +
                     " elements; every element of a box must lie inside its buffer");
        }
        return b;
    }

    // --- happens-before ----------------------------------------------------------------------

    /** Checks one access against the core's history of the buffer, then records it. */
    void access(CoreRun &core, int buffer, const Box &box, bool write, int agent, uint64_t op) {
        ElementSet elements = element_set(box);
        if (elements.empty) {
            return;
        }
        const int64_t *clock = core.clock(agent);
        BufferHistory &history = core.history_of(buffer);
        auto ordered_before = [&](const AccessRecord &earlier) {
            return earlier.epoch <= clock[earlier.agent];
        };
        // Conflicts: writes always, reads when this access writes.
        auto check = [&](RecordList &list, bool prune) {
            auto it = list.by_lo.lower_bound(elements.lo - list.longest);
            while (it != list.by_lo.end() && it->first <= elements.hi) {
                const AccessRecord &earlier = it->second;
                if (earlier.elements.hi >= elements.lo) {
                    bool before = ordered_before(earlier);
                    bool conflict = write || earlier.write;
                    if (conflict && !before && overlaps(earlier.elements, elements)) {
                        add_race(earlier.op, op, buffer);
                    }
                    if (prune && before && covers(elements, earlier.elements)) {
                        it = list.by_lo.erase(it);
                        continue;
                    }
                }
                ++it;
            }
        };
        check(history.writes, write);
        check(history.reads, true);
        (write ? history.writes : history.reads)
            .insert(AccessRecord{elements, agent, clock[agent], op, write});
        if (write) {
            buffers[buffer].written = true;
        }
    }

    // --- ops ---------------------------------------------------------------------------------

    Token dma_start(CoreRun &core, int dst, const Box &dst_box, int src, const Box &src_box,
                    const std::string &label) {
        std::string what = "dma '" + label + "'";
        const Buffer &to = checked_buffer(what, core, "destination", dst, dst_box);
        const Buffer &from = checked_buffer(what, core, "source", src, src_box);
        if (to.type != from.type) {
            fail(what, core,
                 "destination '" + to.name + "' is " + dtype_name(to.type) + " but source '" +
                     from.name + "' is " + dtype_name(from.type) +
                     "; the DMA engine copies elements without conversion");
        }
        int64_t count = dst_box.elements();
        if (count != src_box.elements()) {
            fail(what, core,
                 "destination box " + dst_box.str() + " has " + std::to_string(count) +
                     " elements but source box " + src_box.str() + " has " +
                     std::to_string(src_box.elements()));
        }
        uint32_t label_index = label_id(label);

        // The descriptor queue: stall while it is full.
        while (!core.in_flight_ends.empty() && core.in_flight_ends.top() <= core.now) {
            core.in_flight_ends.pop();
        }
        while (int(core.in_flight_ends.size()) >= params.dma_queue_depth) {
            Cycles first_end = core.in_flight_ends.top();
            core.in_flight_ends.pop();
            if (first_end > core.now) {
                add_event(OpKind::Stall, label_index, core.id, kControlTrack, core.now,
                          first_end - core.now);
                core.control_stall += first_end - core.now;
                core.now = first_end;
            }
        }

        int channel = int(std::min_element(core.channel_free.begin(), core.channel_free.end()) -
                          core.channel_free.begin());
        Cycles start = std::max(core.now, core.channel_free[channel]);
        Cycles duration = params.dma_cycles(count * bytes_of(to.type));
        Cycles end = start + duration;
        core.channel_free[channel] = end;
        core.in_flight_ends.push(end);
        core.dma_busy += duration;
        core.longest_dma = std::max(core.longest_dma, duration);
        core.last_transfer_end = std::max(core.last_transfer_end, end);
        add_event(OpKind::Dma, label_index, core.id, kFirstDmaTrack + channel, start, duration);

        // Issue edge control -> channel; the transfer is the channel's next event.
        int agent = 1 + channel;
        core.join(agent, core.clock(0));
        core.clock(agent)[agent] += 1;
        core.clock(0)[0] += 1;

        uint64_t op = OpName{OpKind::Dma, channel, core.id, label_index}.pack();
        access(core, src, src_box, false, agent, op);
        access(core, dst, dst_box, true, agent, op);

        transfers.push_back({core.id, end, transfer_clocks.size()});
        transfer_clocks.insert(transfer_clocks.end(), core.clock(agent),
                               core.clock(agent) + core.agents);

        if (numerics && count > 0) {
            copy_box(buffers[dst].data.get(), dst_box, buffers[src].data.get(), src_box,
                     bytes_of(to.type));
        }
        return Token{int64_t(transfers.size())};
    }

    void dma_wait(CoreRun &core, Token token, const std::string &label) {
        if (token.id == 0) {
            return;
        }
        if (token.id < 0 || size_t(token.id) > transfers.size() ||
            transfers[token.id - 1].core != core.id) {
            std::string why = token.id > 0 && size_t(token.id) <= transfers.size()
                                  ? "which core " + std::to_string(transfers[token.id - 1].core) +
                                        " issued; cores never synchronise"
                                  : "which was never issued";
            std::string message = "deadlock on core " + std::to_string(core.id) + ": dma_wait '" +
                                  label + "' waits on token " + std::to_string(token.id) + ", " +
                                  why + ", so the control stream blocks for ever";
            report_deadlock(message);
            throw DeadlockError(message);
        }
        const Transfer &transfer = transfers[token.id - 1];
        if (transfer.end > core.now) {
            add_event(OpKind::Wait, label_id(label), core.id, kControlTrack, core.now,
                      transfer.end - core.now);
            core.now = transfer.end;
        }
        core.join(0, transfer_clocks.data() + transfer.clock_at);
    }

    void mma(CoreRun &core, int acc, const Box &acc_box, int a, const Box &a_box, int b,
             const Box &b_box, const std::string &label) {
        std::string what = "mma '" + label + "'";
        const Buffer &acc_buffer = checked_buffer(what, core, "acc", acc, acc_box);
        const Buffer &a_buffer = checked_buffer(what, core, "a", a, a_box);
        const Buffer &b_buffer = checked_buffer(what, core, "b", b, b_box);
        struct Operand {
            const char *role;
            const Buffer &buffer;
            const Box &box;
            Space space;
            const char *dims;
        };
        for (const Operand &operand : {Operand{"acc", acc_buffer, acc_box, Space::RSRAM, "{N, M}"},
                                       Operand{"a", a_buffer, a_box, Space::ASRAM, "{K, M}"},
                                       Operand{"b", b_buffer, b_box, Space::WSRAM, "{N, K}"}}) {
            if (operand.buffer.space != operand.space) {
                fail(what, core,
                     std::string("operand ") + operand.role + " (buffer '" + operand.buffer.name +
                         "') is in " + space_name(operand.buffer.space) +
                         "; the tensor core takes it from " + space_name(operand.space));
            }
            if (operand.box.dims.size() != 2) {
                fail(what, core,
                     std::string("operand ") + operand.role + " box " + operand.box.str() +
                         " has " + std::to_string(operand.box.dims.size()) +
                         " dims; it needs 2: " + operand.dims);
            }
        }
        if (acc_buffer.type != DType::F32) {
            fail(what, core,
                 "acc '" + acc_buffer.name + "' is " + dtype_name(acc_buffer.type) +
                     "; the accumulator must be f32");
        }
        for (const Buffer *operand : {&a_buffer, &b_buffer}) {
            if (operand->type != DType::BF16 && operand->type != DType::F32) {
                fail(what, core,
                     "operand '" + operand->name + "' is " + dtype_name(operand->type) +
                         "; mma takes bf16 or f32");
            }
        }
        int64_t n_count = acc_box.dims[0].extent, m_count = acc_box.dims[1].extent;
        int64_t k_count = a_box.dims[0].extent;
        if (a_box.dims[1].extent != m_count || b_box.dims[0].extent != n_count ||
            b_box.dims[1].extent != k_count) {
            auto shape = [](const Box &x) {
                return "{" + std::to_string(x.dims[0].extent) + ", " +
                       std::to_string(x.dims[1].extent) + "}";
            };
            fail(what, core,
                 "shapes disagree: acc " + shape(acc_box) + " (N, M), a " + shape(a_box) +
                     " (K, M), b " + shape(b_box) + " (N, K)");
        }
        uint32_t label_index = label_id(label);
        Cycles duration = params.mma_cycles(m_count, n_count, k_count, DType::F32);
        add_event(OpKind::Mma, label_index, core.id, kTensorTrack, core.now, duration);

        uint64_t op = OpName{OpKind::Mma, -1, core.id, label_index}.pack();
        access(core, a, a_box, false, 0, op);
        access(core, b, b_box, false, 0, op);
        access(core, acc, acc_box, true, 0, op);

        if (numerics && m_count > 0 && n_count > 0 && k_count > 0) {
            multiply_numerics(acc_buffer, acc_box, a_buffer, a_box, b_buffer, b_box);
        }
        core.now += duration;
        core.tensor_busy += duration;
    }

    void multiply_numerics(const Buffer &acc_buffer, const Box &acc_box, const Buffer &a_buffer,
                           const Box &a_box, const Buffer &b_buffer, const Box &b_box) {
        int64_t n_count = acc_box.dims[0].extent, m_count = acc_box.dims[1].extent;
        int64_t k_count = a_box.dims[0].extent;
        gather_transposed(scratch_a, a_buffer.data.get(), a_buffer.type, a_box); // [m][k]
        // b(n, k): dims[0] = n inner, dims[1] = k outer: rows of b over k, n contiguous.
        gather_floats(scratch_b, b_buffer.data.get(), b_buffer.type, b_box); // [k][n]
        float *acc_data = reinterpret_cast<float *>(acc_buffer.data.get());
        const Dim &acc_n = acc_box.dims[0], &acc_m = acc_box.dims[1];
        bool in_place = acc_n.stride == 1 && (m_count == 1 || acc_m.stride >= n_count);
        if (in_place) {
            multiply_add(acc_data + acc_box.offset, acc_m.stride, scratch_a.data(),
                         scratch_b.data(), m_count, n_count, k_count);
            return;
        }
        gather_floats(scratch_acc, acc_buffer.data.get(), DType::F32, acc_box); // [m][n]
        multiply_add(scratch_acc.data(), n_count, scratch_a.data(), scratch_b.data(), m_count,
                     n_count, k_count);
        for (int64_t m = 0; m < m_count; ++m) {
            for (int64_t n = 0; n < n_count; ++n) {
                acc_data[acc_box.offset + n * acc_n.stride + m * acc_m.stride] =
                    scratch_acc[size_t(m * n_count + n)];
            }
        }
    }

    void vector_op(CoreRun &core, const std::string &label, int64_t flops,
                   const std::vector<Access> &accesses, const std::function<void()> &compute) {
        std::string what = "vector '" + label + "'";
        if (flops < 0) {
            fail(what, core, "negative flop count " + std::to_string(flops));
        }
        for (const Access &x : accesses) {
            checked_buffer(what, core, x.write ? "written" : "read", x.buffer, x.box);
        }
        uint32_t label_index = label_id(label);
        Cycles duration = params.vector_cycles(flops);
        add_event(OpKind::Vector, label_index, core.id, kVectorTrack, core.now, duration);
        uint64_t op = OpName{OpKind::Vector, -1, core.id, label_index}.pack();
        for (const Access &x : accesses) {
            access(core, x.buffer, x.box, x.write, 0, op);
        }
        if (numerics && compute) {
            compute();
        }
        core.now += duration;
        core.vector_busy += duration;
    }

    void report_deadlock(const std::string &message) {
        if (deadlock && deadlock_message.find(message) != std::string::npos) {
            return; // the core that threw reports it again
        }
        deadlock_message += (deadlock ? "\n" : "") + message;
        deadlock = true;
    }

    void cross_core_races(const std::vector<const CoreRun *> &runs) {
        struct Item {
            const AccessRecord *record;
            int core;
        };
        for (size_t buffer = 0; buffer < buffers.size(); ++buffer) {
            if (buffers[buffer].space != Space::DRAM || !buffers[buffer].written) {
                continue;
            }
            std::vector<Item> items;
            int cores_touching = 0;
            for (const CoreRun *core : runs) {
                const CoreRun &run = *core;
                if (buffer >= run.history.size()) {
                    continue;
                }
                const BufferHistory &h = run.history[buffer];
                cores_touching += !h.reads.empty() || !h.writes.empty();
                for (const RecordList *list : {&h.reads, &h.writes}) {
                    for (const auto &entry : list->by_lo) {
                        items.push_back({&entry.second, run.id});
                    }
                }
            }
            if (cores_touching < 2) {
                continue;
            }
            std::sort(items.begin(), items.end(), [](const Item &x, const Item &y) {
                return std::tie(x.record->elements.lo, x.core) <
                       std::tie(y.record->elements.lo, y.core);
            });
            std::vector<Item> active; // hulls reaching the current lo
            for (const Item &item : items) {
                const ElementSet &elements = item.record->elements;
                for (size_t i = 0; i < active.size();) {
                    if (active[i].record->elements.hi < elements.lo) {
                        active[i] = active.back();
                        active.pop_back();
                    } else {
                        ++i;
                    }
                }
                for (const Item &other : active) {
                    if (other.core == item.core || !(other.record->write || item.record->write) ||
                        !overlaps(other.record->elements, elements)) {
                        continue;
                    }
                    const Item &first = other.core < item.core ? other : item;
                    const Item &second = other.core < item.core ? item : other;
                    add_race(first.record->op, second.record->op, int(buffer));
                }
                active.push_back(item);
            }
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Core
// ---------------------------------------------------------------------------------------------

Core::Core(Machine *m, int id) : machine_(m), id_(id), state_(std::make_shared<State>()) {
    const ZpuParams &params = m->params();
    CoreRun &run = state_->run;
    run.id = id;
    run.agents = 1 + params.dma_channels;
    run.channel_free.assign(size_t(params.dma_channels), 0);
    run.clocks.assign(size_t(run.agents) * run.agents, 0);
    for (int a = 0; a < run.agents; ++a) {
        run.clock(a)[a] = 1; // every agent starts in its own first epoch
    }
}

Cycles Core::now() const {
    return state_->run.now;
}

Token Core::dma_start(int dst, const Box &dst_box, int src, const Box &src_box,
                      const std::string &label) {
    return machine_->impl_->dma_start(state_->run, dst, dst_box, src, src_box, label);
}

void Core::dma_wait(Token t, const std::string &label) {
    machine_->impl_->dma_wait(state_->run, t, label);
}

void Core::mma(int acc, const Box &acc_box, int a, const Box &a_box, int b, const Box &b_box,
               const std::string &label) {
    machine_->impl_->mma(state_->run, acc, acc_box, a, a_box, b, b_box, label);
}

void Core::vector_op(const std::string &label, int64_t flops, const std::vector<Access> &accesses,
                     const std::function<void()> &compute) {
    machine_->impl_->vector_op(state_->run, label, flops, accesses, compute);
}

// ---------------------------------------------------------------------------------------------
// Machine
// ---------------------------------------------------------------------------------------------

Machine::Machine(const ZpuParams &params, bool numerics, bool trace)
    : params_(params), numerics_(numerics) {
    auto require = [](bool ok, const std::string &message) {
        if (!ok) {
            throw SimError("ZpuParams: " + message);
        }
    };
    require(params.cores >= 1 && params.cores <= 4096, "cores must be in [1, 4096]");
    require(params.dma_channels >= 1 && params.dma_channels <= 250,
            "dma_channels must be in [1, 250]");
    require(params.dma_queue_depth >= 1, "dma_queue_depth must be at least 1");
    require(params.dma_bytes_per_cycle >= 1, "dma_bytes_per_cycle must be at least 1");
    require(params.vector_flops_per_cycle >= 1, "vector_flops_per_cycle must be at least 1");
    require(params.asram_bytes >= 0 && params.wsram_bytes >= 0 && params.rsram_bytes >= 0,
            "SRAM capacities must not be negative");
    impl_ = std::make_unique<Impl>(params, numerics, trace);
    for (int c = 0; c < params.cores; ++c) {
        impl_->cores.emplace_back(new Core(this, c));
    }
}

Machine::~Machine() = default;

int Machine::add_dram(const std::string &name, DType type, int64_t elements) {
    if (elements < 0) {
        throw SimError("add_dram '" + name + "': negative element count " +
                       std::to_string(elements));
    }
    Impl::Buffer buffer{name, type, Space::DRAM, -1, elements, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(elements * bytes_of(type))]());
    }
    impl_->buffers.push_back(std::move(buffer));
    return int(impl_->buffers.size()) - 1;
}

int Machine::add_sram(int core, const std::string &name, Space space, DType type,
                      int64_t elements) {
    std::string what = "add_sram '" + name + "'";
    if (core < 0 || core >= params_.cores) {
        throw SimError(what + ": core " + std::to_string(core) +
                       " does not exist (the machine has " + std::to_string(params_.cores) +
                       " cores)");
    }
    if (space == Space::DRAM) {
        throw SimError(what + ": DRAM is not an SRAM scope; use add_dram");
    }
    if (elements < 0) {
        throw SimError(what + ": negative element count " + std::to_string(elements));
    }
    int64_t bytes = elements * bytes_of(type);
    int64_t &used = impl_->sram_used[size_t(core)][size_t(space)];
    int64_t capacity = params_.capacity(space);
    if (bytes > capacity - used) {
        throw SimError("SRAM overflow: buffer '" + name + "' needs " + std::to_string(bytes) +
                       " bytes of " + space_name(space) + " on core " + std::to_string(core) +
                       ", but only " + std::to_string(capacity - used) + " of " +
                       std::to_string(capacity) +
                       " bytes are free; use smaller tiles or fewer stages");
    }
    used += bytes;
    Impl::Buffer buffer{name, type, space, core, elements, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(bytes)]());
    }
    impl_->buffers.push_back(std::move(buffer));
    return int(impl_->buffers.size()) - 1;
}

namespace {
[[noreturn]] void no_buffer(int buffer, size_t count) {
    throw SimError("buffer id " + std::to_string(buffer) + " does not exist (the machine has " +
                   std::to_string(count) + " buffers)");
}
} // namespace

void *Machine::data(int buffer) {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[buffer].data.get();
}

DType Machine::type(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[buffer].type;
}

const std::string &Machine::name(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[buffer].name;
}

int64_t Machine::elements(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[buffer].elements;
}

Core &Machine::core(int c) {
    if (c < 0 || c >= params_.cores) {
        throw SimError("core " + std::to_string(c) + " does not exist (the machine has " +
                       std::to_string(params_.cores) + " cores)");
    }
    return *impl_->cores[size_t(c)];
}

void Machine::report_deadlock(const std::string &message) {
    impl_->report_deadlock(message);
}

Report Machine::finish() {
    std::vector<const CoreRun *> runs;
    for (const auto &core : impl_->cores) {
        runs.push_back(&core->state_->run);
    }
    impl_->cross_core_races(runs);
    Report report;
    Cycles tensor = 0, vector = 0, dma = 0, stall = 0;
    for (const CoreRun *core : runs) {
        const CoreRun &run = *core;
        Cycles finish = std::max(run.now, run.last_transfer_end);
        Cycles bound = std::max({run.tensor_busy + run.vector_busy,
                                 ceil_div(run.dma_busy, params_.dma_channels), run.longest_dma});
        report.core_cycles.push_back(finish);
        report.cycles = std::max(report.cycles, finish);
        report.bound_cycles = std::max(report.bound_cycles, bound);
        tensor += run.tensor_busy;
        vector += run.vector_busy;
        dma += run.dma_busy;
        stall += run.control_stall;
    }
    report.busy = {{"tensor", tensor}, {"vector", vector}, {"dma", dma}, {"control_stall", stall}};
    report.races = impl_->races;
    report.race_count = int64_t(impl_->race_keys.size());
    report.deadlock = impl_->deadlock;
    report.deadlock_message = impl_->deadlock_message;
    return report;
}

void Machine::write_trace(const std::string &path) const {
    if (!impl_->trace) {
        throw SimError("write_trace '" + path +
                       "': the machine was made with trace = false, so nothing was recorded");
    }
    std::ofstream out(path);
    if (!out) {
        throw SimError("write_trace: cannot open '" + path + "' for writing");
    }
    out << "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"time_unit\": \"cycles\"},\n"
           "\"traceEvents\": [\n";
    bool first = true;
    auto separator = [&]() -> std::ostream & {
        out << (first ? "" : ",\n");
        first = false;
        return out;
    };
    std::vector<std::string> tracks = {"control", "tensor", "vector"};
    for (int c = 0; c < params_.dma_channels; ++c) {
        tracks.push_back("dma" + std::to_string(c));
    }
    for (int core = 0; core < params_.cores; ++core) {
        separator() << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << core
                    << ", \"tid\": 0, \"args\": {\"name\": \"core " << core << "\"}}";
        for (size_t t = 0; t < tracks.size(); ++t) {
            separator() << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << core
                        << ", \"tid\": " << t << ", \"args\": {\"name\": \"" << tracks[t] << "\"}}";
            separator() << "{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": " << core
                        << ", \"tid\": " << t << ", \"args\": {\"sort_index\": " << t << "}}";
        }
    }
    for (const Impl::TraceEvent &e : impl_->events) {
        separator() << "{\"name\": ";
        json_string(out, impl_->labels[e.label]);
        out << ", \"cat\": \"" << op_kind_name(e.kind) << "\", \"ph\": \"X\", \"ts\": " << e.start
            << ", \"dur\": " << e.duration << ", \"pid\": " << e.core << ", \"tid\": " << e.track
            << "}";
    }
    if (impl_->trace_truncated) {
        separator() << "{\"name\": \"trace truncated after " << kMaxTraceEvents
                    << " events\", \"ph\": \"i\", \"s\": \"g\", \"ts\": 0, \"pid\": 0, \"tid\": 0}";
    }
    out << "\n]}\n";
    if (!out) {
        throw SimError("write_trace: writing '" + path + "' failed");
    }
}

} // namespace tandem::sim
