#include "Emitter.h"

#include "common/CExpr.h"
#include "common/Library.h"

#include "Executor.h"
#include "tandem/AsyncIR.h"

#include <set>
#include <sstream>

namespace tandem::zpu_backend {

using namespace Halide::Internal;

namespace {

std::string barrier_array(const std::string &barrier) {
    return c_name(barrier);
}

const char *storage_type(sim::DType t) {
    switch (t) {
    case sim::DType::BF16:
    case sim::DType::F16:
        return "uint16_t";
    case sim::DType::F32:
        return "float";
    case sim::DType::I32:
        return "int32_t";
    case sim::DType::U8:
    case sim::DType::E4M3: // FP8 bits (the zpu's tensor core takes no FP8: tile_mma refuses it)
    case sim::DType::E5M2:
        return "uint8_t";
    case sim::DType::I8:
        return "int8_t";
    }
    return "?";
}

using library::dtype_enum;

const char *space_enum(sim::Space s) {
    switch (s) {
    case sim::Space::DRAM:
        return "tandem::sim::Space::DRAM";
    case sim::Space::ASRAM:
        return "tandem::sim::Space::ASRAM";
    case sim::Space::WSRAM:
        return "tandem::sim::Space::WSRAM";
    case sim::Space::RSRAM:
        return "tandem::sim::Space::RSRAM";
    }
    return "?";
}

class BuffersUsed : public IRVisitor {
public:
    std::set<std::string> names;

private:
    using IRVisitor::visit;
    void visit(const Load *op) override {
        names.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        names.insert(op->name);
        IRVisitor::visit(op);
    }
};

/** The ZPU's C++ expressions (CExpr.h): the runtime's floor_div / floor_mod, bf16 values through
 * zpu::to_bf16 / from_bf16, loads from the buffers' data pointers, the core id from the context. */
class ZpuExpr : public CExpr {
    const char *target() const override { return "zpu"; }
    std::string helper(Helper h) const override {
        if (h == Helper::FloorDiv || h == Helper::FloorMod)
            return "zpu::" + CExpr::helper(h);
        return CExpr::helper(h);
    }
    std::string rounded(const Halide::Type &t, const std::string &v) const override {
        if (t.is_bfloat())
            return "zpu::from_bf16(zpu::to_bf16(" + v + "))";
        if (t.is_float() && t.bits() == 16)
            return "zpu::from_f16(zpu::to_f16(" + v + "))";
        return v;
    }
    std::string load(const Load *l) override {
        std::string v = c_name(l->name) + "_data[" + print(l->index) + "]";
        if (l->type.is_float() && l->type.bits() == 16)
            return std::string(l->type.is_bfloat() ? "zpu::from_bf16(" : "zpu::from_f16(") + v +
                   ")";
        return v;
    }

public:
    bool mesh_position = false; // a mesh cluster's kernel: core ids are mesh positions

private:
    std::string call(const Call *c) override {
        if (ir::is_core_id(c))
            return mesh_position ? "zpu::mesh_position(ctx)" : "zpu::core_id(ctx)";
        return CExpr::call(c);
    }
    std::string unknown_call(const Call *c) override {
        throw Error("the zpu vector core has no instruction for " + c->name);
    }
};

/** The completion barriers of a mesh cluster's shared copies (each also has a leaf token). */
class ColumnCopies : public IRVisitor {
public:
    std::set<std::string> barriers;

private:
    using IRVisitor::visit;
    void visit(const Evaluate *op) override {
        ir::CopyOp c;
        if (ir::as_copy(op, &c) && c.multicast > 1)
            barriers.insert(c.barrier);
    }
};

std::string leaf_array(const std::string &barrier) {
    return c_name(barrier) + "_leaf";
}

class CodeGen {
public:
    explicit CodeGen(const Kernel &k) : kernel(k) {
        expr.mesh_position = k.cluster > 1;
        k.body.accept(&column_copies);
    }
    ColumnCopies column_copies;
    std::ostringstream os;
    int indent = 1;
    ZpuExpr expr;

    std::string line() const { return std::string(4 * indent, ' '); }

    void stmt(const Stmt &s) {
        if (const For *f = s.as<For>()) {
            std::string v = c_name(f->name);
            if (ends_with(f->name, ".prologue"))
                os << line() << "// prologue: start the first copies of the pipeline\n";
            os << line() << "for (int64_t " << v << " = " << expr(f->min) << ", " << v
               << "_end = " << v << " + " << expr(f->extent) << "; " << v << " < " << v << "_end; "
               << v << "++) {\n";
            nested(f->body);
            os << line() << "}\n";
        } else if (const LetStmt *l = s.as<LetStmt>()) {
            ir::VectorOp v;
            Stmt body;
            if (ir::as_vector_op(s, &v, &body))
                return vector_op(v, body);
            if (ends_with(l->name, ".iteration")) {
                os << line()
                   << "// steady state: issue the copy for a later iteration, wait for this one, "
                      "compute\n";
            }
            os << line() << "{\n";
            indent++;
            os << line() << "const " << expr.type_name(l->value.type()) << " " << c_name(l->name)
               << " = " << expr(l->value) << ";\n";
            stmt(l->body);
            indent--;
            os << line() << "}\n";
        } else if (const Block *b = s.as<Block>()) {
            stmt(b->first);
            stmt(b->rest);
        } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            os << line() << "// " << (pc->is_producer ? "produce " : "consume ") << pc->name
               << "\n";
            stmt(pc->body);
        } else if (const IfThenElse *i = s.as<IfThenElse>()) {
            os << line() << "if (" << expr(i->condition) << ") {\n";
            nested(i->then_case);
            if (i->else_case.defined()) {
                os << line() << "} else {\n";
                nested(i->else_case);
            }
            os << line() << "}\n";
        } else if (const Store *st = s.as<Store>()) {
            std::string v = expr(st->value);
            if (st->value.type().is_bfloat())
                v = "zpu::to_bf16(" + v + ")";
            else if (st->value.type().is_float() && st->value.type().bits() == 16)
                v = "zpu::to_f16(" + v + ")";
            os << line() << c_name(st->name) << "_data[" << expr(st->index) << "] = " << v << ";\n";
        } else if (s.as<Evaluate>()) {
            intrinsic(s);
        } else {
            internal_error << "zpu emitter: unexpected statement\n" << s << "\n";
        }
    }

private:
    const Kernel &kernel;

    static bool ends_with(const std::string &s, const std::string &tail) {
        return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
    }

    void nested(const Stmt &s) {
        indent++;
        stmt(s);
        indent--;
    }

    void intrinsic(const Stmt &s) {
        ir::CopyOp c;
        ir::WaitOp w;
        ir::MmaOp m;
        std::string engine;
        std::string label;
        if (ir::as_copy(s, &c)) {
            std::string slot = expr(c.slot);
            os << line() << barrier_array(c.barrier) << "[" << slot << "] = ";
            if (c.multicast > 1) {
                os << "zpu::column_copy(ctx, " << c.multicast << ", "
                   << (c.sender.defined() ? expr(c.sender) : std::string("0")) << ", &"
                   << leaf_array(c.barrier) << "[" << slot << "], " << c_name(c.dst) << ", \""
                   << c.dst << "\", ";
            } else {
                os << "zpu::dma_start(ctx, " << c_name(c.dst) << ", ";
            }
            os << expr(c.dst_offset) << ", " << c_name(c.src) << ", " << expr(c.src_offset)
               << ", {";
            for (size_t d = 0; d < c.dims.size(); d++) {
                os << (d ? ", " : "") << "{" << expr(c.dims[d].extent) << ", "
                   << expr(c.dims[d].dst_stride) << ", " << expr(c.dims[d].src_stride) << "}";
            }
            os << "}, \"" << c.src << " -> " << c.dst << " (version \" + std::to_string(" << slot
               << ") + \")\");\n";
        } else if (ir::as_wait(s, &w)) {
            std::string slot = expr(w.slot);
            os << line() << "zpu::dma_wait(ctx, " << barrier_array(w.barrier) << "[" << slot
               << "], \"wait " << w.barrier << " version \" + std::to_string(" << slot << "));\n";
            if (column_copies.barriers.count(w.barrier)) {
                os << line() << "zpu::dma_wait(ctx, " << leaf_array(w.barrier) << "[" << slot
                   << "], \"wait " << w.barrier << " version \" + std::to_string(" << slot
                   << ") + \" (column leaf)\");\n";
            }
        } else if (ir::as_mesh_barrier(s, &label)) {
            os << line() << "zpu::mesh_barrier(ctx, " << kernel.cluster << ", \"" << label
               << "\");\n";
        } else if (ir::as_mma(s, &m)) {
            os << line() << "zpu::mma(ctx, " << c_name(m.acc) << ", " << expr(m.acc_offset) << ", "
               << expr(m.acc_stride_n) << ", " << expr(m.acc_stride_m) << ", " << c_name(m.a)
               << ", " << expr(m.a_offset) << ", " << expr(m.a_stride_k) << ", "
               << expr(m.a_stride_m) << ", " << c_name(m.b) << ", " << expr(m.b_offset) << ", "
               << expr(m.b_stride_n) << ", " << expr(m.b_stride_k) << ",\n"
               << line() << "         " << expr(m.n) << ", " << expr(m.m) << ", " << expr(m.k)
               << ", \"" << m.acc << " += " << m.a << " * " << m.b << "\""
               << (m.accumulate.defined() ? ", " + expr(m.accumulate) : "") << ");\n";
        } else if (ir::as_sync(s, &engine)) {
            os << line()
               << "zpu::sync(ctx, zpu::Engine::" << (engine == "tensor" ? "Tensor" : "Vector")
               << ");\n";
        } else {
            const Evaluate *e = s.as<Evaluate>();
            internal_assert(is_const(e->value))
                << "zpu emitter: unexpected call " << e->value << "\n";
        }
    }

    void vector_op(const ir::VectorOp &v, const Stmt &body) {
        os << line() << "// vector core: " << v.label << "\n";
        os << line() << "zpu::vector_op(ctx, \"" << v.label << "\", " << expr(v.flops) << ", {";
        for (size_t i = 0; i < v.regions.size(); i++) {
            const ir::Region &r = v.regions[i];
            os << (i ? ", " : "") << "{" << c_name(r.buffer) << ", " << expr(r.lo) << ", "
               << expr(r.extent) << ", " << (r.write ? "true" : "false") << "}";
        }
        os << "}, [&] {\n";
        nested(body);
        os << line() << "});\n";
    }
};

} // namespace

std::string emit_cpp(const Kernel &kernel, const std::string &function) {
    std::string fn = function.empty() ? c_name(kernel.name) : function;
    if (kernel.is_pipeline()) { // a function per kernel, called in turn (the library)
        const std::vector<std::string> fns = library::kernel_functions(kernel, fn);
        std::string code;
        for (size_t i = 0; i < fns.size(); i++)
            code += emit_cpp(kernel.stages[i], fns[i]) + "\n";
        return code;
    }
    CodeGen g(kernel);
    std::ostringstream &os = g.os;
    os << "// Generated by Tandem for the zpu: kernel " << kernel.name << ".\n"
       << "// One control stream per core issues everything: DMA transfers (a token each), MMAs to "
          "the\n"
       << "// tensor core and vector ops to the vector core, each engine in order; zpu::sync waits "
          "for\n"
       << "// an engine. Runtime API: backends/zpu/runtime.h.\n";
    for (const std::string &n : kernel.notes)
        os << "//   " << n << "\n";
    os << "#include \"zpu/runtime.h\"\n\n#include <algorithm>\n#include <cmath>\n#include "
          "<string>\n#include <vector>\n\n";
    os << "const std::vector<zpu::BufferDecl> &" << fn << "_buffers() {\n"
       << "    static const std::vector<zpu::BufferDecl> buffers = {\n";
    for (const SramBuffer &b : kernel.buffers) {
        os << "        {\"" << b.name << "\", " << space_enum(b.space) << ", "
           << dtype_enum(dtype_of(b.type)) << ", " << b.elements() << "}, // " << b.slots << " x "
           << b.slot_elements << "\n";
    }
    os << "    };\n    return buffers;\n}\n\n";
    os << "void " << fn << "(zpu::Context &ctx) {\n";
    BuffersUsed used;
    kernel.body.accept(&used);
    os << "    // DRAM arguments\n";
    for (size_t i = 0; i < kernel.args.size(); i++) {
        const KernelArg &a = kernel.args[i];
        os << "    const int " << c_name(a.name) << " = zpu::argument(ctx, " << i << "); // "
           << (a.output ? "output" : "input") << " " << a.type << "\n";
        for (size_t d = 0; d < a.runtime.size(); d++) {
            if (a.runtime[d])
                os << "    const int64_t " << c_name(a.extent_name(int(d)))
                   << " = zpu::extent(ctx, " << i << ", " << d << ");\n";
        }
    }
    os << "    // on-chip buffers\n";
    for (const SramBuffer &b : kernel.buffers) {
        os << "    const int " << c_name(b.name) << " = zpu::buffer(ctx, \"" << b.name << "\");\n";
    }
    for (const std::string &name : used.names) {
        sim::DType t = kernel.buffer(name) ? dtype_of(kernel.buffer(name)->type)
                                           : dtype_of(kernel.arg(name)->type);
        os << "    " << storage_type(t) << " *" << c_name(name) << "_data = zpu::data<"
           << storage_type(t) << ">(ctx, " << c_name(name) << ");\n";
    }
    os << "    // barriers: one DMA token per version; a full barrier nothing signalled deadlocks, "
          "an\n"
       << "    // empty one is free (pre-armed)\n";
    for (const SramBuffer &b : kernel.buffers) {
        os << "    zpu::Token " << barrier_array(ir::full_barrier(b.name)) << "[" << b.slots
           << "], " << barrier_array(ir::empty_barrier(b.name)) << "[" << b.slots << "];\n"
           << "    std::fill(" << barrier_array(ir::full_barrier(b.name)) << ", "
           << barrier_array(ir::full_barrier(b.name)) << " + " << b.slots
           << ", zpu::never_signalled());\n"
           << "    std::fill(" << barrier_array(ir::empty_barrier(b.name)) << ", "
           << barrier_array(ir::empty_barrier(b.name)) << " + " << b.slots
           << ", zpu::no_token());\n";
        if (g.column_copies.barriers.count(ir::full_barrier(b.name))) {
            const std::string leaf = leaf_array(ir::full_barrier(b.name));
            os << "    zpu::Token " << leaf << "[" << b.slots << "];\n"
               << "    std::fill(" << leaf << ", " << leaf << " + " << b.slots
               << ", zpu::no_token()); // the column leaves of the shared copies\n";
        }
    }
    os << "\n";
    g.stmt(kernel.body);
    os << "}\n";
    return os.str();
}

std::string emit_library_header(const Kernel &kernel, const std::string &function) {
    return library::header(kernel, function.empty() ? c_name(kernel.name) : function,
                           "the ZPU machine model");
}

std::string emit_library(const Kernel &kernel, const std::string &function) {
    std::string fn = function.empty() ? c_name(kernel.name) : function;
    sim::ZpuParams params = sim::ZpuParams::from(kernel.target.lookup());
    std::ostringstream includes, helpers, run;
    includes << "#include \"zpu/runtime.h\"\n\n";
    for (const std::string &f : library::kernel_functions(kernel, fn)) {
        includes << "void " << f << "(zpu::Context &ctx);\nconst std::vector<zpu::BufferDecl> &"
                 << f << "_buffers();\n";
    }
    helpers << "tandem::sim::ZpuParams machine() {\n    tandem::sim::ZpuParams p;\n";
    params.fields(
        [&](const char *name, auto &v) { helpers << "    p." << name << " = " << v << ";\n"; });
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            helpers << "    p.route[" << a << "][" << b
                    << "] = " << params.route[size_t(a)][size_t(b)] << ";\n";
    for (int link = 0; link < 2; link++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                helpers << "    p.link_route[" << link << "][" << a << "][" << b
                        << "] = " << params.link_route[size_t(link)][size_t(a)][size_t(b)] << ";\n";
    helpers << "    return p;\n}\n";
    // Sizes from the buffers: the static extents (checked), or any of a runtime shape. Each kernel
    // of a pipeline runs on a machine of its own (a kernel boundary orders everything).
    run << library::intermediates(kernel) << "        uint64_t cycles = 0;\n";
    const std::vector<const Kernel *> kernels = library::kernels_of(kernel);
    const std::vector<std::string> fns = library::kernel_functions(kernel, fn);
    for (size_t k = 0; k < kernels.size(); k++) {
        const std::vector<library::ArgAccess> access = library::arg_access(kernel, *kernels[k]);
        run << "        {\n"
            << "        tandem::sim::Machine m(machine(), /*numerics=*/true);\n"
            << "        std::vector<int> ids;\n        std::vector<std::vector<int64_t>> shape;\n";
        for (size_t i = 0; i < kernels[k]->args.size(); i++) {
            const KernelArg &a = kernels[k]->args[i];
            run << "        ids.push_back(m.add_dram(\"" << a.name << "\", "
                << dtype_enum(dtype_of(a.type)) << ", " << access[i].elements << "));\n"
                << "        shape.push_back(" << access[i].extents << ");\n";
            if (!a.output)
                run << "        std::memcpy(m.data(ids.back()), " << access[i].data << ", "
                    << access[i].elements << " * " << a.type.bytes() << ");\n";
        }
        const KernelArg &out = kernels[k]->args.back();
        run << "        zpu::run_on_all_cores(m, ids, " << fns[k]
            << "_buffers(), [](zpu::Context &ctx) { " << fns[k] << "(ctx); }, shape);\n"
            << "        tandem::sim::Report r = m.finish();\n"
            << "        if (r.deadlock || r.race_count)\n"
            << "            return fail(halide_error_code_generic_error, r.deadlock ? "
               "r.deadlock_message : r.races.front().str());\n"
            << "        std::memcpy(" << access.back().data << ", m.data(ids.back()), "
            << access.back().elements << " * " << out.type.bytes() << ");\n"
            << "        cycles += uint64_t(r.cycles);\n"
            << "        }\n";
    }
    run << "        last_cycles = cycles;\n";
    return library::source(kernel, fn, includes.str(), helpers.str(), run.str());
}

} // namespace tandem::zpu_backend
