#include "Emitter.h"

#include "Cube.h"

#include "common/CExpr.h"
#include "common/Evaluator.h"
#include "common/Library.h"
#include "sim/Ascend.h"
#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace tandem::ascend_backend {

using namespace Halide::Internal;
using sim::ascend::Mem;

namespace {

/** AscendC's element type of a buffer. */
const char *element_type(sim::DType t) {
    switch (t) {
    case sim::DType::BF16:
        return "bfloat16_t";
    case sim::DType::F16:
        return "half";
    case sim::DType::F32:
        return "float";
    case sim::DType::I32:
        return "int32_t";
    case sim::DType::U8:
    case sim::DType::E4M3: // FP8 bits (the 910B's cube takes no FP8: tile_mma refuses it)
    case sim::DType::E5M2:
        return "uint8_t";
    case sim::DType::I8:
        return "int8_t";
    }
    return "?";
}

const char *position_of(Mem m, bool feeds_l0b) {
    switch (m) {
    case Mem::UB:
        return "AscendC::TPosition::VECCALC";
    case Mem::L1:
        return feeds_l0b ? "AscendC::TPosition::B1" : "AscendC::TPosition::A1";
    case Mem::L0A:
        return "AscendC::TPosition::A2";
    case Mem::L0B:
        return "AscendC::TPosition::B2";
    case Mem::L0C:
        return "AscendC::TPosition::CO1";
    case Mem::GM:
        break;
    }
    internal_error << "ascend emitter: a TBuf in GM\n";
    return "?";
}

std::string hard_event(const ir::FlagOp &f) {
    return "AscendC::HardEvent::" + f.src + "_" + f.dst;
}

// ---------------------------------------------------------------------------------------------
// Flag pairs: the enumeration documented in Emitter.h
// ---------------------------------------------------------------------------------------------

struct FlagStatement {
    bool set = false;
    ir::FlagOp op; // event simplified
};

/** Every flag statement in program-text order (the order the emitter walks the Stmt in). */
class FlagStatements : public IRVisitor {
public:
    std::vector<FlagStatement> found;

private:
    using IRVisitor::visit;
    void visit(const Evaluate *e) override {
        ir::FlagOp f;
        Stmt s = e;
        bool set = ir::as_set_flag(s, &f);
        if (set || ir::as_wait_flag(s, &f)) {
            f.event = simplify(f.event);
            found.push_back({set, f});
        }
    }
};

struct Pairs {
    std::vector<FlagStatement> statements;
    std::vector<std::pair<int, int>> pairs; // (set statement, wait statement), by set position
};

Pairs pair_flags(const Stmt &body) {
    FlagStatements visitor;
    body.accept(&visitor);
    Pairs p;
    p.statements = visitor.found;
    auto same_key = [](const ir::FlagOp &a, const ir::FlagOp &b) {
        return a.src == b.src && a.dst == b.dst && equal(a.event, b.event);
    };
    for (size_t i = 0; i < p.statements.size(); i++) {
        if (!p.statements[i].set)
            continue;
        // The rank of this set among the sets of its key, then the wait of the same rank.
        int rank = 0;
        for (size_t j = 0; j < i; j++) {
            rank += p.statements[j].set && same_key(p.statements[j].op, p.statements[i].op);
        }
        for (size_t j = 0; j < p.statements.size(); j++) {
            if (p.statements[j].set || !same_key(p.statements[j].op, p.statements[i].op))
                continue;
            if (rank-- == 0) {
                p.pairs.push_back({int(i), int(j)});
                break;
            }
        }
    }
    return p;
}

// ---------------------------------------------------------------------------------------------
// Code generation
// ---------------------------------------------------------------------------------------------

class CodeGen {
public:
    CodeGen(const Kernel &k, const std::set<int> &dropped, const std::map<int, int> &pair_of)
        : kernel(k), dropped(dropped), pair_of(pair_of) {
        class Counters : public IRVisitor {
        public:
            std::set<std::string> names;

        private:
            using IRVisitor::visit;
            void visit(const Evaluate *e) override {
                std::string counter;
                if (ir::as_advance(Stmt(e), &counter))
                    names.insert(counter);
            }
        } counters;
        k.body.accept(&counters);
        ring_counters = counters.names;
        class Feeds : public IRVisitor {
        public:
            std::set<std::string> l0b_sources;
            const Kernel &k;
            explicit Feeds(const Kernel &k) : k(k) {}

        private:
            using IRVisitor::visit;
            void visit(const Evaluate *e) override {
                ir::CopyOp c;
                const SramBuffer *dst = nullptr;
                if (ir::as_copy(Stmt(e), &c) && (dst = k.buffer(c.dst)) &&
                    dst->ascend_mem == Mem::L0B) {
                    l0b_sources.insert(c.src);
                }
            }
        } feeds(k);
        k.body.accept(&feeds);
        feeds_l0b = feeds.l0b_sources;
    }

    /** AscendC's C++ expressions (CExpr.h): C++'s / and % where the operands are provably >= 0
     * (else the file's floor_div / floor_mod), helpers' arguments without outer parentheses, bf16
     * values through AscendC::ToBfloat16 / ToFloat, half values through static_cast, loads through
     * GetValue, the core id as block_idx. */
    class AscendExpr : public CExpr {
    public:
        explicit AscendExpr(CodeGen &g) : g(g) {}

    private:
        CodeGen &g;
        const char *target() const override { return "ascend"; }
        std::string rounded(const Halide::Type &t, const std::string &v) const override {
            if (t.is_bfloat())
                return "AscendC::ToFloat(AscendC::ToBfloat16(" + v + "))";
            if (t.is_float() && t.bits() == 16)
                return "static_cast<float>(static_cast<half>(" + v + "))";
            return v;
        }
        std::string argument(const Expr &e) override { return print_bare(e); }
        std::string div(const Div *d) override {
            const bool integer = d->type.is_int() || d->type.is_uint();
            if (integer && g.nonnegative_expr(d->a) && positive_constant(d->b))
                return binary(d->type, d->a, d->b, "/");
            return CExpr::div(d);
        }
        std::string mod(const Mod *m) override {
            const bool integer = m->type.is_int() || m->type.is_uint();
            if (integer && g.nonnegative_expr(m->a) && positive_constant(m->b))
                return binary(m->type, m->a, m->b, "%");
            return CExpr::mod(m);
        }
        std::string load(const Load *l) override {
            std::string v = g.tensor(l->name) + ".GetValue(" + print_bare(l->index) + ")";
            if (l->type.is_bfloat())
                return "AscendC::ToFloat(" + v + ")";
            return l->type.is_float() && l->type.bits() == 16 ? "static_cast<float>(" + v + ")" : v;
        }
        std::string call(const Call *c) override {
            if (ir::is_core_id(c)) {
                g.uses_block_idx = true;
                return "block_idx";
            }
            return CExpr::call(c);
        }
        std::string unknown_call(const Call *c) override {
            throw Error("the Ascend vector unit has no instruction for " + c->name +
                        " (the emitter knows sqrt, exp, log, floor, ceil, tanh and abs)");
        }
    };

    std::ostringstream os;
    int indent = 1;
    std::set<std::string> feeds_l0b;
    bool uses_block_idx = false; // tandem_core_id() appears: declare block_idx = GetBlockIdx()
    AscendExpr expr{*this};
    /** expr() without the parentheses around the whole (for arguments, indices, conditions). */
    std::string arg(const Expr &e) { return expr.print_bare(e); }

    /** TPipe and the TBuf carve-outs at the kernel's offsets (of one kind's memories: a mix
     * kernel's side), then pipe.Destroy(). */
    void tpipe(std::optional<sim::ascend::CoreKind> kind) {
        os << line() << "// on-chip buffers: TBuf carve-outs at the kernel's offsets\n"
           << line() << "AscendC::TPipe pipe;\n";
        std::map<Mem, int64_t> used;
        for (const SramBuffer &b : kernel.buffers) {
            if (kind && !sim::ascend::has_memory(*kind, b.ascend_mem))
                continue;
            int64_t align =
                sim::ascend::AscendParams::from(kernel.target.lookup()).alignment(b.ascend_mem);
            int64_t start = (used[b.ascend_mem] + align - 1) / align * align;
            internal_assert(start == b.offset_bytes)
                << "ascend emitter: " << b.name << " is at byte " << b.offset_bytes << " of "
                << sim::ascend::mem_name(b.ascend_mem)
                << " but TPipe::InitBuffer in buffer order places it at " << start << "\n";
            used[b.ascend_mem] = start + b.bytes();
            std::string n = c_name(b.name);
            const char *t = element_type(dtype_of(b.type));
            os << line() << "AscendC::TBuf<"
               << position_of(b.ascend_mem, feeds_l0b.count(b.name) > 0) << "> " << n << "_buf; // "
               << sim::ascend::mem_name(b.ascend_mem) << " [" << start << ", " << start + b.bytes()
               << "): " << b.name << ", " << b.slots << (b.slots == 1 ? " version" : " versions")
               << " x " << b.slot_elements << " " << t << "\n"
               << line() << "pipe.InitBuffer(" << n << "_buf, " << b.bytes() << ");\n"
               << line() << "AscendC::LocalTensor<" << t << "> " << n << " = " << n << "_buf.Get<"
               << t << ">();\n";
        }
        // TPipe reserves M_MTE1 events 0..2 on the AIC (set in its constructor); the kernel's own
        // flags may use any id, so it gives them back first, as catlass and tilelang-ascend do.
        os << line()
           << "pipe.Destroy(); // TPipe's reserved events (M_MTE1 0..2 on the AIC) waited for: "
              "every "
              "event id is the kernel's\n\n";
    }

    /** A side of a mix kernel: its own TPipe and buffers, then its code. */
    void side(bool aiv, const Stmt &body) {
        os << line() << "if " << (aiv ? "ASCEND_IS_AIV" : "ASCEND_IS_AIC") << " {\n";
        indent++;
        tpipe(aiv ? sim::ascend::CoreKind::AIV : sim::ascend::CoreKind::AIC);
        sequence(body);
        indent--;
        os << line() << "}\n";
    }

    /** Emits `s` as the statements of the current C++ scope. */
    void sequence(const Stmt &s, bool top_level = false) {
        std::vector<Item> items;
        std::set<std::string> declared;
        flatten(s, items, true, declared);
        emit_items(items, top_level);
    }

    /** A GM tensor: an argument or a workspace. */
    const KernelArg *global(const std::string &buffer) const {
        if (const KernelArg *a = kernel.arg(buffer))
            return a;
        for (const KernelArg &w : kernel.workspaces)
            if (w.name == buffer)
                return &w;
        return nullptr;
    }

    Mem mem_of(const std::string &buffer) const {
        if (const SramBuffer *b = kernel.buffer(buffer))
            return b->ascend_mem;
        internal_assert(global(buffer)) << "ascend emitter: no buffer " << buffer << "\n";
        return Mem::GM;
    }

    sim::DType type_of(const std::string &buffer) const {
        if (const SramBuffer *b = kernel.buffer(buffer))
            return dtype_of(b->type);
        return dtype_of(global(buffer)->type);
    }

    std::string tensor(const std::string &buffer) const {
        return mem_of(buffer) == Mem::GM ? c_name(buffer) + "_gm" : c_name(buffer);
    }

    /** A flag statement as the file header and the mutation comments show it (Halide's names). */
    static std::string flag_text(bool set, const ir::FlagOp &f) {
        std::ostringstream s;
        s << simplify(f.event);
        std::string event = s.str();
        if (event.size() > 1 && event.front() == '(' && event.back() == ')')
            event = event.substr(1, event.size() - 2);
        return std::string(set ? "SetFlag<" : "WaitFlag<") + f.src + "_" + f.dst + ">(" + event +
               ")";
    }

private:
    const Kernel &kernel;
    const std::set<int> &dropped;
    const std::map<int, int> &pair_of; // flag statement -> its pair
    std::set<std::string> ring_counters;
    std::set<std::string> nonnegative; // integer variables known to be >= 0
    int flag_statement = 0; // the index of the next flag statement (same walk as pair_flags)

    std::string line() const { return std::string(4 * indent, ' '); }

    // ---- statements ----

    /** One entry of a statement list: a statement, or a let declared inline in the list. */
    struct Item {
        Stmt stmt;
        const LetStmt *let = nullptr; // inline declaration; its body follows in the list
    };

    /** Flattens Blocks and ProducerConsumers; a let whose body runs to the end of the list (and
     * whose name the list has not declared yet) becomes an inline declaration. */
    void flatten(const Stmt &s, std::vector<Item> &items, bool tail,
                 std::set<std::string> &declared) {
        if (const Block *b = s.as<Block>()) {
            flatten(b->first, items, false, declared);
            flatten(b->rest, items, tail, declared);
        } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            flatten(pc->body, items, tail, declared);
        } else if (const LetStmt *l = s.as<LetStmt>();
                   l && tail && !is_vector_op(s) && !declared.count(l->name)) {
            declared.insert(l->name);
            items.push_back({s, l});
            flatten(l->body, items, true, declared);
        } else {
            items.push_back({s, nullptr});
        }
    }

    static bool is_vector_op(const Stmt &s) {
        ir::VectorOp v;
        Stmt body;
        return ir::as_vector_op(s, &v, &body);
    }

    /** The pipe an item runs on ("" for scalar bookkeeping, "-" for nested control flow). */
    std::string pipe_of(const Item &item) {
        if (item.let)
            return "";
        const Stmt &s = item.stmt;
        ir::FlagOp f;
        ir::CopyOp c;
        ir::MmaOp m;
        std::string counter;
        if (ir::as_set_flag(s, &f))
            return f.src;
        if (ir::as_wait_flag(s, &f))
            return f.dst;
        if (ir::as_copy(s, &c))
            return copy_pipe(c);
        if (ir::as_mma(s, &m))
            return "M";
        if (is_vector_op(s))
            return "V";
        if (ir::as_advance(s, &counter))
            return "";
        Expr flag;
        if (ir::as_cross_core_set(s, &counter, &flag))
            return counter;
        if (ir::as_cross_core_wait(s, &flag))
            return "S";
        if (const Evaluate *e = s.as<Evaluate>(); e && is_const(e->value))
            return "";
        return "-";
    }

    std::string copy_pipe(const ir::CopyOp &c) const {
        Mem src = mem_of(c.src), dst = mem_of(c.dst);
        if (src == Mem::GM)
            return "MTE2";
        if (src == Mem::L1)
            return "MTE1";
        if (src == Mem::UB)
            return "MTE3";
        if (src == Mem::L0C)
            return "FIX";
        internal_error << "ascend emitter: no pipe copies " << sim::ascend::mem_name(src) << " -> "
                       << sim::ascend::mem_name(dst) << "\n";
        return "";
    }

    /** What an item does, for the phase comment ("" for flags and bookkeeping). */
    std::string describe(const Item &item) {
        ir::CopyOp c;
        ir::MmaOp m;
        ir::VectorOp v;
        Stmt body;
        if (item.let)
            return "";
        if (ir::as_copy(item.stmt, &c))
            return c.src + " -> " + c.dst;
        if (ir::as_mma(item.stmt, &m))
            return "Mmad " + m.acc + " += " + m.a + " * " + m.b;
        if (ir::as_vector_op(item.stmt, &v, &body))
            return "vector " + v.label;
        std::string pipe;
        Expr flag;
        if (ir::as_cross_core_set(item.stmt, &pipe, &flag))
            return "tell the other side (cross-core flag)";
        if (ir::as_cross_core_wait(item.stmt, &flag))
            return "wait for the other side (cross-core flag)";
        return "";
    }

    enum class Kind { Wait, Set, Work, None };

    Kind kind_of(const Item &item) {
        ir::FlagOp f;
        if (item.let)
            return Kind::None;
        if (ir::as_wait_flag(item.stmt, &f))
            return Kind::Wait;
        if (ir::as_set_flag(item.stmt, &f))
            return Kind::Set;
        return describe(item).empty() ? Kind::None : Kind::Work;
    }

    /** The end of the phase that starts at item `begin`: the items on its pipe (bookkeeping in
     * between belongs to it) in the order waits, work, sets; a phase of flags alone has one kind.
     */
    size_t phase_end(const std::vector<Item> &items, size_t begin) {
        std::string pipe = pipe_of(items[begin]);
        Kind first = kind_of(items[begin]);
        int stage = first == Kind::Work ? 1 : first == Kind::Set ? 2 : 0; // 0 waits, 1 work, 2 sets
        bool work = first == Kind::Work;
        size_t j = begin + 1;
        for (; j < items.size(); j++) {
            std::string p = pipe_of(items[j]);
            if (p.empty())
                continue;
            if (p != pipe)
                break;
            Kind k = kind_of(items[j]);
            if (k == Kind::Wait && stage > 1)
                break; // a new phase waits again
            if (k == Kind::Work && stage == 2)
                break; // work after the sets
            if (k == Kind::Set && !work && stage == 0)
                break; // waits alone, then sets alone
            if (k == Kind::Work)
                stage = 1, work = true;
            if (k == Kind::Set)
                stage = 2;
        }
        return j;
    }

    /** One comment per pipeline phase. */
    void emit_items(const std::vector<Item> &items, bool top_level) {
        bool work_before = false;
        size_t end = 0; // the end of the current phase
        for (size_t i = 0; i < items.size(); i++) {
            std::string pipe = pipe_of(items[i]);
            if (pipe == "-")
                end = i + 1; // control flow ends a phase
            if (!pipe.empty() && pipe != "-" && i >= end) {
                end = phase_end(items, i);
                os << line() << "// " << phase_comment(items, i, end, top_level, work_before)
                   << "\n";
            }
            Kind k = kind_of(items[i]);
            work_before = work_before || pipe == "-" || k == Kind::Work;
            item(items[i]);
        }
    }

    std::string phase_comment(const std::vector<Item> &items, size_t begin, size_t end,
                              bool top_level, bool work_before) {
        std::string pipe = pipe_of(items[begin]);
        std::vector<std::string> what;
        std::set<std::string> peers;
        bool sets = false, waits = false;
        for (size_t j = begin; j < end; j++) {
            ir::FlagOp f;
            if (ir::as_set_flag(items[j].stmt, &f))
                sets = true, peers.insert(f.dst);
            if (ir::as_wait_flag(items[j].stmt, &f))
                waits = true, peers.insert(f.src);
            std::string d = describe(items[j]);
            if (!d.empty() && (what.empty() || what.back() != d))
                what.push_back(d);
        }
        bool work_after = false;
        for (size_t j = end; j < items.size(); j++) {
            work_after = work_after || pipe_of(items[j]) == "-" ||
                         kind_of(items[j]) == Kind::Work || kind_of(items[j]) == Kind::Set;
        }
        std::string list;
        for (const std::string &p : peers)
            list += (list.empty() ? "" : ", ") + p;
        if (!what.empty()) {
            std::string text = pipe + ":";
            for (size_t k = 0; k < what.size(); k++)
                text += (k ? ", " : " ") + what[k];
            return text;
        }
        if (sets && top_level && !work_before)
            return "pre-arm (" + pipe + " -> " + list + "): every version starts free";
        if (waits && top_level && !work_after)
            return "drain (" + list + " -> " + pipe +
                   "): wait for the last release of every version";
        return pipe + (sets ? ": hand the version over to " : ": wait for ") + list;
    }

    void item(const Item &it) {
        if (it.let) {
            declare(it.let);
            return;
        }
        stmt(it.stmt);
    }

    void declare(const LetStmt *l) {
        bool ring = ring_counters.count(l->name) > 0;
        if (ring || nonnegative_expr(l->value))
            nonnegative.insert(l->name);
        else
            nonnegative.erase(l->name); // a name Halide reuses in another scope
        if (ring) {
            os << line() << "int64_t " << c_name(l->name) << " = " << arg(l->value)
               << "; // ring position\n";
        } else {
            os << line() << "const " << expr.type_name(l->value.type()) << " " << c_name(l->name)
               << " = " << arg(l->value) << ";\n";
        }
    }

    void stmt(const Stmt &s) {
        if (const For *f = s.as<For>()) {
            std::string v = c_name(f->name);
            bool known = nonnegative.count(f->name) > 0;
            if (nonnegative_expr(f->min))
                nonnegative.insert(f->name);
            const IntImm *min = f->min.as<IntImm>();
            if (min) {
                os << line() << "for (int64_t " << v << " = " << min->value << "; " << v << " < "
                   << (min->value == 0 ? arg(f->extent)
                                       : std::to_string(min->value) + " + " + expr(f->extent))
                   << "; " << v << "++) {\n";
            } else {
                os << line() << "for (int64_t " << v << " = " << arg(f->min) << ", " << v
                   << "_end = " << v << " + " << expr(f->extent) << "; " << v << " < " << v
                   << "_end; " << v << "++) {\n";
            }
            nested(f->body);
            os << line() << "}\n";
            if (!known)
                nonnegative.erase(f->name);
        } else if (const LetStmt *l = s.as<LetStmt>()) {
            ir::VectorOp v;
            Stmt body;
            if (ir::as_vector_op(s, &v, &body))
                return vector_op(v, body);
            os << line() << "{\n";
            indent++;
            declare(l);
            sequence(l->body);
            indent--;
            os << line() << "}\n";
        } else if (s.as<Block>() || s.as<ProducerConsumer>()) {
            sequence(s);
        } else if (const IfThenElse *i = s.as<IfThenElse>()) {
            const Not *aic = i->condition.as<Not>();
            if (ir::is_vector_core(i->condition) || (aic && ir::is_vector_core(aic->a))) {
                side(ir::is_vector_core(i->condition), i->then_case); // a mix kernel's side
                return;
            }
            os << line() << "if (" << arg(i->condition) << ") {\n";
            nested(i->then_case);
            if (i->else_case.defined()) {
                os << line() << "} else {\n";
                nested(i->else_case);
            }
            os << line() << "}\n";
        } else if (s.as<Evaluate>()) {
            intrinsic(s);
        } else {
            internal_error << "ascend emitter: unexpected statement\n" << s << "\n";
        }
    }

    void nested(const Stmt &s) {
        indent++;
        sequence(s);
        indent--;
    }

    void intrinsic(const Stmt &s) {
        ir::CopyOp c;
        ir::FlagOp f;
        ir::MmaOp m;
        ir::VectorInstruction vi;
        std::string counter;
        bool set = false;
        if (ir::as_copy(s, &c)) {
            copy(c);
        } else if ((set = ir::as_set_flag(s, &f)) || ir::as_wait_flag(s, &f)) {
            int index = flag_statement++;
            std::string text = flag_text(set, f);
            if (dropped.count(index)) {
                os << line() << "// mutation: flag pair " << pair_of.at(index)
                   << " dropped here: " << text << "\n";
                return;
            }
            os << line() << "AscendC::" << (set ? "SetFlag<" : "WaitFlag<") << hard_event(f) << ">("
               << arg(simplify(f.event)) << ");\n";
        } else if (ir::as_mma(s, &m)) {
            cube(cube_mma(kernel, m));
        } else if (ir::as_pipe_barrier(s, &counter)) {
            os << line() << "AscendC::PipeBarrier<PIPE_" << counter << ">();\n";
        } else if (ir::as_vector_instruction(s, &vi)) {
            vector_instruction(vi);
        } else if (ir::as_advance(s, &counter)) {
            os << line() << c_name(counter) << " += 1;\n";
        } else if (Expr flag; ir::as_cross_core_set(s, &counter, &flag)) {
            os << line() << "AscendC::CrossCoreSetFlag<2, PIPE_" << counter << ">("
               << arg(simplify(flag)) << ");\n";
        } else if (ir::as_cross_core_wait(s, &flag)) {
            os << line() << "AscendC::CrossCoreWaitFlag(" << arg(simplify(flag)) << ");\n";
        } else {
            const Evaluate *e = s.as<Evaluate>();
            internal_assert(is_const(e->value)) << "ascend emitter: unexpected op " << s << "\n";
        }
    }

    /** One of AscendC's vector instructions with its real signature (count or repeat form). */
    void vector_instruction(const ir::VectorInstruction &vi) {
        static const char *cmp[] = {"LT", "GT", "EQ", "LE", "GE", "NE"};
        if (vi.op == "Gather") {
            // The src tensor sized to the elements its lanes reach; the byte offsets are uint32_t
            // (computed as int32_t).
            const auto &[src, src_offset] = vi.srcs[0];
            const auto &[offsets, offsets_offset] = vi.srcs[1];
            os << line() << "{\n";
            indent++;
            os << line() << "AscendC::LocalTensor<float> window = " << at(src, src_offset) << ";\n"
               << line() << "window.SetSize(" << vi.gather_window << ");\n"
               << line() << "AscendC::Gather(" << at(vi.dst, vi.dst_offset) << ", window, "
               << at(offsets, offsets_offset) << ".ReinterpretCast<uint32_t>(), " << vi.gather_base
               << ", " << arg(vi.count) << ");\n";
            indent--;
            os << line() << "}\n";
            return;
        }
        os << line() << "AscendC::" << vi.op << "(" << at(vi.dst, vi.dst_offset);
        for (const auto &[buffer, offset] : vi.srcs)
            os << ", " << at(buffer, offset);
        if (vi.op == "Compare")
            os << ", AscendC::CMPMODE::" << cmp[vi.mode];
        if (vi.op == "Select")
            os << ", AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE";
        if (vi.op == "Cast")
            os << (vi.mode == 0 ? ", AscendC::RoundMode::CAST_NONE"
                                : ", AscendC::RoundMode::CAST_RINT");
        if (vi.scalar.defined())
            os << ", " << arg(vi.scalar);
        if (vi.count.defined()) {
            os << ", " << arg(vi.count) << ");\n";
            return;
        }
        auto stride = [&](size_t i, bool repeat) {
            return std::to_string(repeat ? vi.strides[i].second : vi.strides[i].first);
        };
        if (vi.op.rfind("WholeReduce", 0) == 0) {
            // (dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride[, order])
            os << ", " << arg(vi.mask) << ", " << arg(vi.repeats) << ", " << stride(0, true) << ", "
               << stride(1, false) << ", " << stride(1, true)
               << (vi.op == "WholeReduceSum" ? ");\n"
                                             : ", AscendC::ReduceOrder::ORDER_ONLY_VALUE);\n");
            return;
        }
        if (vi.op.rfind("BlockReduce", 0) == 0) {
            // (dst, src, repeatTime, mask, dstRepStride, srcBlkStride, srcRepStride)
            os << ", " << arg(vi.repeats) << ", " << arg(vi.mask) << ", " << stride(0, true) << ", "
               << stride(1, false) << ", " << stride(1, true) << ");\n";
            return;
        }
        if (vi.op == "Brcb") {
            os << ", " << arg(vi.repeats) << ", AscendC::BrcbRepeatParams(" << stride(0, false)
               << ", " << stride(0, true) << "));\n";
            return;
        }
        os << ", " << arg(vi.mask) << ", " << arg(vi.repeats);
        if (vi.srcs.size() == 2) {
            os << ", AscendC::BinaryRepeatParams(" << stride(0, false) << ", " << stride(1, false)
               << ", " << stride(2, false) << ", " << stride(0, true) << ", " << stride(1, true)
               << ", " << stride(2, true) << "));\n";
        } else {
            os << ", AscendC::UnaryRepeatParams(" << stride(0, false) << ", " << stride(1, false)
               << ", " << stride(0, true) << ", " << stride(1, true) << "));\n";
        }
    }

    std::string at(const std::string &buffer, const Expr &offset) {
        const IntImm *zero = offset.as<IntImm>();
        if (zero && zero->value == 0)
            return tensor(buffer);
        return tensor(buffer) + "[" + arg(offset) + "]";
    }

    /** The real cube instruction (Cube.h), as the executor records it. */
    void cube(const CubeCall &c) {
        switch (c.kind) {
        case CubeCall::Kind::Nd2Nz:
            os << line() << "AscendC::DataCopy(" << at(c.dst, c.dst_offset) << ", "
               << at(c.src, c.src_offset) << ", AscendC::Nd2NzParams(1, " << arg(c.n_value) << ", "
               << arg(c.d_value) << ", 0, " << arg(c.src_d_value) << ", " << arg(c.dst_nz_c0_stride)
               << ", 1, 0));\n";
            break;
        case CubeCall::Kind::LoadData:
        case CubeCall::Kind::LoadDataTranspose8: {
            const std::string i = c_name(cube_index());
            os << line() << "for (int64_t " << i << " = 0; " << i << " < " << expr.print(c.count)
               << "; " << i << "++) {\n";
            indent++;
            if (c.kind == CubeCall::Kind::LoadData) {
                os << line() << "AscendC::LoadData(" << at(c.dst, c.dst_offset) << ", "
                   << at(c.src, c.src_offset) << ", AscendC::LoadData2DParams("
                   << arg(c.start_index) << ", " << arg(c.repeat_times) << ", " << arg(c.src_stride)
                   << ", 0, " << arg(c.dst_gap) << ", " << (c.transpose ? "true" : "false")
                   << ", 0));\n";
            } else {
                os << line() << "AscendC::LoadData2dTransposeParams transpose;\n"
                   << line() << "transpose.startIndex = " << arg(c.start_index) << ";\n"
                   << line() << "transpose.repeatTimes = " << arg(c.repeat_times) << ";\n"
                   << line() << "transpose.srcStride = " << arg(c.src_stride) << ";\n"
                   << line() << "transpose.dstGap = " << arg(c.dst_gap) << ";\n"
                   << line() << "transpose.dstFracGap = " << arg(c.dst_frac_gap) << ";\n"
                   << line() << "AscendC::LoadDataWithTranspose(" << at(c.dst, c.dst_offset) << ", "
                   << at(c.src, c.src_offset) << ", transpose);\n";
            }
            indent--;
            os << line() << "}\n";
            break;
        }
        case CubeCall::Kind::Mmad:
            os << line() << "{\n";
            indent++;
            os << line() << "AscendC::MmadParams mmad;\n"
               << line() << "mmad.m = " << arg(c.m) << ";\n"
               << line() << "mmad.n = " << arg(c.n) << ";\n"
               << line() << "mmad.k = " << arg(c.k) << ";\n"
               << line() << "mmad.cmatrixInitVal = !(" << arg(c.accumulate) << ");\n"
               << line() << "AscendC::Mmad(" << at(c.dst, c.dst_offset) << ", "
               << at(c.src, c.src_offset) << ", " << at(c.src2, c.src2_offset) << ", mmad);\n";
            indent--;
            os << line() << "}\n";
            break;
        case CubeCall::Kind::Fixpipe: {
            const sim::DType out = type_of(c.dst);
            os << line() << "{\n";
            indent++;
            os << line() << "AscendC::FixpipeParamsV220 fixpipe;\n"
               << line() << "fixpipe.nSize = " << arg(c.n_size) << ";\n"
               << line() << "fixpipe.mSize = " << arg(c.m_size) << ";\n"
               << line() << "fixpipe.srcStride = " << arg(c.fix_src_stride) << ";\n"
               << line() << "fixpipe.dstStride = " << arg(c.dst_stride) << ";\n"
               << line() << "fixpipe.quantPre = AscendC::"
               << (out == sim::DType::BF16  ? "F322BF16"
                   : out == sim::DType::F16 ? "F322F16"
                                            : "NoQuant")
               << ";\n"
               << line() << "AscendC::Fixpipe<" << element_type(type_of(c.dst)) << ", "
               << element_type(type_of(c.src)) << ", AscendC::CFG_ROW_MAJOR>("
               << at(c.dst, c.dst_offset) << ", " << at(c.src, c.src_offset) << ", fixpipe);\n";
            indent--;
            os << line() << "}\n";
            break;
        }
        }
    }

    void copy(const ir::CopyOp &box) {
        if (is_cube_copy(kernel, box))
            return cube(cube_copy(kernel, box));
        ir::CopyOp c = box; // a dimension of one element says nothing: drop it
        c.dims.clear();
        for (const ir::CopyDim &d : box.dims)
            if (!is_const_one(d.extent))
                c.dims.push_back(d);
        if (c.dims.empty())
            c.dims.push_back({1, 1, 1});
        std::string head = line() + "AscendC::DataCopy(" + at(c.dst, c.dst_offset) + ", " +
                           at(c.src, c.src_offset) + ", ";
        // The box: AscendC's own forms where they say it exactly.
        {
            int64_t bytes = sim::bytes_of(type_of(c.dst));
            std::vector<int64_t> v;
            for (const ir::CopyDim &d : c.dims) {
                for (const Expr &e : {d.extent, d.dst_stride, d.src_stride}) {
                    const IntImm *i = e.as<IntImm>();
                    v.push_back(i ? i->value : -1);
                }
            }
            bool constant = std::find(v.begin(), v.end(), -1) == v.end();
            auto blocks = [&](int64_t elements) {
                return elements * bytes % 32 == 0 ? elements * bytes / 32 : -1;
            };
            if (constant && c.dims.size() == 1 && v[1] == 1 && v[2] == 1 && blocks(v[0]) > 0) {
                os << head << v[0] << ");\n";
                return;
            }
            if (constant && c.dims.size() == 2 && v[1] == 1 && v[2] == 1) {
                int64_t count = v[3], len = blocks(v[0]), dst_gap = blocks(v[4] - v[0]),
                        src_gap = blocks(v[5] - v[0]);
                auto fits = [](int64_t x, int64_t lo, int64_t hi) { return x >= lo && x <= hi; };
                if (fits(count, 1, 4095) && fits(len, 1, 65535) && fits(dst_gap, 0, 65535) &&
                    fits(src_gap, 0, 65535) && v[4] >= v[0] && v[5] >= v[0]) {
                    os << head << "AscendC::DataCopyParams(" << count << ", " << len << ", "
                       << src_gap << ", " << dst_gap << "));\n";
                    return;
                }
            }
        }
        if (copy_pad(c))
            return;
        throw Error("Func '" + c.dst.substr(0, c.dst.find('$')) +
                    "', directive async_copy(): on ascend the copy " + c.dst + " <- " + c.src +
                    " (" + std::to_string(c.dims.size()) + " dims, " +
                    sim::ascend::mem_name(mem_of(c.src)) + " -> " +
                    sim::ascend::mem_name(mem_of(c.dst)) +
                    ") has no AscendC form: DataCopy moves whole 32-byte blocks, DataCopyPad rows "
                    "of any length "
                    "into UB rows on 32-byte blocks");
    }

    /** Rows between GM and UB as DataCopyPad: each row any number of bytes, its UB rows on 32-byte
     * blocks (AscendRows.h pads them); false when the box is not such rows. */
    bool copy_pad(const ir::CopyOp &c) {
        const bool to_ub = mem_of(c.dst) == Mem::UB && mem_of(c.src) == Mem::GM;
        if (!to_ub && !(mem_of(c.dst) == Mem::GM && mem_of(c.src) == Mem::UB))
            return false;
        // Rows of one element (a column: its one dimension steps along neither side's rows) are
        // the box's one dimension as rows.
        const bool column = c.dims.size() == 1 && !(is_const_one(c.dims[0].dst_stride) &&
                                                    is_const_one(c.dims[0].src_stride));
        std::vector<ir::CopyDim> dims = c.dims;
        if (column)
            dims.insert(dims.begin(), ir::CopyDim{1, 1, 1});
        if (dims.empty() || dims.size() > 2 || !is_const_one(dims[0].dst_stride) ||
            !is_const_one(dims[0].src_stride))
            return false;
        const int64_t bytes = sim::bytes_of(type_of(c.dst)), per_block = 32 / bytes;
        const Expr ub_offset = to_ub ? c.dst_offset : c.src_offset;
        if (!can_prove(ub_offset % int(per_block) == 0))
            return false;
        const Expr w = dims[0].extent,
                   padded = simplify((w + int(per_block - 1)) / int(per_block) * int(per_block));
        Expr count = 1, gm_gap = 0, ub_gap = 0;
        if (dims.size() == 2) {
            const ir::CopyDim &r = dims[1];
            const Expr ub = to_ub ? r.dst_stride : r.src_stride,
                       gm = to_ub ? r.src_stride : r.dst_stride;
            auto at_least = [](const Expr &big, const Expr &small) {
                const int64_t *b = as_const_int(big);
                const int64_t bound = lower::constant_upper_bound(small);
                return can_prove(big >= small) || (b && bound >= 0 && *b >= bound);
            };
            // A GM row stride known only at run time is a tensor's extent (runtime shapes have
            // dense strides), at least the width of any box inside the tensor.
            if (!can_prove(ub % int(per_block) == 0) || !at_least(ub, padded) ||
                (is_const(gm) && !at_least(gm, w)))
                return false;
            count = r.extent;
            gm_gap = simplify((gm - w) * int(bytes));
            ub_gap = simplify((ub - padded) / int(per_block));
        }
        const std::string params = "AscendC::DataCopyExtParams(" + arg(simplify(count)) + ", " +
                                   arg(simplify(w * int(bytes))) + ", " +
                                   arg(to_ub ? gm_gap : ub_gap) + ", " +
                                   arg(to_ub ? ub_gap : gm_gap) + ", 0)";
        // A region a tile leaves empty (a window with no row) copies nothing, as the model.
        const Expr nonempty = simplify(count > 0 && w > 0);
        os << line() << (is_const_one(nonempty) ? "" : "if (" + arg(nonempty) + ") ")
           << "AscendC::DataCopyPad(" << at(c.dst, c.dst_offset) << ", " << at(c.src, c.src_offset)
           << ", " << params;
        if (to_ub)
            os << ", AscendC::DataCopyPadExtParams<" << element_type(type_of(c.dst))
               << ">(false, 0, 0, 0)";
        os << ");\n";
        return true;
    }

    void vector_op(const ir::VectorOp &v, const Stmt &body) {
        internal_assert(ir::is_vector_instructions(body))
            << "ascend emitter: the vector op " << v.label
            << " has no AscendC instructions (AscendVector.h)\n";
        sequence(body);
    }

    // ---- expressions ----

    /** True if the integer expression is provably >= 0 (then / and % by a positive constant are
     * C++'s operators; otherwise Halide's floor division needs the runtime's helpers). */
    bool nonnegative_expr(const Expr &e) const {
        if (const IntImm *i = e.as<IntImm>())
            return i->value >= 0;
        if (e.as<UIntImm>())
            return true;
        if (const Variable *v = e.as<Variable>())
            return nonnegative.count(v->name) > 0;
        if (const Add *a = e.as<Add>())
            return nonnegative_expr(a->a) && nonnegative_expr(a->b);
        if (const Mul *m = e.as<Mul>())
            return nonnegative_expr(m->a) && nonnegative_expr(m->b);
        if (const Min *m = e.as<Min>())
            return nonnegative_expr(m->a) && nonnegative_expr(m->b);
        if (const Max *m = e.as<Max>())
            return nonnegative_expr(m->a) || nonnegative_expr(m->b);
        if (const Div *d = e.as<Div>())
            return nonnegative_expr(d->a) && positive_constant(d->b);
        if (const Mod *m = e.as<Mod>())
            return positive_constant(m->b);
        if (const Cast *c = e.as<Cast>())
            return (c->type.is_int() || c->type.is_uint()) && nonnegative_expr(c->value);
        if (const Call *c = e.as<Call>()) {
            if (ir::is_core_id(c))
                return true;
            if (c->is_intrinsic(Call::promise_clamped) ||
                c->is_intrinsic(Call::unsafe_promise_clamped)) {
                return nonnegative_expr(c->args[0]) || nonnegative_expr(c->args[1]);
            }
            if (c->is_intrinsic(Call::likely) || c->is_intrinsic(Call::likely_if_innermost)) {
                return nonnegative_expr(c->args[0]);
            }
        }
        return false;
    }

    static bool positive_constant(const Expr &e) {
        const IntImm *i = e.as<IntImm>();
        return i && i->value > 0;
    }
};

} // namespace

std::vector<FlagPair> flag_pairs(const Kernel &kernel) {
    Pairs p = pair_flags(kernel.body);
    std::vector<FlagPair> r;
    for (const auto &[set, wait] : p.pairs) {
        r.push_back({CodeGen::flag_text(true, p.statements[size_t(set)].op),
                     CodeGen::flag_text(false, p.statements[size_t(wait)].op)});
    }
    return r;
}

/** Elements of an argument: its static extents, or the product with its runtime extents' names. */
static std::string elements_text(const KernelArg &a) {
    if (!a.has_runtime_shape())
        return std::to_string(a.elements());
    std::string text;
    for (size_t d = 0; d < a.extents.size(); d++) {
        text += (d ? " * " : "") +
                (a.runtime[d] ? c_name(a.extent_name(int(d))) : std::to_string(a.extents[d]));
    }
    return text;
}

std::string emit_ascendc(const Kernel &kernel, const std::string &function, int drop_flag_pair) {
    internal_assert(kernel.target.name() == "ascend")
        << "emit_ascendc: kernel " << kernel.name << " is not for ascend\n";
    std::string fn = function.empty() ? c_name(kernel.name) : function;
    if (kernel.is_pipeline()) { // a kernel function per kernel, launched in turn (the library)
        const std::vector<std::string> fns = library::kernel_functions(kernel, fn);
        std::string code;
        for (size_t i = 0; i < fns.size(); i++) // (--drop-flag: the last kernel's pairs)
            code +=
                emit_ascendc(kernel.stages[i], fns[i], i + 1 == fns.size() ? drop_flag_pair : -1) +
                "\n";
        return code;
    }
    Pairs pairs = pair_flags(kernel.body);
    if (drop_flag_pair >= int(pairs.pairs.size())) {
        throw Error("--drop-flag " + std::to_string(drop_flag_pair) + ": kernel " + kernel.name +
                    " has " + std::to_string(pairs.pairs.size()) + " flag pairs (0.." +
                    std::to_string(int(pairs.pairs.size()) - 1) + ")");
    }
    std::set<int> dropped;
    std::map<int, int> pair_of;
    for (size_t i = 0; i < pairs.pairs.size(); i++) {
        pair_of[pairs.pairs[i].first] = pair_of[pairs.pairs[i].second] = int(i);
    }
    if (drop_flag_pair >= 0) {
        dropped.insert(pairs.pairs[size_t(drop_flag_pair)].first);
        dropped.insert(pairs.pairs[size_t(drop_flag_pair)].second);
    }
    CodeGen g(kernel, dropped, pair_of);
    std::ostringstream &os = g.os;
    os << "// Generated by Tandem: AscendC kernel " << kernel.name
       << " for the Ascend 910B AI core.\n"
       << "// Every op is queued on its pipe (cube cores: MTE2 GM -> L1, MTE1 L1 -> L0A/L0B, M, "
          "FIX\n"
       << "// L0C -> GM; vector cores: MTE2 GM -> UB, V, MTE3 UB -> GM); SetFlag/WaitFlag are the "
          "only\n"
       << "// edges between pipes. Builds against AscendC, or on the host against Tandem's CPU "
          "runtime\n"
       << "// (backends/ascend/runtime/kernel_operator.h, the Ascend machine model). The cube path "
          "is\n"
       << "// AscendC's own: Nd2Nz into L1, LoadData2D per row or column of fractals (A Zz, B "
          "Zn),\n"
       << "// Mmad, Fixpipe Nz -> ND. DataCopyParams(blockCount, blockLen, srcStride, dstStride) "
          "count\n"
       << "// 32-byte blocks; DataCopyPad moves rows of any byte length into UB rows padded to 32 "
          "bytes.\n"
       << "// The vector path is AscendC's instructions (count and repeat forms, "
          "PipeBarrier<PIPE_V>\n"
       << "// between dependent ones).\n";
    for (const std::string &n : kernel.notes)
        os << "//   " << n << "\n";
    os << "// flag pairs: " << pairs.pairs.size()
       << " (the i-th SetFlag and the i-th WaitFlag statement of one\n"
       << "// (src, dst, event), numbered in text order of the SetFlag; tandem-cli emit "
          "--drop-flag N drops one)\n";
    for (size_t i = 0; i < pairs.pairs.size(); i++) {
        os << "//   flag pair " << i << ": "
           << CodeGen::flag_text(true, pairs.statements[size_t(pairs.pairs[i].first)].op) << " / "
           << CodeGen::flag_text(false, pairs.statements[size_t(pairs.pairs[i].second)].op) << "\n";
    }
    if (drop_flag_pair >= 0)
        os << "// MUTANT: flag pair " << drop_flag_pair << " is left out (mutation testing).\n";
    os << "#include \"kernel_operator.h\"\n\n#include <algorithm>\n#include <cmath>\n#include "
          "<cstdint>\n\n";
    // Halide's integer division and modulo round towards negative infinity (C++'s towards zero).
    os << "#ifndef TANDEM_FLOOR_DIV\n#define TANDEM_FLOOR_DIV\n"
          "__aicore__ inline int64_t floor_div(int64_t a, int64_t b) {\n"
          "    const int64_t q = a / b;\n"
          "    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n}\n"
          "__aicore__ inline int64_t floor_mod(int64_t a, int64_t b) {\n"
          "    const int64_t r = a % b;\n"
          "    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n}\n#endif\n\n";

    os << "extern \"C\" __global__ __aicore__ void " << fn << "(";
    for (size_t i = 0; i < kernel.args.size(); i++)
        os << (i ? ", " : "") << "GM_ADDR " << c_name(kernel.args[i].name);
    if (!kernel.workspaces.empty())
        os << ", GM_ADDR workspace";
    if (kernel.has_runtime_shapes())
        os << ", GM_ADDR tiling";
    os << ") {\n";
    // The 910B's cube (AIC) and vector (AIV) cores are separate: a kernel without a cube op runs
    // on the vector cores; one with an epilogue after its matmul on both (a mix kernel).
    os << "    KERNEL_TASK_TYPE_DEFAULT("
       << (kernel.mix                 ? "KERNEL_TYPE_MIX_AIC_1_2"
           : kernel.vector_units_only ? "KERNEL_TYPE_AIV_ONLY"
                                      : "KERNEL_TYPE_AIC_ONLY")
       << ");\n";
    if (kernel.has_runtime_shapes()) {
        const std::vector<std::string> names = kernel.runtime_extent_names();
        os << "    // runtime extents: the launch's tiling data (int32, in argument and dim "
              "order)\n"
           << "    AscendC::GlobalTensor<int32_t> tiling_gm;\n"
           << "    tiling_gm.SetGlobalBuffer((__gm__ int32_t *)tiling, " << names.size() << ");\n";
        for (size_t i = 0; i < names.size(); i++)
            os << "    const int64_t " << c_name(names[i]) << " = tiling_gm.GetValue(" << i
               << ");\n";
    }
    os << "    // global memory: the kernel's arguments\n";
    for (const KernelArg &a : kernel.args) {
        const char *t = element_type(dtype_of(a.type));
        os << "    AscendC::GlobalTensor<" << t << "> " << c_name(a.name) << "_gm;\n"
           << "    " << c_name(a.name) << "_gm.SetGlobalBuffer((__gm__ " << t << " *)"
           << c_name(a.name) << ", " << elements_text(a) << "); // "
           << (a.output ? "output " : "input ") << a.type << " [";
        for (size_t d = 0; d < a.extents.size(); d++)
            os << (d ? " x " : "")
               << (d < a.runtime.size() && a.runtime[d] ? "any" : std::to_string(a.extents[d]));
        os << "]\n";
    }
    int64_t workspace_offset = 0; // bytes (workspace_bytes: each workspace at a multiple of 512)
    for (const KernelArg &w : kernel.workspaces) {
        const char *t = element_type(dtype_of(w.type));
        os << "    AscendC::GlobalTensor<" << t << "> " << c_name(w.name)
           << "_gm; // the kernel's workspace\n"
           << "    " << c_name(w.name) << "_gm.SetGlobalBuffer((__gm__ " << t
           << " *)(AscendC::GetUserWorkspace(workspace) + " << workspace_offset << "), "
           << w.elements() << ");\n";
        workspace_offset += (w.elements() * w.type.bytes() + 511) / 512 * 512;
    }
    if (!kernel.mix)
        g.tpipe(std::nullopt);
    std::string head = os.str();
    os.str("");
    g.sequence(kernel.body, true);
    std::string body = os.str();
    if (g.uses_block_idx)
        head += "    const int64_t block_idx = AscendC::GetBlockIdx();\n";
    return head + body + "}\n";
}

std::vector<int32_t> tiling(const Kernel &kernel, const std::vector<std::vector<int>> &extents) {
    std::vector<int32_t> values;
    for (size_t i = 0; i < kernel.args.size(); i++) {
        for (size_t d = 0; d < kernel.args[i].runtime.size(); d++)
            if (kernel.args[i].runtime[d])
                values.push_back(int32_t(extents[i][d]));
    }
    return values;
}

int64_t workspace_bytes(const Kernel &kernel) {
    int64_t bytes = 0;
    for (const KernelArg &w : kernel.workspaces)
        bytes += (w.elements() * w.type.bytes() + 511) / 512 * 512;
    return bytes;
}

std::string emit_library_header(const Kernel &kernel, const std::string &function) {
    return library::header(kernel, function.empty() ? c_name(kernel.name) : function,
                           "the Ascend machine model");
}

std::string emit_library(const Kernel &kernel, const std::string &function) {
    const std::string fn = function.empty() ? c_name(kernel.name) : function;
    sim::ascend::AscendParams params = sim::ascend::AscendParams::from(kernel.target.lookup());
    std::ostringstream helpers, run;
    helpers << "tandem::sim::ascend::AscendParams machine() {\n    "
               "tandem::sim::ascend::AscendParams p;\n";
    params.fields(
        [&](const char *name, auto &v) { helpers << "    p." << name << " = " << v << ";\n"; });
    helpers << "    return p;\n}\n";
    // Sizes from the buffers: the static extents (checked), or any of a runtime shape. Each kernel
    // of a pipeline runs on a machine of its own (a kernel boundary orders everything).
    run << library::intermediates(kernel) << "        uint64_t cycles = 0;\n";
    const std::vector<const Kernel *> kernels = library::kernels_of(kernel);
    const std::vector<std::string> fns = library::kernel_functions(kernel, fn);
    for (size_t k = 0; k < kernels.size(); k++) {
        const Kernel &launch = *kernels[k];
        const std::vector<library::ArgAccess> access = library::arg_access(kernel, launch);
        run << "        {\n"
            << "        tandem::sim::ascend::Machine m(machine(), /*numerics=*/true);\n"
            << "        std::vector<int> ids;\n";
        for (size_t i = 0; i < launch.args.size(); i++) {
            const KernelArg &a = launch.args[i];
            run << "        ids.push_back(m.add_gm(\"" << a.name << "\", "
                << library::dtype_enum(dtype_of(a.type)) << ", " << access[i].elements << "));\n";
            if (!a.output)
                run << "        std::memcpy(m.data(ids.back()), " << access[i].data << ", "
                    << access[i].elements << " * " << a.type.bytes() << ");\n";
        }
        const size_t out = launch.args.size() - 1;
        run << "        std::vector<tandem_ascend::GmArgument> gm;\n"
            << "        for (int id : ids)\n"
            << "            gm.push_back({{id, 0}});\n";
        if (!launch.workspaces.empty()) { // the launch's workspace, after the arguments
            // The model types GM: each workspace a buffer of its own type, at its offset.
            run << "        gm.emplace_back();\n";
            int64_t offset = 0;
            for (const KernelArg &w : launch.workspaces) {
                run << "        gm.back().push_back({m.add_gm(\"" << w.name << "\", "
                    << library::dtype_enum(dtype_of(w.type)) << ", " << w.elements() << "), "
                    << offset << "});\n";
                offset += (w.elements() * w.type.bytes() + 511) / 512 * 512;
            }
        }
        if (launch.has_runtime_shapes()) { // the tiling data, last: each runtime extent, in order
            run << "        std::vector<int32_t> tiling;\n";
            for (size_t i = 0; i < launch.args.size(); i++) {
                for (size_t d = 0; d < launch.args[i].runtime.size(); d++)
                    if (launch.args[i].runtime[d])
                        run << "        tiling.push_back(int32_t(" << access[i].extents << "[" << d
                            << "]));\n";
            }
            run << "        ids.push_back(m.add_gm(\"tiling\", tandem::sim::DType::I32, "
                   "int64_t(tiling.size())));\n"
                << "        std::memcpy(m.data(ids.back()), tiling.data(), tiling.size() * "
                   "sizeof(int32_t));\n"
                << "        gm.push_back({{ids.back(), 0}});\n";
        }
        run << "        tandem_ascend::run_parts(m, " << fns[k]
            << "_kernel, gm, AscendC::KernelMode::"
            << (launch.mix                 ? "MIX_MODE"
                : launch.vector_units_only ? "AIV_MODE"
                                           : "AIC_MODE")
            << ");\n"
            << "        tandem::sim::Report r = m.finish();\n"
            << "        if (r.deadlock || r.race_count)\n"
            << "            return fail(halide_error_code_generic_error, r.deadlock ? "
               "r.deadlock_message : r.races.front().str());\n"
            << "        std::memcpy(" << access[out].data << ", m.data(ids[" << out << "]), "
            << access[out].elements << " * " << launch.args[out].type.bytes() << ");\n"
            << "        cycles += uint64_t(r.cycles);\n"
            << "        }\n";
    }
    run << "        last_cycles = cycles;\n";
    std::string code;
    for (size_t k = 0; k < kernels.size(); k++)
        code += emit_ascendc(*kernels[k], fns[k] + "_kernel");
    return library::source(kernel, fn, code, helpers.str(), run.str());
}

} // namespace tandem::ascend_backend
