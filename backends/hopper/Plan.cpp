#include "Plan.h"

#include "lower/Nest.h"

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
        "a_descriptor", "a_tile", "args", "b_descriptor", "b_tile", "box", "cols",
        "dynamic_shared_memory", "elected", "element", "extents", "hopper", "i", "k16", "m64",
        "offset", "partial", "reduction_scratch", "rows", "shared", "shared_bytes", "slot",
        "status", "stream", "strides", "thread_in_warpgroup", "total", "warpgroup", "x", "y",
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
    std::ostringstream s;
    s << t;
    return s.str();
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

using lower::constant_upper_bound;

struct CopyInfo {
    ir::CopyOp op;
    bool load = true;
    std::string arg, buffer;
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

class Planner {
public:
    explicit Planner(const Kernel &k) : kernel(k) {}

    Plan run() {
        for (const SramBuffer &b : kernel.buffers) {
            if (b.in_registers)
                plan.accumulators[b.name].buffer = &b;
            else
                plan.tiles[b.name].buffer = &b;
        }
        for_each_op(kernel.body, [&](const Stmt &s) { visit(s); });
        for (CopyInfo &c : copies)
            place_box(c);
        for (CopyInfo &c : copies)
            check_layout(c);
        for (auto &[name, acc] : plan.accumulators)
            mma_tiles(acc);
        for (const VectorInfo &v : vector_ops)
            check_vector_op(v);
        make_maps();
        for (const CopyInfo &c : copies) {
            if (!c.load)
                continue;
            auto &seen = expect_buffers[c.op.barrier];
            if (seen.insert(c.buffer).second)
                plan.expect_bytes[c.op.barrier] += plan.map(c.arg, c.buffer, true).box_bytes();
        }
        shared_memory();
        return std::move(plan);
    }

private:
    struct VectorInfo {
        ir::VectorOp op;
        Stmt nest;
    };

    const Kernel &kernel;
    Plan plan;
    std::vector<CopyInfo> copies;
    std::vector<ir::MmaOp> mmas;
    std::vector<VectorInfo> vector_ops;
    std::map<std::string, std::set<std::string>> expect_buffers;

    void visit(const Stmt &s) {
        ir::CopyOp c;
        ir::MmaOp m;
        ir::VectorOp v;
        Stmt body;
        std::string counter;
        ir::WaitOp w;
        if (ir::as_wait(s, &w)) {
            if (!w.parity.defined())
                plan.phase_bits.insert(w.barrier);
        } else if (ir::as_copy(s, &c)) {
            CopyInfo info{c, kernel.arg(c.src) != nullptr, "", ""};
            info.arg = info.load ? c.src : c.dst;
            info.buffer = info.load ? c.dst : c.src;
            if (!kernel.arg(info.arg) || !plan.tiles.count(info.buffer)) {
                throw Error("hopper: " + copy_text(info) +
                            " is not between a kernel argument and a shared buffer; "
                            "TMA moves boxes between global and shared memory only");
            }
            if (!info.load)
                plan.store_sources.insert(info.buffer);
            copies.push_back(info);
        } else if (ir::as_mma(s, &m)) {
            mma(m);
        } else if (ir::as_vector_op(s, &v, &body)) {
            vector_ops.push_back({v, body});
        } else if (ir::as_advance(s, &counter)) {
            plan.counters.insert(counter);
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
        if (!a->buffer->type.is_bfloat() || !b->buffer->type.is_bfloat() ||
            !acc->second.buffer->type.is_float() || acc->second.buffer->type.bits() != 32) {
            throw Error("hopper: the MMA " + m.acc + " += " + m.a + " * " + m.b +
                        " must be bf16 x bf16 -> f32 (the wgmma this emitter issues)");
        }
        if (!proven(m.a_stride_k == 1))
            throw Error("hopper: MMA operand " + m.a +
                        " must be K-major (a(k, m) with k innermost)");
        if (!proven(m.b_stride_n == 1))
            throw Error("hopper: MMA operand " + m.b +
                        " must be N-major (b(n, k) with n innermost)");
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
        info.a = m.a;
        info.b = m.b;
        mmas.push_back(m);
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

    void place_box(const CopyInfo &c) {
        const KernelArg *arg = kernel.arg(c.arg);
        Tile &tile = plan.tiles[c.buffer];
        if (c.op.dims.size() != arg->copy_view().size()) {
            throw Error("hopper: " + copy_text(c) + " has " + std::to_string(c.op.dims.size()) +
                        " dims but " + c.arg + " has " + std::to_string(arg->copy_view().size()) +
                        "; a TMA box has the tensor's rank");
        }
        if (tile.box.empty())
            tile.box.assign(c.op.dims.size(), 0);
        if (tile.box.size() != c.op.dims.size())
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
            tile.box[d] = std::max(tile.box[d], bound);
        }
    }

    void check_layout(const CopyInfo &c) {
        const KernelArg *arg = kernel.arg(c.arg);
        Tile &tile = plan.tiles[c.buffer];
        std::vector<KernelArg::Dim> view = arg->copy_view();
        std::vector<Expr> pitch = pitches(c);
        for (size_t d = 0; d < c.op.dims.size(); d++) {
            int64_t arg_stride = view[d].stride;
            if (!proven(c.global_stride(d) == Halide::Expr(int(arg_stride))) &&
                !proven(c.op.dims[d].extent == 1)) {
                throw Error("hopper: " + copy_text(c) + " dim " + std::to_string(d) +
                            " does not step through " + c.arg + " with its stride " +
                            std::to_string(arg_stride) + "; TMA boxes follow the tensor's dims");
            }
            if (d < pitch.size() && !proven(pitch[d] == Halide::Expr(int(tile.box[d]))))
                tile.dynamic_layout = true;
        }
    }

    void mma_tiles(Accumulator &acc) {
        if (acc.a.empty())
            return;
        const Tile &a = plan.tiles.at(acc.a), &b = plan.tiles.at(acc.b);
        const int64_t block = swizzle_bytes / 2; // bf16 elements per 128-byte row
        for (const Tile *t : {&a, &b}) {
            if (t->box.size() != 2) {
                throw Error("hopper: MMA operand " + t->buffer->name +
                            " must be loaded by a 2-D TMA copy (it has " +
                            std::to_string(t->box.size()) + " copied dims)");
            }
            if (t->box[0] % block != 0) {
                throw Error("hopper: MMA operand " + t->buffer->name +
                            " has an inner tile dim of " + std::to_string(t->box[0]) +
                            " elements; with the 128B swizzle it must be a multiple of 64 bf16 "
                            "(use a tile of 64, 128, ...)");
            }
            if (t->box[1] > max_box) {
                throw Error("hopper: MMA operand " + t->buffer->name + " has " +
                            std::to_string(t->box[1]) +
                            " rows; a TMA box dim is at most 256: use a smaller tile");
            }
        }
        acc.k = a.box[0];
        acc.m = a.box[1];
        acc.n = b.box[0];
        if (b.box[1] != acc.k) {
            throw Error("hopper: MMA operands " + acc.a + " (K = " + std::to_string(acc.k) +
                        ") and " + acc.b + " (K = " + std::to_string(b.box[1]) +
                        ") disagree on the K tile");
        }
        if (acc.m % 64 != 0)
            throw Error("hopper: MMA tile M of " + acc.buffer->name + " is " +
                        std::to_string(acc.m) + "; wgmma needs a multiple of 64");
        if (acc.n > 256)
            throw Error("hopper: MMA tile N of " + acc.buffer->name + " is " +
                        std::to_string(acc.n) + "; wgmma takes at most 256");
        if (acc.m / 64 * acc.n / 2 > max_accumulators) {
            throw Error("hopper: the " + std::to_string(acc.m) + " x " + std::to_string(acc.n) +
                        " accumulator " + acc.buffer->name + " needs " +
                        std::to_string(acc.m / 64 * acc.n / 2) +
                        " f32 registers per thread (at most " + std::to_string(max_accumulators) +
                        "): use a smaller MMA tile");
        }
        if (acc.m * acc.n > acc.buffer->slot_elements) {
            internal_error << "hopper emitter: accumulator " << acc.buffer->name
                           << " is smaller than its MMA tile\n";
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

    void check_vector_op(const VectorInfo &v) {
        for (const ir::Region &r : v.op.regions) {
            auto t = plan.tiles.find(r.buffer);
            if (t != plan.tiles.end() && t->second.kind != TileKind::Plain) {
                throw Error(
                    "hopper: vector op " + v.op.label + " touches MMA operand " + r.buffer +
                    ", which is a 128B-swizzled wgmma tile on the GPU; only TMA may write it");
            }
        }
    }

    void make_maps() {
        std::map<std::string, int> maps_per_arg;
        std::set<std::tuple<std::string, std::string, bool>> seen;
        for (const CopyInfo &c : copies) {
            if (seen.insert({c.arg, c.buffer, c.load}).second)
                maps_per_arg[c.arg]++;
        }
        seen.clear();
        for (const CopyInfo &c : copies) {
            if (!seen.insert({c.arg, c.buffer, c.load}).second)
                continue;
            const KernelArg *arg = kernel.arg(c.arg);
            const Tile &tile = plan.tiles.at(c.buffer);
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
            if (arg->type != tile.buffer->type) {
                throw Error("hopper: " + copy_text(c) +
                            " converts types; TMA copies bytes (make both " + type_text(arg->type) +
                            ")");
            }
            const int64_t bytes = arg->type.bytes();
            for (const KernelArg::Dim &d : arg->copy_view())
                m.extents.push_back(d.extent);
            m.box = tile.box;
            if (tile.kind != TileKind::Plain) {
                // Column blocks of 64 bf16: one 128B-swizzled {64, rows} box each.
                m.swizzle = true;
                m.blocks = int(tile.box[0] / (swizzle_bytes / bytes));
                m.box[0] = swizzle_bytes / bytes;
                m.block_bytes = swizzle_bytes * tile.box[1];
            } else if (tile.box[0] > max_box) {
                split_inner(m, c, tile);
            }
            if ((m.box[0] * bytes) % 16 != 0) {
                throw Error("hopper: the TMA box of " + c.buffer + " has an inner dim of " +
                            std::to_string(m.box[0] * bytes) +
                            " bytes; it must be a multiple of 16 bytes");
            }
            for (size_t d = 0; d < m.box.size(); d++) {
                if (m.box[d] > max_box) {
                    throw Error("hopper: the TMA box of " + c.buffer + " has " +
                                std::to_string(m.box[d]) + " elements in dim " + std::to_string(d) +
                                "; a box dim is at most 256: use a smaller tile");
                }
            }
            if (m.extents.size() > 5)
                throw Error("hopper: the TMA view of " + c.arg + " has rank " +
                            std::to_string(m.extents.size()) + "; TMA takes at most 5");
            int64_t stride = 1;
            for (size_t d = 0; d < m.extents.size(); d++) {
                m.strides.push_back(stride);
                if (d > 0 && (stride * bytes) % 16 != 0) {
                    throw Error(
                        "hopper: " + c.arg + " has a global stride of " +
                        std::to_string(stride * bytes) + " bytes in dim " + std::to_string(d) +
                        "; TMA needs global strides that are multiples of 16 bytes (pad the row "
                        "to " +
                        std::to_string((stride * bytes + 15) / 16 * 16 / bytes) + " elements)");
                }
                stride *= m.extents[d];
            }
            if (m.box_bytes() > tile.buffer->slot_elements * bytes) {
                throw Error("hopper: the full TMA box of " + c.buffer + " (" +
                            std::to_string(m.box_bytes()) +
                            " bytes) does not fit a version of the buffer (" +
                            std::to_string(tile.buffer->slot_elements * bytes) + " bytes)");
            }
            plan.maps.push_back(m);
        }
    }

    /** A box wider than 256 elements: view the argument's dim 0 as {chunk, extent / chunk} so
     * that one box covers the tile and lands in the same row-major order. */
    void split_inner(TensorMap &m, const CopyInfo &c, const Tile &tile) {
        const int64_t bytes = m.type.bytes(), inner = tile.box[0], global = m.extents[0];
        int64_t chunk = 0;
        for (int64_t n = max_box; n >= 1 && !chunk; n--) {
            if (inner % n == 0 && global % n == 0 && (n * bytes) % 16 == 0 && inner / n <= max_box)
                chunk = n;
        }
        if (!chunk) {
            throw Error("hopper: the TMA box of " + c.buffer + " is " + std::to_string(inner) +
                        " elements wide (a box dim is at most 256) and cannot be split into equal "
                        "chunks of " +
                        c.arg + "'s dim 0 (" + std::to_string(global) +
                        "): use a tile width of at most 256");
        }
        for (const CopyInfo &other : copies) {
            if (other.arg != c.arg || other.buffer != c.buffer || other.load != c.load)
                continue;
            ModulusRemainder mr =
                modulus_remainder(simplify(lower::core_id_as_variable(other.global_offset())));
            if (mr.modulus % chunk != 0 || mr.remainder % chunk != 0) {
                throw Error("hopper: the TMA box of " + c.buffer + " is " + std::to_string(inner) +
                            " elements wide; it is split into chunks of " + std::to_string(chunk) +
                            ", which needs tile offsets in " + c.arg + " that are multiples of " +
                            std::to_string(chunk));
            }
        }
        m.chunk = chunk;
        m.extents.insert(m.extents.begin(), chunk);
        m.extents[1] = global / chunk;
        m.box.insert(m.box.begin(), chunk);
        m.box[1] = inner / chunk;
    }

    void shared_memory() {
        for (const auto &[name, tile] : plan.tiles) {
            const SramBuffer &b = *tile.buffer;
            plan.shared_bytes = std::max(plan.shared_bytes, b.offset_bytes + b.bytes());
            if (tile.box.empty())
                continue;
            int64_t align = tile.kind == TileKind::Plain ? 128 : swizzle_atom_bytes;
            int64_t slot_bytes = b.slot_elements * b.type.bytes();
            if (b.offset_bytes % align != 0 || (b.slots > 1 && slot_bytes % align != 0)) {
                throw Error(
                    "hopper: shared buffer " + name + " (at byte " +
                    std::to_string(b.offset_bytes) + ", " + std::to_string(slot_bytes) +
                    " bytes per version) is not " + std::to_string(align) + "-byte aligned; " +
                    (tile.kind == TileKind::Plain ? "TMA tiles" : "128B-swizzled wgmma tiles") +
                    " need it");
            }
        }
        for (const BarrierDecl &b : kernel.barriers) {
            if (b.slots > 32)
                throw Error("hopper: mbarrier " + b.name +
                            " has more than 32 versions (phase bits are one word)");
        }
        int64_t total =
            plan.shared_bytes + swizzle_atom_bytes + 8 * int64_t(kernel.barriers.size()) * 32 + 64;
        if (total > max_shared_bytes) {
            throw Error("hopper: the kernel needs " + std::to_string(total) +
                        " bytes of shared memory; a CTA has at most " +
                        std::to_string(max_shared_bytes) + ": use fewer stages or smaller tiles");
        }
    }
};

} // namespace

Plan plan_kernel(const Kernel &kernel) {
    return Planner(kernel).run();
}

} // namespace tandem::hopper_backend
