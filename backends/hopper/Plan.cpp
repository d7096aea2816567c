#include "Plan.h"
#include "ElementLoops.h"
#include "TailProof.h"

#include "tandem/Fp8.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <sstream>

namespace tandem::hopper_backend {

using namespace Halide::Internal;

const std::string internal_prefix = "tandem.internal.";

/** A C identifier for an IR name: non-alphanumerics become '_'; names that would collide with the
 * emitter's own identifiers or C++ keywords get a trailing '_'. */
std::string c_name(const std::string &name) {
    if (name.compare(0, internal_prefix.size(), internal_prefix) == 0)
        return name.substr(internal_prefix.size());
    static const std::set<std::string> reserved = {
        // the emitted kernel's and launcher's own names
        "a_descriptor", "a_tile", "args", "b_descriptor", "b_tile", "block", "box", "col_in_tile",
        "cols", "row", "row_in_tile", "dynamic_shared_memory", "elected", "element", "extents",
        "hopper", "i", "k16", "m64", "offset", "partial", "reduction_scratch", "rows", "shared",
        "shared_bytes", "slot", "status", "stream", "strides", "thread_in_warpgroup", "total",
        "warpgroup", "x", "y",
        // C++ keywords an IR name could spell
        "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
        "continue", "default", "delete", "do", "double", "else", "enum", "extern", "false", "float",
        "for", "friend", "goto", "if", "inline", "int", "long", "namespace", "new", "not",
        "operator", "or", "private", "protected", "public", "register", "return", "short", "signed",
        "sizeof", "static", "struct", "switch", "template", "this", "throw", "true", "try",
        "typedef", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while",
        "xor"};
    std::string r;
    for (char c : name)
        r += std::isalnum((unsigned char)c) ? c : '_';
    if (r.empty() || std::isdigit((unsigned char)r[0]))
        r = "_" + r;
    if (reserved.count(r))
        r += "_";
    return r;
}

std::string type_text(const Halide::Type &t) {
    return element_type_name(t);
}

std::string brace_list(const std::vector<int64_t> &v) {
    std::string s = "{";
    for (size_t i = 0; i < v.size(); i++)
        s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "}";
}

bool proven(const Expr &e) {
    return can_prove(e);
}

/** Calls every intrinsic statement and vector op of the control stream (not the element nests),
 * in program order. */
void for_each_op(const Stmt &s, const std::function<void(const Stmt &)> &f) {
    if (!s.defined())
        return;
    if (const For *l = s.as<For>()) {
        for_each_op(l->body, f);
    } else if (const LetStmt *l = s.as<LetStmt>()) {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(s, &v, &body))
            return f(s);
        for_each_op(l->body, f);
    } else if (const IfThenElse *i = s.as<IfThenElse>()) {
        for_each_op(i->then_case, f);
        for_each_op(i->else_case, f);
    } else if (const Block *b = s.as<Block>()) {
        for_each_op(b->first, f);
        for_each_op(b->rest, f);
    } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
        for_each_op(pc->body, f);
    } else {
        f(s);
    }
}

namespace {

using lower::affine_step;
using lower::constant_upper_bound;

int64_t round_up(int64_t n, int64_t m) {
    return (n + m - 1) / m * m;
}

/** The loads and stores of one buffer in an element nest, each with the loop vars around it. */
class AccessesOf : public IRVisitor {
public:
    explicit AccessesOf(const std::string &b) : buffer(b) {}
    std::vector<std::pair<Expr, std::vector<std::string>>> found;
    std::vector<std::vector<Loop>> found_loops; // per access, its loops with their bounds

private:
    using IRVisitor::visit;
    const std::string buffer;
    std::vector<std::string> loops;
    std::vector<Loop> bounded;
    void visit(const For *op) override {
        loops.push_back(op->name);
        bounded.push_back({op->name, op->min, op->extent});
        IRVisitor::visit(op);
        loops.pop_back();
        bounded.pop_back();
    }
    void access(const std::string &name, const Expr &index) {
        if (name == buffer) {
            found.push_back({index, loops});
            found_loops.push_back(bounded);
        }
    }
    void visit(const Load *op) override {
        access(op->name, op->index);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        access(op->name, op->index);
        IRVisitor::visit(op);
    }
};

/** tandem_core_id() and tandem_grid_size() as variables the planner bounds by the grid. */
const std::string core_var = "tandem.internal.core_id";
const std::string grid_var = "tandem.internal.grid_size";

class CoreIdAsVar : public IRMutator {
    using IRMutator::visit;
    Expr visit(const Call *op) override {
        if (ir::is_core_id(op))
            return Variable::make(Halide::Int(32), core_var);
        if (ir::is_grid_size(op))
            return Variable::make(Halide::Int(32), grid_var);
        return IRMutator::visit(op);
    }
};

Expr bounded(const Expr &e) {
    return CoreIdAsVar().mutate(e);
}

struct CopyInfo {
    ir::CopyOp op;
    const IRNode *node = nullptr; // the copy statement
    bool load = true;
    std::string arg, buffer;
    std::vector<int64_t> min_end; // per dim: a constant lower bound of coordinate + extent in the
                                  // tensor's copy view (INT64_MIN: none found)
    std::vector<int64_t> tail_reach; // per dim: the box reach its tail is proven for (TailProof),
                                     // to the view's extents
    std::vector<int64_t> tail_reach_read; // the same to the read extents (an MMA operand's load)
    const Expr &global_offset() const { return load ? op.src_offset : op.dst_offset; }
    const Expr &global_stride(size_t d) const {
        return load ? op.dims[d].src_stride : op.dims[d].dst_stride;
    }
    const Expr &smem_stride(size_t d) const {
        return load ? op.dims[d].dst_stride : op.dims[d].src_stride;
    }
};

std::string copy_text(const CopyInfo &c) {
    return "the copy " + c.op.src + " -> " + c.op.dst;
}

/** How the TMA copies of a tile view their tensor (the same for every argument of the tile). */
struct TileView {
    size_t merged = 0;                    // > 0: the view's dims 0..merged are one (whole rows)
    std::vector<int64_t> box;             // in the (merged) view, before chunks and blocks
    int blocks = 1;                       // boxes per copy along dim 0 (box[0] = 256 each)
    int64_t last = 0;                     // > 0: the last box is this wide (its own tensor map)
    int rows = 1;                         // > 1: a box row per tile row (boxes {256, 1})
    std::map<std::string, int64_t> chunk; // per argument: dim 0 split into chunks
    std::string padding;                  // why the box reaches past the tile, for messages
};

class Planner {
public:
    Planner(const Kernel &k, const StridePolicy &strides, bool prove_tails)
        : kernel(k), strides(strides), prove_tails(prove_tails) {}

    Plan run() {
        for (const SramBuffer &b : kernel.buffers) {
            if (b.in_registers)
                plan.accumulators[b.name].buffer = &b;
            else
                plan.tiles[b.name].buffer = &b;
        }
        for_each_op(kernel.body, [&](const Stmt &s) {
            std::string counter;
            if (ir::as_advance(s, &counter))
                plan.counters.insert(counter);
        });
        // A grid sized at launch (from the GPU's SM count) is bounded by the tiles it covers only.
        const int most = kernel.ctas_per_sm ? 1 << 16 : std::max(kernel.grid, 1);
        scope.push(core_var, Interval(0, most - 1));
        scope.push(grid_var, Interval(1, most));
        for (const std::string &name : kernel.runtime_extent_names())
            extent_facts.push(name, Interval(1, Interval::pos_inf()));
        walk(kernel.body);
        for (CopyInfo &c : copies)
            place_box(c);
        for (auto &[name, acc] : plan.accumulators)
            mma_tiles(acc);
        for (auto &[name, tile] : plan.tiles) {
            if (tile.tma() && tile.kind == TileKind::Plain)
                plain_tile(name, tile);
        }
        for (const CopyInfo &c : copies)
            operand_strides(c);
        for (CopyInfo &c : copies)
            check_layout(c);
        for (const CopyInfo &c : copies)
            check_edges(c);
        for (const VectorInfo &v : vector_ops) {
            check_vector_op(v);
            place_elements(v);
        }
        for (auto &[name, tile] : plan.tiles) {
            swizzle(name, tile);
            column_block_ring(name, tile);
            pad_rows(name, tile);
        }
        make_maps();
        for (auto &[name, tile] : plan.tiles) {
            if (tile.threads())
                tile.tx_bytes = tile_bytes(tile);
        }
        for (const CopyInfo &c : copies) {
            const Tile &tile = plan.tiles.at(c.buffer);
            if (tile.threads()) {
                plan.tail_checks.erase(c.node);
                plan.thread_args.insert(c.arg);
            }
            if (!c.load || !expect_buffers[c.op.barrier].insert(c.buffer).second)
                continue;
            plan.expect_bytes[c.op.barrier] +=
                tile.threads() ? tile.tx_bytes : plan.map(c.arg, c.buffer, true).box_bytes();
        }
        try {
            shared_memory();
        } catch (const Error &) {
            // The padded rows and the swizzled loads (1024-byte aligned) are speed-ups, not
            // needs: without them the tiles may fit.
            const bool unpadded = unpad_rows(), unswizzled = unswizzle_loads();
            if (!unpadded && !unswizzled)
                throw;
            if (unswizzled) {
                plan.maps.clear();
                make_maps();
            }
            shared_memory();
        }
        return std::move(plan);
    }

private:
    struct VectorInfo {
        ir::VectorOp op;
        Stmt nest;
    };

    const Kernel &kernel;
    StridePolicy strides;
    bool prove_tails; // false: every tail check is kept (the executor's check of TailProof)
    Plan plan;
    std::vector<CopyInfo> copies;
    std::vector<ir::MmaOp> mmas;
    std::vector<VectorInfo> vector_ops;
    std::map<std::string, std::set<std::string>> expect_buffers;
    std::map<std::string, TileView> views; // plain tiles
    Scope<Interval> scope;                 // the enclosing loops and lets
    Scope<Interval> extent_facts;          // each runtime extent >= 1 (TailProof's simplifier)

    /** The control stream in program order, with the bounds of the enclosing loops and lets. */
    void walk(const Stmt &s) {
        if (!s.defined())
            return;
        if (const For *f = s.as<For>()) {
            Interval lo = bounds_of_expr_in_scope(bounded(f->min), scope),
                     hi = bounds_of_expr_in_scope(bounded(f->min + f->extent - 1), scope);
            scope.push(f->name, Interval(simplify(lo.min), simplify(hi.max)));
            walk(f->body);
            scope.pop(f->name);
        } else if (const LetStmt *l = s.as<LetStmt>()) {
            ir::VectorOp v;
            Stmt body;
            if (ir::as_vector_op(s, &v, &body))
                return visit(s);
            // A ring counter is a mutable int in the emitted code: no bounds.
            scope.push(l->name, plan.counters.count(l->name)
                                    ? Interval::everything()
                                    : bounds_of_expr_in_scope(bounded(l->value), scope));
            walk(l->body);
            scope.pop(l->name);
        } else if (const IfThenElse *i = s.as<IfThenElse>()) {
            walk(i->then_case);
            walk(i->else_case);
        } else if (const Block *b = s.as<Block>()) {
            walk(b->first);
            walk(b->rest);
        } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            walk(pc->body);
        } else {
            visit(s);
        }
    }

    void visit(const Stmt &s) {
        ir::CopyOp c;
        ir::MmaOp m;
        ir::VectorOp v;
        Stmt body;
        ir::WaitOp w;
        if (ir::as_wait(s, &w)) {
            if (!w.parity.defined())
                plan.phase_bits.insert(w.barrier);
        } else if (ir::as_copy(s, &c)) {
            CopyInfo info{c, s.get(), kernel.arg(c.src) != nullptr, "", "", {}, {}, {}};
            info.arg = info.load ? c.src : c.dst;
            info.buffer = info.load ? c.dst : c.src;
            if (!kernel.arg(info.arg) || !plan.tiles.count(info.buffer)) {
                throw Error("hopper: " + copy_text(info) +
                            " is not between a kernel argument and a shared buffer; "
                            "TMA moves boxes between global and shared memory only");
            }
            if (!info.load)
                plan.store_sources.insert(info.buffer);
            std::vector<KernelArg::Dim> view = kernel.arg(info.arg)->copy_view();
            for (size_t d = 0; d < c.dims.size() && d < view.size(); d++) {
                Expr coordinate = info.global_offset() / view[d].stride % view[d].extent;
                Expr end = simplify(bounded(coordinate + c.dims[d].extent));
                Expr bound = find_constant_bound(end, Direction::Lower, scope);
                const IntImm *i = bound.defined() ? bound.as<IntImm>() : nullptr;
                info.min_end.push_back(i ? i->value : INT64_MIN);
                std::vector<Expr> extents, reads;
                for (size_t e = 0; e < view.size(); e++)
                    extents.push_back(view[e].extent);
                reads = info.load ? read_edges(info) : extents;
                const Expr offset = bounded(info.global_offset()),
                           extent = bounded(c.dims[d].extent);
                info.tail_reach.push_back(
                    proven_tail_reach(offset, view, d, extent, scope, extents, extent_facts));
                info.tail_reach_read.push_back(
                    proven_tail_reach(offset, view, d, extent, scope, reads, extent_facts));
            }
            copies.push_back(info);
        } else if (ir::as_mma(s, &m)) {
            mma(m);
        } else if (ir::as_vector_op(s, &v, &body)) {
            vector_ops.push_back({v, body});
        }
    }

    void mma(const ir::MmaOp &m) {
        auto acc = plan.accumulators.find(m.acc);
        if (acc == plan.accumulators.end()) {
            throw Error("hopper: the MMA into " + m.acc +
                        " needs the accumulator in registers (it is in shared memory)");
        }
        const Tile *a = plan.tiles.count(m.a) ? &plan.tiles[m.a] : nullptr;
        const Tile *b = plan.tiles.count(m.b) ? &plan.tiles[m.b] : nullptr;
        if (!a || !b)
            throw Error("hopper: the MMA into " + m.acc + " needs its operands " + m.a + " and " +
                        m.b + " in shared memory");
        const Halide::Type &a_type = a->buffer->type, &b_type = b->buffer->type;
        const bool half_operands = a_type.is_float() && a_type.bits() == 16;
        const bool int8 = a_type == Halide::Int(8);
        const bool fp8 = fp8::is_fp8(a_type) && fp8::is_fp8(b_type); // any two formats
        const Halide::Type want = int8 ? Halide::Int(32) : Halide::Float(32);
        if ((!half_operands && !int8 && !fp8) || (b_type != a_type && !fp8) ||
            acc->second.buffer->type != want) {
            throw Error("hopper: the MMA " + m.acc + " += " + m.a + " * " + m.b +
                        " must be bf16 x bf16 -> f32, f16 x f16 -> f32, FP8 x FP8 -> f32 or int8 x "
                        "int8 -> int32 (the wgmmas this emitter issues)");
        }
        // A is K-major (a(k, m) with k innermost) or M-major (m innermost: A transposed, x(m, k));
        // an A of one row or one k-column is either (decided by the rest).
        const bool a_k_major = proven(m.a_stride_k == 1) && !proven(m.k == 1);
        if (!a_k_major && !proven(m.a_stride_m == 1))
            throw Error("hopper: MMA operand " + m.a +
                        " must be K-major (a(k, m) with k innermost) or M-major (m innermost)");
        // B is N-major (b(n, k) with n innermost: a GEMM's K x N rows) or K-major (k innermost:
        // attention's K rows); a B of one column or one k-row is either (decided by the rest).
        const bool b_k_major = proven(m.b_stride_k == 1) && !proven(m.k == 1);
        if (!b_k_major && !proven(m.b_stride_n == 1))
            throw Error("hopper: MMA operand " + m.b +
                        " must be N-major (b(n, k) with n innermost) or K-major (k innermost)");

        if (!proven(m.acc_stride_n == 1) || !is_const_zero(simplify(m.acc_offset))) {
            throw Error("hopper: the accumulator " + m.acc +
                        " must be a dense tile with n innermost at offset 0");
        }
        for (auto [tile, kind] : {std::pair{&plan.tiles[m.a], TileKind::MmaA},
                                  std::pair{&plan.tiles[m.b], TileKind::MmaB}}) {
            if (tile->kind != TileKind::Plain && tile->kind != kind) {
                throw Error("hopper: shared buffer " + tile->buffer->name +
                            " is both the A and the B operand of MMAs");
            }
            tile->kind = kind;
        }
        Accumulator &info = acc->second;
        if ((!info.a.empty() && info.a != m.a) || (!info.b.empty() && info.b != m.b)) {
            throw Error("hopper: the accumulator " + m.acc +
                        " takes MMAs from different operand tiles");
        }
        // A tail MMA of one column or one k-row says nothing about B's layout.
        if (!proven(m.n == 1) && !proven(m.k == 1)) {
            auto [known, first] = b_layouts.emplace(m.acc, b_k_major);
            if (!first && known->second != b_k_major)
                throw Error("hopper: the MMAs into " + m.acc + " read " + m.b +
                            " both N-major and K-major");
        }
        info.b_k_major = b_layouts.count(m.acc) ? b_layouts.at(m.acc) : b_k_major;
        if (!proven(m.m == 1) && !proven(m.k == 1)) {
            auto [known, first] = a_layouts.emplace(m.acc, a_k_major);
            if (!first && known->second != a_k_major)
                throw Error("hopper: the MMAs into " + m.acc + " read " + m.a +
                            " both K-major and M-major");
        }
        info.a_k_major = a_layouts.count(m.acc) ? a_layouts.at(m.acc) : a_k_major;
        info.a = m.a;
        info.b = m.b;
        // The row stride of a 1-column MMA (a tail of one column) says nothing about the layout.
        if (!info.stride_m.defined() || !proven(m.n == 1))
            info.stride_m = m.acc_stride_m;
        mmas.push_back(m);
    }

    std::map<std::string, bool> b_layouts; // accumulator -> its B is K-major (from MMAs that tell)
    std::map<std::string, bool> a_layouts; // accumulator -> its A is K-major (from MMAs that tell)

    std::vector<const CopyInfo *> copies_of(const std::string &buffer) const {
        std::vector<const CopyInfo *> r;
        for (const CopyInfo &c : copies) {
            if (c.buffer == buffer)
                r.push_back(&c);
        }
        return r;
    }

    /** The row pitches of a copy's smem tile, in elements, for dims 0 .. rank-2: the Stmt's tile
     * may be dense (pitch = extent, possibly tail-dependent) or keep the full tile's pitch. */
    std::vector<Expr> pitches(const CopyInfo &c) {
        std::vector<Expr> r;
        Expr below = 1;
        for (size_t d = 0; d + 1 < c.op.dims.size(); d++) {
            Expr next = c.smem_stride(d + 1), pitch;
            const IntImm *n = next.as<IntImm>(), *b = below.as<IntImm>();
            if (proven(below == 1))
                pitch = next;
            else if (n && b && b->value > 0 && n->value % b->value == 0)
                pitch = Halide::Expr(int(n->value / b->value));
            else if (proven(next == below * c.op.dims[d].extent))
                pitch = c.op.dims[d].extent;
            else if (proven(c.op.dims[d + 1].extent == 1))
                pitch = c.op.dims[d].extent;
            else
                throw Error("hopper: " + copy_text(c) + " dim " + std::to_string(d + 1) +
                            " is not a row of a row-major tile in " + c.buffer);
            pitch = simplify(pitch);
            if (!proven(pitch >= c.op.dims[d].extent) && !proven(c.op.dims[d + 1].extent == 1)) {
                throw Error("hopper: " + copy_text(c) + " has rows in " + c.buffer +
                            " that overlap (pitch below the extent)");
            }
            r.push_back(pitch);
            below = simplify(below * pitch);
        }
        return r;
    }

    /** The tile's `data`: the largest extent or pitch its copies take along each dim. */
    void place_box(const CopyInfo &c) {
        const KernelArg *arg = kernel.arg(c.arg);
        Tile &tile = plan.tiles[c.buffer];
        if (c.op.dims.size() != arg->copy_view().size()) {
            throw Error("hopper: " + copy_text(c) + " has " + std::to_string(c.op.dims.size()) +
                        " dims but " + c.arg + " has " + std::to_string(arg->copy_view().size()) +
                        "; a TMA box has the tensor's rank");
        }
        if (tile.data.empty())
            tile.data.assign(c.op.dims.size(), 0);
        if (tile.data.size() != c.op.dims.size())
            throw Error("hopper: shared buffer " + c.buffer + " is copied with different ranks");
        if (!proven(c.smem_stride(0) == 1) && !proven(c.op.dims[0].extent == 1)) {
            throw Error("hopper: " + copy_text(c) + " is not dense along dim 0 in " + c.buffer +
                        "; a TMA box lands as a dense tile");
        }
        std::vector<Expr> pitch = pitches(c);
        for (size_t d = 0; d < c.op.dims.size(); d++) {
            int64_t bound = constant_upper_bound(c.op.dims[d].extent);
            if (d < pitch.size())
                bound = std::max(bound, constant_upper_bound(pitch[d]));
            if (bound < 1) {
                throw Error("hopper: " + copy_text(c) + " dim " + std::to_string(d) +
                            " has no constant bound on its extent; TMA needs a constant box");
            }
            tile.data[d] = std::max(tile.data[d], bound);
        }
    }

    /** Why a tensor map cannot take a global stride (not a multiple of 16 bytes). */
    std::string stride_reason(const CopyInfo &c, size_t d, const Expr &stride_bytes) {
        return user_text(c.arg) + " has a global stride of " + user_text(stride_bytes) +
               " bytes in dim " + std::to_string(d) + " (" + type_text(kernel.arg(c.arg)->type) +
               "); TMA needs multiples of 16 bytes";
    }

    /** Whether TMA can take the global stride of view dim `d` of the copy's tensor: a constant
     * multiple of 16 bytes, or one known only at run time, which the call checks
     * (Plan::launch_checks). */
    bool tma_stride(const CopyInfo &c, const KernelArg::Dim &dim, size_t d, std::string *why) {
        const Expr bytes = simplify(dim.stride * kernel.arg(c.arg)->type.bytes());
        if (is_const_one(dim.extent))
            return true;
        if (is_const(bytes)) {
            if (proven(bytes % 16 == 0))
                return true;
            *why = stride_reason(c, d, bytes);
            return false;
        }
        std::string reason = stride_reason(c, d, bytes);
        const std::string pitch = user_text(bytes);
        if (strides.threads_for(pitch)) {
            *why = reason + " at some calls (this variant takes any)";
            return false;
        }
        for (const CallCheck &l : plan.launch_checks) {
            if (l.why == reason)
                return true;
        }
        plan.launch_checks.push_back(
            {simplify(bytes % 16 == 0 || dim.extent == 1), reason, /*target_limit=*/true});
        plan.launch_pitches.push_back(pitch);
        return true;
    }

    /** The copies of `tile` become thread copies; a plain tile keeps the Stmt's layout. */
    void to_threads(Tile &tile, const std::string &why) {
        if (tile.threads())
            return;
        tile.thread_copy = why;
        if (tile.kind == TileKind::Plain) {
            tile.data.clear();
            tile.reach.clear();
            tile.layout.clear();
            tile.dynamic_layout = false;
        }
    }

    int64_t tile_bytes(const Tile &tile) const {
        if (!tile.tma())
            return tile.buffer->slot_elements * tile.buffer->type.bytes();
        int64_t n = tile.buffer->type.bytes();
        for (int64_t e : tile.layout)
            n *= e;
        return n;
    }

    /** Per dim of a copy's view: the extent the algorithm reads where known, else the view's. */
    std::vector<Expr> read_edges(const CopyInfo &c) const {
        return kernel.arg(c.arg)->view_read_extents();
    }

    /** Whether the tensor's data ends at the read extents for this copy: an MMA operand's TMA
     * load, whose tensor map ends there (TensorMap::bounds). */
    bool ends_at_reads(const CopyInfo &c) const {
        const auto tile = plan.tiles.find(c.buffer);
        return c.load && tile != plan.tiles.end() && tile->second.kind != TileKind::Plain &&
               !tile->second.threads();
    }

    /** The tensor dim of each dim of the copy view (copy_view leaves out the static dims of
     * extent 1; a tensor of only such dims keeps one, taken as its dim 1). */
    static std::vector<size_t> view_dims(const KernelArg *arg) {
        std::vector<size_t> dims;
        for (size_t d = 0; d < arg->extents.size(); d++) {
            const bool symbolic = d < arg->runtime.size() && arg->runtime[d];
            if (symbolic || arg->extents[d] > 1)
                dims.push_back(d);
        }
        if (dims.empty())
            dims.push_back(std::min<size_t>(1, arg->extents.size() - 1));
        return dims;
    }

    /** An MMA operand's view: every dim of its tensor, those copy_view left out (extent 1: M = 1,
     * K = 1, one batch) put back, so that dims 0 and 1 are the matrix's and the rest batches. */
    static std::vector<KernelArg::Dim> operand_view(const KernelArg *arg) {
        const std::vector<KernelArg::Dim> view = arg->copy_view();
        std::vector<KernelArg::Dim> full;
        Expr stride = 1;
        size_t next = 0;
        for (size_t d = 0; d < arg->extents.size(); d++) {
            const bool symbolic = d < arg->runtime.size() && arg->runtime[d];
            if (symbolic || arg->extents[d] > 1) {
                full.push_back(view[next++]);
                stride = simplify(full.back().stride * full.back().extent);
            } else {
                full.push_back({Expr(1), stride});
            }
        }
        return full;
    }

    /** An MMA operand whose tensor has a global stride TMA cannot take is copied by threads. */
    void operand_strides(const CopyInfo &c) {
        Tile &tile = plan.tiles.at(c.buffer);
        if (tile.kind == TileKind::Plain)
            return;
        const KernelArg *arg = kernel.arg(c.arg);
        std::vector<KernelArg::Dim> view = operand_view(arg);
        for (size_t d = 1; d < view.size(); d++) {
            std::string why;
            if (!tma_stride(c, view[d], d, &why))
                to_threads(tile, why);
        }
    }

    // ---- MMA operand tiles ----

    /** Sets the roles of an operand tile's copy dims ({K, M} for A, {N, K} or {K, N} for B: the
     * tensor's dim order) and returns the
     * largest extent along each role. A 1-D copy (the tensor's other dim has extent 1: M = 1, or
     * K = 1 for B) gets the unit dim back: the wgmma tile is always 2-D. */
    std::vector<int64_t> operand_roles(Tile &t) {
        std::vector<const CopyInfo *> mine = copies_of(t.buffer->name);
        if (mine.empty())
            return on_chip_operand(t);
        const KernelArg *arg = kernel.arg(mine[0]->arg);
        for (const CopyInfo *c : mine) {
            if (c->arg != arg->name || !c->load)
                throw Error("hopper: MMA operand " + t.buffer->name +
                            " must be loaded from one tensor and never stored");
        }
        // Each copied dim's role is its tensor dim: 0 and 1 the matrix's, the rest batches,
        // which a tile takes one element of (a batched matmul's tile lies in one batch).
        std::vector<int64_t> roles = {1, 1};
        const std::vector<size_t> dims = view_dims(arg);
        internal_assert(dims.size() == t.data.size())
            << "hopper emitter: " << t.buffer->name << "'s copies do not follow its tensor\n";
        t.role = dims;
        for (size_t d = 0; d < t.data.size(); d++) {
            if (t.role[d] >= 2 && t.data[d] != 1) {
                throw Error("hopper: MMA operand " + t.buffer->name + " takes " +
                            std::to_string(t.data[d]) + " elements of " + arg->name + "'s dim " +
                            std::to_string(t.role[d]) +
                            ": a wgmma operand is a matrix (dims 0 and 1); tile the batch "
                            "dimensions by 1 outside the MMA");
            }
        }
        for (size_t d = 0; d < t.data.size(); d++) {
            if (t.role[d] < roles.size())
                roles[t.role[d]] = t.data[d];
        }
        return roles;
    }

    /** An operand no copy loads: made on chip by element code (a matmul chain). Its extents are
     * the MMAs' ({K, M} of a K-major A). */
    std::vector<int64_t> on_chip_operand(Tile &t) {
        const std::string &name = t.buffer->name;
        bool written = false;
        for (const VectorInfo &v : vector_ops) {
            for (const ir::Region &r : v.op.regions)
                written = written || (r.write && r.buffer == name);
        }
        if (t.kind != TileKind::MmaA || !written) {
            throw Error("hopper: MMA operand " + name +
                        " is neither loaded by a copy nor, as an "
                        "A operand, computed on chip by element code; on hopper a B operand "
                        "made on chip is not supported: stage it from a tensor");
        }
        int64_t k = 1, m = 1;
        for (const ir::MmaOp &op : mmas) {
            if (op.a != name)
                continue;
            if (!proven(op.a_stride_k == 1) && !proven(op.k == 1)) {
                throw Error("hopper: MMA operand " + name +
                            " is computed on chip M-major (its m innermost); wgmma takes an A "
                            "made on chip K-major: compute it with its K dimension innermost");
            }
            k = std::max(k, constant_upper_bound(op.k));
            m = std::max(m, constant_upper_bound(op.m));
        }
        if (k < 1 || m < 1)
            throw Error("hopper: MMA operand " + name + " has no constant bound on its extents");
        t.data = {k, m};
        t.role = {0, 1};
        t.on_chip = true;
        t.swizzled = true;
        t.dynamic_layout = true;
        return {k, m};
    }

    void mma_tiles(Accumulator &acc) {
        if (acc.a.empty())
            return;
        Tile &a = plan.tiles.at(acc.a), &b = plan.tiles.at(acc.b);
        std::vector<int64_t> ra = operand_roles(a), rb = operand_roles(b);
        auto matrix_dims = [](const Tile &t) {
            return std::count_if(t.role.begin(), t.role.end(), [](size_t r) { return r < 2; });
        };
        // A copy of one of A's matrix dims (M = 1 or K = 1): its strides cannot tell its layout,
        // but the copied dim is K where its extent is the MMAs' K, so A is K-major when that is
        // the tensor's dim 0.
        int64_t kk = 0;
        for (const ir::MmaOp &m : mmas) {
            if (m.acc == acc.buffer->name)
                kk = std::max(kk, constant_upper_bound(m.k));
        }
        if (matrix_dims(a) == 1) {
            const size_t copied =
                *std::find_if(a.role.begin(), a.role.end(), [](size_t r) { return r < 2; });
            const int64_t extent = ra[copied];
            acc.a_k_major = (extent > 1 && extent == kk) == (copied == 0);
        } else if (!a_layouts.count(acc.buffer->name)) {
            // No MMA tells (each has k = 1 or m = 1: a K tile of one): K is the dim whose extent
            // is the MMAs' K, dim 0 where both are.
            acc.a_k_major = ra[0] == kk || ra[1] != kk;
        }
        a.k_major = a.on_chip || acc.a_k_major;
        acc.a_k_major = a.k_major;
        const int64_t a_k = ra[a.k_major ? 0 : 1], a_m = ra[a.k_major ? 1 : 0];
        // A copy of one of B's matrix dims (K = 1 or N = 1): the same, from A's K.
        if (matrix_dims(b) == 1) {
            const bool copied_k = a_k > 1;
            const size_t copied =
                *std::find_if(b.role.begin(), b.role.end(), [](size_t r) { return r < 2; });
            acc.b_k_major = copied_k == (copied == 0);
        } else if (!b_layouts.count(acc.buffer->name) && (rb[0] == a_k) != (rb[1] == a_k)) {
            acc.b_k_major = rb[0] == a_k; // as A's, from the extents
        }
        b.k_major = acc.b_k_major;
        // wgmma reads 8-bit operands K-major only (tnspA and tnspB are for 16-bit types).
        for (const auto &[tile, side] :
             {std::pair{&a, "A as M x K: a(k, m)"},
              std::pair{&b, "B as N x K, as torch.nn.Linear's weight: b(k, n)"}}) {
            if (tile->buffer->type.bits() == 8 && !tile->k_major) {
                const std::string &name = tile->buffer->name;
                throw Error("not supported on hopper: wgmma takes the " +
                            type_text(tile->buffer->type) + " operand " +
                            name.substr(0, name.find('$')) + " with its K elements innermost (" +
                            side +
                            "); this tile is stored with K outermost, which wgmma "
                            "transposes for 16-bit types only: store it K-major (or cast it to "
                            "bf16 or f16)");
            }
        }
        const int64_t b_k = rb[b.k_major ? 0 : 1], b_n = rb[b.k_major ? 1 : 0];
        if (a_k != b_k) {
            throw Error("hopper: MMA operands " + acc.a + " (K = " + std::to_string(a_k) +
                        ") and " + acc.b + " (K = " + std::to_string(b_k) +
                        ") disagree on the K tile");
        }
        // wgmma tiles: K (and an N-major B's N) in column blocks of the 128B swizzle (64 bf16
        // or f16, 128 int8), M in 64-row wgmmas, a K-major B's N in 64-row blocks.
        const int64_t block = swizzle_bytes / a.buffer->type.bytes(); // elements per 128-byte row
        acc.k = round_up(a_k, block);
        acc.m = round_up(a_m, 64);
        acc.n = round_up(b_n, b.k_major ? 64 : block);
        a.layout =
            a.k_major ? std::vector<int64_t>{acc.k, acc.m} : std::vector<int64_t>{acc.m, acc.k};
        b.layout =
            b.k_major ? std::vector<int64_t>{acc.k, acc.n} : std::vector<int64_t>{acc.n, acc.k};
        for (Tile *t : {&a, &b}) { // a unit box along each batch dim
            if (!t->on_chip)
                t->layout.resize(kernel.arg(copies_of(t->buffer->name)[0]->arg)->extents.size(), 1);
        }
        for (Tile *t : {&a, &b}) {
            t->reach.clear();
            for (size_t d = 0; d < t->data.size(); d++)
                t->reach.push_back(t->layout[t->role[d]]);
            if (t->layout[1] > max_box && row_chunks(t->layout[1]) == 0) {
                throw Error("hopper: MMA operand " + t->buffer->name + " has " +
                            std::to_string(t->layout[1]) +
                            " rows, which do not split into equal TMA boxes of at most 256 rows "
                            "(8-row swizzle atoms each): use a smaller tile");
            }
        }
        if (acc.n > 256)
            throw Error("hopper: MMA tile N of " + acc.buffer->name + " is " +
                        std::to_string(acc.n) + "; wgmma takes at most 256");
        // Cooperative consumers hold every other 64-row block (the last one may have none).
        const int64_t sharing = kernel.consumer_warpgroups,
                      blocks = (acc.m / 64 + sharing - 1) / sharing;
        if (blocks * acc.n / 2 > max_accumulators) {
            throw Error("hopper: the " + std::to_string(acc.m) + " x " + std::to_string(acc.n) +
                        " accumulator " + acc.buffer->name + " needs " +
                        std::to_string(blocks * acc.n / 2) + " f32 registers per thread (at most " +
                        std::to_string(max_accumulators) + "): use a smaller MMA tile");
        }
        for (const ir::MmaOp &m : mmas) {
            if (m.acc != acc.buffer->name)
                continue;
            int64_t mm = constant_upper_bound(m.m), nn = constant_upper_bound(m.n),
                    kk = constant_upper_bound(m.k);
            if (mm < 0 || nn < 0 || kk < 0 || mm > acc.m || nn > acc.n || kk > acc.k) {
                throw Error("hopper: an MMA into " + m.acc + " is larger than its operand tiles " +
                            m.a + " and " + m.b);
            }
        }
    }

    // ---- plain tiles ----

    /** A row of `n` elements (a multiple of 16 bytes) wider than a box dim may be: boxes of 256
     * side by side (each lands 128-byte aligned), the last one as wide as what is left. */
    static void split_row(int64_t n, TileView *v) {
        v->blocks = int((n + max_box - 1) / max_box);
        v->box[0] = max_box;
        v->last = n - (v->blocks - 1) * max_box;
        if (v->last == max_box)
            v->last = 0;
    }

    /** A box wider than 256 elements with more than one row: the argument's dim 0 viewed as
     * {chunk, extent / chunk} so that one box covers the tile and lands in the same row-major
     * order; 0 with `why` set where no chunk divides both. */
    int64_t chunk_for(const CopyInfo &c, int64_t inner, const Expr &global_extent,
                      std::string *why) {
        const int64_t bytes = kernel.arg(c.arg)->type.bytes();
        const int64_t global = is_const(global_extent) ? *as_const_int(global_extent) : 0;
        if (!global) {
            *why = "its TMA box is " + std::to_string(inner) +
                   " elements wide (a box dim is at most 256) and " + c.arg +
                   "'s dim 0 is known only at run time, so it cannot be split into chunks";
            return 0;
        }
        int64_t chunk = 0;
        for (int64_t n = max_box; n >= 1 && !chunk; n--) {
            if (inner % n == 0 && global % n == 0 && (n * bytes) % 16 == 0 && inner / n <= max_box)
                chunk = n;
        }
        if (!chunk) {
            *why = "its TMA box is " + std::to_string(inner) +
                   " elements wide (a box dim is at most 256) and cannot be split into equal "
                   "chunks of " +
                   c.arg + "'s dim 0 (" + std::to_string(global) + ")";
            return 0;
        }
        for (const CopyInfo *other : copies_of(c.buffer)) {
            ModulusRemainder mr = modulus_remainder(simplify(bounded(other->global_offset())));
            if (mr.modulus % chunk != 0 || mr.remainder % chunk != 0) {
                *why = "its TMA box is " + std::to_string(inner) +
                       " elements wide; it is split into chunks of " + std::to_string(chunk) +
                       ", which needs tile offsets in " + c.arg + " that are multiples of " +
                       std::to_string(chunk);
                return 0;
            }
        }
        return chunk;
    }

    /** Chooses how the copies of a plain tile view their tensors: the tensor's own dims with the
     * box row rounded up to 16 bytes, else (a global stride TMA cannot take, or a wide box that
     * cannot be split) whole rows of the tensor viewed as one dim, else thread copies. */
    void plain_tile(const std::string &name, Tile &tile) {
        std::string why, ignored;
        if (natural_view(name, tile, false, &why))
            return;
        for (size_t j = 1; j < tile.data.size(); j++) {
            if (merged_view(name, tile, j))
                return;
        }
        if (natural_view(name, tile, true, &ignored))
            return;
        to_threads(tile, why);
    }

    /** The tensor's own dims. A box row wider than 256 elements is split: into boxes side by
     * side (a tile of one row), into chunks of the tensor's dim 0 (one box for the whole tile),
     * else, with `row_boxes`, into boxes of {256, 1}, a row of them per tile row. */
    bool natural_view(const std::string &name, Tile &tile, bool row_boxes, std::string *why) {
        const int64_t bytes = tile.buffer->type.bytes(), g = std::max<int64_t>(1, 16 / bytes);
        std::vector<const CopyInfo *> mine = copies_of(name);
        for (const CopyInfo *c : mine) {
            std::vector<KernelArg::Dim> view = kernel.arg(c->arg)->copy_view();
            for (size_t d = 1; d < view.size(); d++) {
                if (!tma_stride(*c, view[d], d, why))
                    return false;
            }
        }
        TileView v;
        std::vector<int64_t> layout = tile.data;
        layout[0] = round_up(tile.data[0], g);
        if (layout[0] != tile.data[0]) {
            v.padding = "a TMA box row is a multiple of 16 bytes: rows of " +
                        std::to_string(tile.data[0]) + " become " + std::to_string(layout[0]);
        }
        bool one_row = true;
        for (size_t d = 1; d < layout.size(); d++) {
            one_row = one_row && layout[d] == 1;
            if (layout[d] > max_box) {
                *why = "its TMA box would have " + std::to_string(layout[d]) + " elements in dim " +
                       std::to_string(d) + "; a box dim is at most 256";
                return false;
            }
        }
        v.box = layout;
        if (layout[0] > max_box && one_row) {
            // One row: boxes of up to 256 elements side by side.
            split_row(layout[0], &v);
        } else if (layout[0] > max_box && row_boxes) {
            for (size_t d = 2; d < layout.size(); d++) {
                if (layout[d] != 1)
                    return false;
            }
            v.rows = int(layout[1]);
            v.box.assign(layout.size(), 1);
            split_row(layout[0], &v);
            tile.reach = layout;
            // Each row's boxes land 128-byte aligned: a row pitch of a multiple of 128 bytes.
            layout[0] = round_up(layout[0], 128 / std::min<int64_t>(bytes, 128));
            tile.layout = layout;
            views[name] = v;
            return true;
        } else if (layout[0] > max_box) {
            for (const CopyInfo *c : mine) {
                if (v.chunk.count(c->arg))
                    continue;
                int64_t chunk =
                    chunk_for(*c, layout[0], kernel.arg(c->arg)->copy_view()[0].extent, why);
                if (!chunk)
                    return false;
                v.chunk[c->arg] = chunk;
            }
        }
        tile.layout = layout;
        tile.reach = layout;
        views[name] = v;
        return true;
    }

    /** The view's dims 0..j as one: every copy covers dims below j whole, from coordinate 0, so
     * the tile's rows are consecutive elements of the tensor. */
    bool merged_view(const std::string &name, Tile &tile, size_t j) {
        const int64_t bytes = tile.buffer->type.bytes(), g = std::max<int64_t>(1, 16 / bytes);
        std::vector<const CopyInfo *> mine = copies_of(name);
        std::vector<KernelArg::Dim> first = kernel.arg(mine[0]->arg)->copy_view();
        int64_t below = 1; // elements of a whole row (dims 0..j-1)
        for (size_t d = 0; d <= j; d++) {
            if (!is_const(first[d].extent))
                return false; // whole rows of a runtime extent: no constant box
        }
        for (size_t d = 0; d < j; d++) {
            if (tile.data[d] != *as_const_int(first[d].extent))
                return false;
            below *= *as_const_int(first[d].extent);
        }
        for (const CopyInfo *c : mine) {
            std::vector<KernelArg::Dim> view = kernel.arg(c->arg)->copy_view();
            for (size_t d = 0; d <= j; d++) {
                if (!proven(view[d].extent == first[d].extent))
                    return false;
            }
            for (size_t d = 0; d < j; d++) {
                if (!proven(c->op.dims[d].extent == view[d].extent))
                    return false;
            }
            ModulusRemainder mr = modulus_remainder(simplify(bounded(c->global_offset())));
            if (mr.modulus % below != 0 || mr.remainder % below != 0)
                return false;
            // A box of the merged view starts on a 16-byte boundary: an H200 faults (illegal
            // instruction) on one that does not (rows of 257 f32 two at a time,
            // gpu_hopper_v15_h200).
            if ((mr.modulus * bytes) % 16 != 0 || (mr.remainder * bytes) % 16 != 0)
                return false;
            for (size_t d = j + 1; d < view.size(); d++) {
                if (!proven(view[d].stride * Expr(int(bytes)) % 16 == 0))
                    return false;
            }
        }
        bool rest_one = true;
        for (size_t d = j + 1; d < tile.data.size(); d++) {
            rest_one = rest_one && tile.data[d] == 1;
            if (tile.data[d] > max_box)
                return false;
        }
        TileView v;
        v.merged = j;
        const int64_t data = below * tile.data[j];
        int64_t inner = round_up(data, g);
        if (inner != data && !rest_one)
            return false; // the padded rows would not stay row-major
        v.box = {inner};
        for (size_t d = j + 1; d < tile.data.size(); d++)
            v.box.push_back(tile.data[d]);
        if (inner > max_box) {
            if (rest_one) {
                split_row(inner, &v);
            } else {
                std::string why;
                for (const CopyInfo *c : mine) {
                    if (v.chunk.count(c->arg))
                        continue;
                    int64_t chunk =
                        chunk_for(*c, inner, simplify(Expr(int(below)) * first[j].extent), &why);
                    if (!chunk)
                        return false;
                    v.chunk[c->arg] = chunk;
                }
            }
        }
        tile.layout = tile.data;
        tile.reach = tile.data;
        if (inner != data) {
            tile.layout[j] = tile.reach[j] = (inner + below - 1) / below;
            v.padding = "the rows of " + mine[0]->arg + " are not a multiple of 16 bytes, so its " +
                        "tiles are copied as whole rows, in boxes of " + std::to_string(inner) +
                        " elements for tiles of " + std::to_string(data);
        }
        views[name] = v;
        return true;
    }

    void check_layout(const CopyInfo &c) {
        const KernelArg *arg = kernel.arg(c.arg);
        Tile &tile = plan.tiles[c.buffer];
        if (tile.threads())
            return; // threads follow the copy's own strides
        std::vector<KernelArg::Dim> view = arg->copy_view();
        for (size_t d = 0; d < c.op.dims.size(); d++) {
            if (!proven(c.global_stride(d) == view[d].stride) &&
                !proven(c.op.dims[d].extent == 1)) {
                throw Error("hopper: " + copy_text(c) + " dim " + std::to_string(d) +
                            " does not step through " + c.arg + " with its stride " +
                            user_text(view[d].stride) + "; TMA boxes follow the tensor's dims");
            }
        }
        if (tile.kind != TileKind::Plain)
            return;
        std::vector<Expr> pitch = pitches(c);
        for (size_t d = 0; d < pitch.size(); d++) {
            bool stepped = false; // a later dim of the tile has more than one row
            for (size_t e = d + 1; e < tile.data.size(); e++)
                stepped = stepped || tile.data[e] > 1;
            if (stepped && !proven(pitch[d] == Halide::Expr(int(tile.layout[d]))))
                tile.dynamic_layout = true;
        }
        if (!pitch.empty() && !proven(c.op.dims[1].extent == 1)) { // (one row has no pitch)
            const int64_t largest = constant_upper_bound(pitch[0]);
            tile.stmt_pitch = std::max(tile.stmt_pitch, largest);
            tile.stmt_pitches.insert(largest);
        }
    }

    /** Where a copy's box reaches past its own extent, that part must lie past the tensor's edge
     * when it matters: a store would overwrite the neighbouring tile, and along K a wgmma would
     * multiply real data. Loads into plain tiles and the M / N rows of operands only bring
     * elements nobody reads (rows and columns of the accumulator the epilogue skips). Where the
     * padding cannot be proven to lie past the edge and is not checked at run time (a tail tile),
     * the tile is copied by threads, which copy the data and zero-fill the rest. */
    void check_edges(const CopyInfo &c) {
        Tile &tile = plan.tiles.at(c.buffer);
        if (tile.threads())
            return;
        std::vector<KernelArg::Dim> view = kernel.arg(c.arg)->copy_view();
        for (size_t d = 0; d < c.op.dims.size(); d++) {
            const int64_t reach = tile.reach[d];
            if (proven(c.op.dims[d].extent == Halide::Expr(int(reach))))
                continue;
            // K is layout dim 0 of a K-major operand (A, a K-major B), dim 1 of an N-major B.
            bool along_k = tile.kind != TileKind::Plain && tile.role[d] == (tile.k_major ? 0u : 1u);
            if ((c.load && !along_k) ||
                (is_const(view[d].extent) && c.min_end[d] >= *as_const_int(view[d].extent)))
                continue;
            if (reach > tile.data[d]) {
                return to_threads(tile, "its box would reach " + std::to_string(reach) +
                                            " elements along dim " + std::to_string(d) +
                                            " for tiles of " + std::to_string(tile.data[d]) +
                                            ", in the middle of " + c.arg +
                                            (along_k ? " (along K, where padding must be zero)"
                                                     : " (a store would overwrite the next tile)"));
            }
            const std::vector<int64_t> &proven =
                ends_at_reads(c) ? c.tail_reach_read : c.tail_reach;
            if (prove_tails && d < proven.size() && proven[d] == reach)
                continue; // proven at compile time: the check would always pass
            const Expr edge = ends_at_reads(c) ? read_edges(c)[d] : view[d].extent;
            plan.tail_checks[c.node].push_back(
                {d, reach, view[d].extent, view[d].stride, d + 1 == view.size(), edge});
        }
    }

    /** Element code reads and writes a tile whose Stmt rows differ from the GPU's (a tail's
     * shorter pitch) where map_tile_index places each access on the full tile. Where it cannot
     * tell the rows (a nest that could be rows of more than one of the tile's pitches, one row
     * with nothing to tell its pitch), the tile is copied by threads and keeps the Stmt's layout
     * instead. */
    void place_elements(const VectorInfo &v) {
        for (const ir::Region &r : v.op.regions) {
            auto t = plan.tiles.find(r.buffer);
            if (t == plan.tiles.end() || t->second.kind != TileKind::Plain ||
                !t->second.dynamic_layout || t->second.on_chip)
                continue;
            AccessesOf of(r.buffer);
            v.nest.accept(&of);
            for (size_t i = 0; i < of.found.size(); i++) {
                try {
                    map_tile_index(t->second, of.found[i].first, of.found_loops[i]);
                } catch (const Error &e) {
                    to_threads(t->second, std::string("its element code's places on the "
                                                      "full tile cannot be told (") +
                                              e.what() + ")");
                    break;
                }
            }
        }
    }

    void check_vector_op(const VectorInfo &v) {
        const Accumulator *epilogue = nullptr; // the accumulator whose fragments it reads
        for (const ir::Region &r : v.op.regions) {
            if (!r.write && plan.accumulators.count(r.buffer))
                epilogue = &plan.accumulators.at(r.buffer);
        }
        for (const ir::Region &r : v.op.regions) {
            auto t = plan.tiles.find(r.buffer);
            // The epilogue walks its accumulator's fragments, writing zeros past the nest's
            // extents: they must cover the operand's padded wgmma tile ({K, M}: its n and m).
            if (t != plan.tiles.end() && t->second.on_chip && r.write && epilogue &&
                (epilogue->n != t->second.layout[0] || epilogue->m != t->second.layout[1])) {
                throw Error("hopper: the MMA operand " + r.buffer + " made on chip is a " +
                            std::to_string(t->second.layout[1]) + " x " +
                            std::to_string(t->second.layout[0]) +
                            " wgmma tile, but the epilogue that writes it walks the " +
                            std::to_string(epilogue->m) + " x " + std::to_string(epilogue->n) +
                            " tile of " + epilogue->buffer->name +
                            ": give both matmuls the same tile along the operand's M and K");
            }
            // An element nest that reads no accumulator may write the operand where an
            // accumulator has its tile: the emitter walks that accumulator's fragments (softmax's
            // P from the scores' exponentials in shared memory).
            const bool walks_fragments =
                r.write && !epilogue && !plan.fragments_of(r.buffer).empty();
            if (t != plan.tiles.end() && t->second.on_chip && (!r.write || !epilogue) &&
                !walks_fragments) {
                const std::string name = r.buffer.substr(0, r.buffer.find('$'));
                throw Error("not supported on hopper: Func " + name +
                            " is a matmul's operand made on chip, which element code writes "
                            "element by element over the tile of an earlier matmul (walking "
                            "its wgmma fragments, as a chain's act(h) or softmax's P) and only "
                            "wgmma may read; here " +
                            v.op.label + " " + (r.write ? "writes" : "reads") + " it" +
                            (r.write ? ", and no matmul of the kernel has its tile (give the "
                                       "matmuls the same tile along the operand's M and K)"
                                     : ""));
            }
            if (t != plan.tiles.end() && t->second.kind != TileKind::Plain && !t->second.on_chip) {
                throw Error(
                    "hopper: vector op " + v.op.label + " touches MMA operand " + r.buffer +
                    ", which is a 128B-swizzled wgmma tile on the GPU; only TMA may write it");
            }
        }
    }

    // ---- tensor maps ----

    void make_maps() {
        std::map<std::string, int> maps_per_arg;
        std::set<std::tuple<std::string, std::string, bool>> seen;
        for (const CopyInfo &c : copies) {
            if (!plan.tiles.at(c.buffer).threads() && seen.insert({c.arg, c.buffer, c.load}).second)
                maps_per_arg[c.arg]++;
        }
        seen.clear();
        for (const CopyInfo &c : copies) {
            if (!seen.insert({c.arg, c.buffer, c.load}).second)
                continue;
            const KernelArg *arg = kernel.arg(c.arg);
            const Tile &tile = plan.tiles.at(c.buffer);
            if (arg->type != tile.buffer->type) {
                throw Error("hopper: " + copy_text(c) +
                            " converts types; copies move bytes (make " + "both " +
                            type_text(arg->type) + ")");
            }
            if (tile.threads())
                continue;
            TensorMap m;
            m.arg = c.arg;
            m.buffer = c.buffer;
            m.load = c.load;
            m.type = arg->type;
            m.name =
                c_name(c.arg) +
                (maps_per_arg[c.arg] > 1 ? "_" + c_name(c.buffer) + (c.load ? "_load" : "_store")
                                         : "") +
                "_tensor_map";
            if (tile.kind == TileKind::Plain)
                plain_map(m, c, tile);
            else
                operand_map(m, c, tile);
            if (m.extents.size() > 5)
                throw Error("hopper: the TMA view of " + c.arg + " has rank " +
                            std::to_string(m.extents.size()) + "; TMA takes at most 5");
            internal_assert((m.box[0] * m.type.bytes()) % 16 == 0)
                << "hopper emitter: the box of " << m.name << " has a row of "
                << m.box[0] * m.type.bytes() << " bytes\n";
            for (size_t d = 0; d < m.box.size(); d++) {
                internal_assert(m.box[d] >= 1 && m.box[d] <= max_box)
                    << "hopper emitter: the box of " << m.name << " has " << m.box[d]
                    << " elements in dim " << d << "\n";
            }
            for (size_t d = 1; d < m.extents.size(); d++) {
                Expr stride = simplify(m.strides[d] * m.type.bytes());
                if (is_const_one(m.extents[d]) && as_const_int(stride))
                    stride = Expr(int(round_up(std::max<int64_t>(*as_const_int(stride), 16), 16)));
                else if (is_const_one(m.extents[d])) // a runtime stride past a dim of one
                    stride = simplify((max(stride, 16) + 15) / 16 * 16);
                else if (!is_const(m.extents[d])) // a runtime extent of 1: still a legal stride
                    stride = select(m.extents[d] == 1, (stride + 15) / 16 * 16, stride);
                internal_assert(!is_const(stride) || proven(stride % 16 == 0))
                    << "hopper emitter: tensor map " << m.name << " has a global stride of "
                    << stride << " bytes\n";
                m.byte_strides.push_back(stride);
            }
            if (m.bounds.empty())
                m.bounds = m.extents;
            plan.maps.push_back(m);
        }
    }

    void plain_map(TensorMap &m, const CopyInfo &c, const Tile &tile) {
        const TileView &v = views.at(c.buffer);
        std::vector<KernelArg::Dim> view = kernel.arg(c.arg)->copy_view();
        Expr merged = 1;
        for (size_t d = 0; d <= v.merged; d++)
            merged = simplify(merged * view[d].extent);
        m.extents = {merged};
        m.strides = {1};
        for (size_t d = v.merged + 1; d < view.size(); d++) {
            m.extents.push_back(view[d].extent);
            m.strides.push_back(view[d].stride);
        }
        m.box = v.box;
        if (v.merged)
            m.view = "dims 0.." + std::to_string(v.merged) + " as one (whole rows)";
        m.blocks = v.blocks;
        m.block_bytes = v.box[0] * m.type.bytes();
        if (v.rows > 1) {
            m.rows = v.rows;
            m.row_bytes = tile.layout[0] * m.type.bytes();
        }
        if (v.last) {
            m.last_box = v.last;
            m.last_name = m.name.substr(0, m.name.size() - std::string("_tensor_map").size()) +
                          "_last_tensor_map";
        }
        if (tile.swizzled) {
            // Column blocks of 128 bytes, each a {128 bytes, rows} box with the 128B swizzle.
            const int64_t block = swizzle_bytes / m.type.bytes();
            m.swizzle = true;
            m.blocks = int(tile.layout[0] / block);
            m.box = {block, tile.layout[1]};
            m.box.resize(m.extents.size(), 1); // a unit box along each batch dim
            m.block_bytes = swizzle_bytes * tile.layout[1];
            return;
        }
        auto chunk = v.chunk.find(c.arg);
        if (chunk != v.chunk.end()) {
            m.chunk = chunk->second;
            m.extents.insert(m.extents.begin(), Expr(int(m.chunk)));
            m.extents[1] = simplify(merged / Expr(int(m.chunk)));
            m.strides.insert(m.strides.begin() + 1, Expr(int(m.chunk)));
            m.box.insert(m.box.begin(), m.chunk);
            m.box[1] = v.box[0] / m.chunk;
        }
    }

    /** A 2-D tile (any dims past the second of one element) TMA moves one box wide, rows of whole
     * 128-byte blocks and a multiple of 8 rows
     * (the swizzle atom), held swizzled (Tile::swizzled) where that spares bank conflicts: a
     * source only TMA stores read, or a tile only TMA loads write that element code reads down
     * its columns (read_down_columns), each of its accesses then placed in the swizzled blocks. */
    void swizzle(const std::string &name, Tile &tile) {
        if (tile.kind != TileKind::Plain || !tile.tma() || tile.threads())
            return;
        const bool store = plan.store_sources.count(name);
        for (const CopyInfo *c : copies_of(name)) {
            if (c->load == store)
                return;
        }
        const int64_t bytes = tile.buffer->type.bytes();
        auto v = views.find(name);
        // (Dims past the second of one element each: a batch's or a head's, as 2-D.)
        const bool two_d =
            tile.layout.size() >= 2 && std::all_of(tile.layout.begin() + 2, tile.layout.end(),
                                                   [](int64_t e) { return e == 1; });
        if (!two_d || (bytes != 2 && bytes != 4) || (tile.layout[0] * bytes) % swizzle_bytes != 0 ||
            tile.layout[1] % 8 != 0 || tile.layout[1] > max_box || v == views.end() ||
            v->second.merged || v->second.rows > 1 || v->second.last || v->second.blocks > 1 ||
            !v->second.chunk.empty() || (!store && !read_down_columns(name, tile)))
            return;
        tile.swizzled = true;
        if (store)
            return;
        for (const VectorInfo &vi : vector_ops) {
            AccessesOf of(name);
            vi.nest.accept(&of);
            for (size_t i = 0; i < of.found.size(); i++) {
                try {
                    map_tile_index(tile, of.found[i].first, of.found_loops[i]);
                } catch (const Error &) {
                    tile.swizzled = false;
                    return;
                }
            }
        }
    }

    /** Whether element code over shared tiles (not an epilogue) reads the tile with a warp's
     * lanes 128 bytes or more apart: down its columns, one bank row-major. */
    bool read_down_columns(const std::string &name, const Tile &tile) {
        for (const VectorInfo &v : vector_ops) {
            bool reads = false, epilogue = false;
            for (const ir::Region &r : v.op.regions) {
                reads = reads || (!r.write && r.buffer == name);
                epilogue = epilogue || plan.accumulators.count(r.buffer);
            }
            if (!reads || epilogue)
                continue;
            const TileNest n = map_tile_nest(plan, v.nest, 128);
            const std::vector<Loop> &lanes =
                n.kind == TileNest::Kind::ThreadPerElement ? n.strided : n.loops;
            if (n.kind == TileNest::Kind::Serial || lanes.empty())
                continue;
            AccessesOf of(name);
            n.body.accept(&of);
            for (const auto &[index, loops] : of.found) {
                const Expr step = affine_step(index, lanes.back().name);
                const int64_t largest = step.defined() ? constant_upper_bound(step) : -1;
                if (largest * tile.buffer->type.bytes() >= swizzle_bytes)
                    return true;
            }
        }
        return false;
    }

    /** A tile no copy touches whose rows are whole 128-byte lines (f32 or bf16) and which an
     * epilogue walks in a wgmma fragment's order, 8 rows per warp access: in the Stmt's layout
     * those 8 rows fall in the same 4 banks (an 8-way conflict on every access: the online
     * attention's output state and exps, gpu_hopper_notes.md "Session 45"). Its rows get 32 bytes
     * more on the GPU (a pair of columns then lands in 32 distinct banks per half warp): the
     * tile's element nests are rewritten to that layout (Tile::dynamic_layout). Only where every
     * access is rows of one constant pitch and columns of step 1 from a version's start. */
    void pad_rows(const std::string &name, Tile &tile) {
        const int64_t bytes = tile.buffer->type.bytes();
        if (tile.kind != TileKind::Plain || tile.tma() || tile.threads() || tile.on_chip ||
            (bytes != 2 && bytes != 4))
            return;
        int64_t pitch = 0;
        bool fragments = false;
        for (const VectorInfo &v : vector_ops) {
            bool touches = false;
            for (const ir::Region &r : v.op.regions)
                touches = touches || r.buffer == name;
            if (!touches)
                continue;
            const Plan::FragmentUse::Kind use = plan.fragment_use(v.op, v.nest).kind;
            fragments = fragments || use == Plan::FragmentUse::Kind::Epilogue ||
                        use == Plan::FragmentUse::Kind::Operand;
            AccessesOf of(name);
            v.nest.accept(&of);
            for (const auto &[index, loops] : of.found) {
                Expr base = index;
                bool column = false, row = false;
                for (const std::string &l : loops) {
                    Expr step = lower::affine_step(index, l);
                    const int64_t *k = step.defined() ? as_const_int(simplify(step)) : nullptr;
                    if (!k)
                        return;
                    if (*k == 1 && !column) {
                        column = true;
                    } else if (*k > 1 && !row && (pitch == 0 || pitch == *k)) {
                        row = true, pitch = *k;
                    } else if (*k != 0) {
                        return;
                    }
                    base = substitute(l, 0, base);
                }
                Expr within;
                version_of(tile, simplify(base), &within);
                if (!is_const_zero(within))
                    return;
            }
        }
        const int64_t slot = tile.buffer->slot_elements;
        if (!fragments || pitch == 0 || (pitch * bytes) % swizzle_bytes != 0 || slot % pitch != 0 ||
            slot / pitch < 8)
            return;
        tile.layout = {pitch + 32 / bytes, slot / pitch};
        tile.dynamic_layout = true;
        tile.stmt_pitch = pitch;
        tile.stmt_pitches = {pitch};
    }

    /** Undoes pad_rows; false if it padded nothing. */
    /** Loaded tiles held swizzled only to spare bank conflicts (`swizzle`) go back to rows. */
    bool unswizzle_loads() {
        bool any = false;
        for (auto &[name, tile] : plan.tiles) {
            if (tile.swizzled && tile.kind == TileKind::Plain && !plan.store_sources.count(name)) {
                tile.swizzled = false;
                any = true;
            }
        }
        return any;
    }

    bool unpad_rows() {
        bool any = false;
        for (auto &[name, tile] : plan.tiles) {
            if (tile.kind == TileKind::Plain && !tile.tma() && tile.dynamic_layout) {
                tile.layout.clear();
                tile.dynamic_layout = false;
                tile.stmt_pitch = 0;
                tile.stmt_pitches.clear();
                any = true;
            }
        }
        return any;
    }

    /** A swizzled store source of more than two column blocks, written only by accumulator
     * epilogues, each stored by one copy (one per role or loop copy): a ring of two column
     * blocks (Tile::ring_blocks). */
    void column_block_ring(const std::string &name, Tile &tile) {
        if (!tile.swizzled || tile.layout[0] * tile.buffer->type.bytes() <= 2 * swizzle_bytes)
            return;
        int epilogues = 0, writers = 0, stores = 0;
        for (const VectorInfo &v : vector_ops) {
            bool writes = false, reads_accumulator = false;
            for (const ir::Region &r : v.op.regions) {
                writes = writes || (r.write && r.buffer == name);
                reads_accumulator =
                    reads_accumulator || (!r.write && plan.accumulators.count(r.buffer));
            }
            writers += writes;
            epilogues += writes && reads_accumulator;
        }
        for (const CopyInfo &c : copies)
            stores += c.buffer == name && !c.load;
        if (writers > 0 && epilogues == writers && stores == writers)
            tile.ring_blocks = 2;
    }

    void operand_map(TensorMap &m, const CopyInfo &c, const Tile &tile) {
        const KernelArg *arg = kernel.arg(c.arg);
        for (const KernelArg::Dim &d : operand_view(arg)) {
            m.extents.push_back(d.extent);
            m.strides.push_back(d.stride);
        }
        if (c.load) {
            m.bounds = m.extents;
            for (size_t d = 0; d < m.bounds.size() && d < arg->read_extents.size(); d++) {
                if (arg->read_extents[d].defined())
                    m.bounds[d] = arg->read_extents[d];
            }
        }
        if (arg->copy_view().size() != m.extents.size())
            m.view = "with its dims of extent 1, for a 2-D wgmma tile";
        // Column blocks of 64 bf16: one 128B-swizzled {64, rows} box each.
        const int64_t block = swizzle_bytes / m.type.bytes();
        m.swizzle = true;
        m.blocks = int(tile.layout[0] / block);
        m.box = {block, tile.layout[1]};
        m.box.resize(m.extents.size(), 1); // a unit box along each batch dim
        m.block_bytes = swizzle_bytes * tile.layout[1];
        if (tile.layout[1] > max_box) {
            // More rows than a box dim takes: equal boxes of rows, stacked in each column block.
            m.rows = row_chunks(tile.layout[1]);
            m.row_step = tile.layout[1] / m.rows;
            m.box[1] = m.row_step;
            m.row_bytes = swizzle_bytes * m.row_step;
        }
    }

    /** The equal chunks an operand's `rows` split into for TMA boxes of at most 256 rows, each a
     * whole number of 8-row swizzle atoms (so each starts 1024-byte aligned); 0 if none. */
    static int row_chunks(int64_t rows) {
        for (int64_t n = (rows + max_box - 1) / max_box; n <= rows / 8; n++) {
            if (rows % n == 0 && (rows / n) % 8 == 0)
                return int(n);
        }
        return 0;
    }

    // ---- shared memory ----

    /** The emitter's own layout: each buffer in the Kernel's order, versions of the full padded
     * tile, 1024-byte aligned for wgmma tiles (the 128B swizzle atom) and 128-byte aligned for
     * the rest (TMA boxes). */
    void shared_memory() {
        int64_t end = 0;
        for (const SramBuffer &b : kernel.buffers) {
            auto it = plan.tiles.find(b.name);
            if (it == plan.tiles.end())
                continue;
            Tile &tile = it->second;
            const int64_t align =
                tile.kind == TileKind::Plain && !tile.swizzled ? 128 : swizzle_atom_bytes;
            int64_t slot = b.slot_elements * b.type.bytes();
            if (tile.tma()) {
                int64_t box = b.type.bytes();
                for (int64_t e : tile.layout)
                    box *= e;
                slot = round_up(std::max(slot, box), align);
            }
            if (tile.ring_blocks)
                slot = tile.ring_blocks * swizzle_bytes * tile.layout[1];
            if (!tile.tma() && tile.dynamic_layout) // rows padded (pad_rows)
                slot = tile.layout[0] * tile.layout[1] * b.type.bytes();
            tile.offset_bytes = round_up(end, align);
            tile.slot_bytes = slot;
            end = tile.offset_bytes + slot * b.slots;
        }
        plan.shared_bytes = end;
        for (const BarrierDecl &b : kernel.barriers) {
            if (b.slots > 32)
                throw Error("hopper: mbarrier " + b.name +
                            " has more than 32 versions (phase bits are one word)");
        }
        int64_t total =
            plan.shared_bytes + swizzle_atom_bytes + 8 * int64_t(kernel.barriers.size()) * 32 + 64;
        if (total > max_shared_bytes) {
            // (The model's plan fitted: its sizes are the buffers' own, here each is aligned for
            // TMA and the swizzle, and the mbarriers take their place too.)
            const SramBuffer *largest = nullptr;
            int64_t largest_bytes = 0;
            for (const SramBuffer &b : kernel.buffers) {
                auto it = plan.tiles.find(b.name);
                const int64_t bytes = it == plan.tiles.end() ? 0 : it->second.slot_bytes * b.slots;
                if (bytes > largest_bytes)
                    largest = &b, largest_bytes = bytes;
            }
            const std::string who = largest ? "Func '" + user_text(largest->name) + "' (" +
                                                  std::to_string(largest_bytes) + " bytes in " +
                                                  std::to_string(largest->slots) +
                                                  " version(s), the largest): "
                                            : std::string();
            throw Error(who +
                        "shared memory overflow on hopper - laid out for the GPU (TMA "
                        "boxes and swizzled tiles on their boundaries, " +
                        std::to_string(kernel.barriers.size()) + " mbarriers) the kernel needs " +
                        std::to_string(total) + " bytes, a CTA has " +
                        std::to_string(max_shared_bytes) + "; use smaller tiles or fewer stages");
        }
    }
};

} // namespace

namespace {

/** The terms of a sum (differences as negated terms). */
void terms_of(const Expr &e, std::vector<Expr> *terms) {
    if (const Add *a = e.as<Add>()) {
        terms_of(a->a, terms), terms_of(a->b, terms);
    } else if (const Sub *s = e.as<Sub>()) {
        terms_of(s->a, terms);
        std::vector<Expr> negated;
        terms_of(s->b, &negated);
        for (const Expr &t : negated)
            terms->push_back(simplify(0 - t));
    } else {
        terms->push_back(e);
    }
}

} // namespace

Expr version_of(const Tile &tile, const Expr &offset, Expr *within) {
    const int64_t slot_elements = tile.buffer->slot_elements;
    const Expr slot = Halide::Expr(int(slot_elements));
    Expr version = tile.buffer->slots > 1 ? simplify(offset / slot) : Halide::Expr(0);
    *within = simplify(offset - version * slot);
    if (!lower::has_division(*within))
        return version;
    // Where the simplifier cannot bound the part within the version (a tail's offset, bounded
    // only by promise_clamped): the terms that are multiples of a slot make the version, if the
    // rest provably lies within one slot.
    std::vector<Expr> terms;
    terms_of(offset, &terms);
    Expr whole = 0, rest = 0;
    for (const Expr &t : terms) {
        const Mul *m = t.as<Mul>();
        const int64_t *c = m ? as_const_int(m->b) : nullptr;
        if (c && *c % slot_elements == 0)
            whole = whole + m->a * int(*c / slot_elements);
        else
            rest = rest + t;
    }
    rest = simplify(rest);
    const std::optional<int64_t> low = lower::constant_lower_bound(rest);
    if (low && *low >= 0 && constant_upper_bound(rest) < slot_elements &&
        constant_upper_bound(rest) >= 0) {
        *within = rest;
        return simplify(whole);
    }
    return version;
}

std::vector<std::string> pitch_classes(const Plan &plan) {
    std::vector<std::string> classes;
    for (const std::string &pitch : plan.launch_pitches) {
        if (std::find(classes.begin(), classes.end(), pitch) == classes.end())
            classes.push_back(pitch);
    }
    return classes;
}

unsigned failing_pitches(const Plan &plan, const std::vector<std::string> &classes,
                         const std::function<bool(size_t)> &holds) {
    unsigned mask = 0;
    for (size_t i = 0; i < plan.launch_pitches.size(); i++) {
        const size_t c =
            std::find(classes.begin(), classes.end(), plan.launch_pitches[i]) - classes.begin();
        if (!holds(i))
            mask |= 1u << c;
    }
    return mask;
}

StridePolicy stride_policy(const std::vector<std::string> &classes, unsigned failing) {
    for (size_t c = 0; c < classes.size(); c++) {
        if (classes.size() > 1 && failing == 1u << c)
            return StridePolicy::threads({classes[c]});
    }
    return StridePolicy::threads();
}

bool Plan::zeroes(const Stmt &nest, const std::string &buffer) {
    bool zero = true;
    struct Stores : IRVisitor {
        const std::string &buffer;
        bool &zero;
        Stores(const std::string &b, bool &z) : buffer(b), zero(z) {}
        using IRVisitor::visit;
        void visit(const Store *op) override {
            zero = zero && (op->name != buffer || is_const_zero(op->value));
        }
    } stores(buffer, zero);
    nest.accept(&stores);
    return zero;
}

Plan plan_kernel(const Kernel &kernel, const StridePolicy &strides, bool prove_tails) {
    return Planner(kernel, strides, prove_tails).run();
}

int cta_threads(const Kernel &kernel) {
    const int sharing = kernel.warpgroups > 1 ? kernel.consumer_warpgroups : 1;
    return kernel.warpgroups == 1 ? warpgroup_threads * kernel.consumer_warpgroups
                                  : warpgroup_threads * (1 + (kernel.warpgroups - 1) * sharing);
}

int64_t register_floor(const Kernel &kernel) {
    // The producer decreases on its one warpgroup, a consumer role increases on all of its.
    int64_t total = 0;
    for_each_op(kernel.body, [&](const Stmt &op) {
        int registers = 0;
        bool increase = false;
        if (ir::as_setmaxnreg(op, &registers, &increase))
            total += int64_t(registers) * warpgroup_threads *
                     (increase ? kernel.consumer_warpgroups : 1);
    });
    const int64_t threads = cta_threads(kernel);
    return (total + threads * 8 - 1) / (threads * 8) * 8;
}

int64_t launch_shared_bytes(const Kernel &kernel, const Plan &plan) {
    int64_t bytes = plan.shared_bytes + swizzle_atom_bytes;
    for (const BarrierDecl &b : kernel.barriers)
        bytes += 8 * int64_t(b.slots);
    return bytes + 16 * (cta_threads(kernel) / warpgroup_threads);
}

} // namespace tandem::hopper_backend
