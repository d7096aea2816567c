#include "Executor.h"

#include "common/Evaluator.h"
#include "runtime.h"
#include "tandem/AsyncIR.h"

#include <cmath>
#include <unordered_map>

namespace tandem::zpu_backend {

using namespace Halide::Internal;
using sim::DType;

namespace {

class Interpreter {
public:
    Interpreter(zpu::Context &ctx, const Kernel &kernel, const Shapes &shapes)
        : ctx(ctx), kernel(kernel),
          evaluator([this](const std::string &n) -> const BufferRef & { return buffer(n); },
                    [this](const Call *c, double *v) {
                        if (!ir::is_core_id(c))
                            return false;
                        *v = this->kernel.cluster > 1 ? zpu::mesh_position(this->ctx)
                                                      : this->ctx.core.id();
                        return true;
                    }) {
        for (const auto &[name, value] : shapes)
            vars[name] = double(value);
        std::map<std::string, int> all = ctx.buffers;
        for (size_t i = 0; i < kernel.args.size(); i++)
            all[kernel.args[i].name] = zpu::argument(ctx, i);
        for (const auto &[name, id] : all) {
            BufferRef r;
            r.id = id;
            r.data = ctx.machine.data(id);
            r.type = ctx.machine.type(id);
            r.elements = ctx.machine.elements(id);
            buffers[name] = r;
        }
    }

    void exec(const Stmt &s) {
        if (const For *f = s.as<For>()) {
            int64_t min = int64_t(scalar(f->min)), extent = int64_t(scalar(f->extent));
            for (int64_t i = min; i < min + extent; i++) {
                vars[f->name] = double(i);
                exec(f->body);
            }
        } else if (const LetStmt *l = s.as<LetStmt>()) {
            ir::VectorOp v;
            Stmt body;
            if (ir::as_vector_op(s, &v, &body))
                return vector_op(v, body);
            vars[l->name] = scalar(l->value);
            exec(l->body);
        } else if (const Block *b = s.as<Block>()) {
            exec(b->first);
            exec(b->rest);
        } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            exec(pc->body);
        } else if (const IfThenElse *i = s.as<IfThenElse>()) {
            if (scalar(i->condition) != 0)
                exec(i->then_case);
            else if (i->else_case.defined())
                exec(i->else_case);
        } else if (s.as<Evaluate>()) {
            intrinsic(s);
        } else {
            internal_error << "zpu executor: unexpected statement in control code:\n" << s << "\n";
        }
    }

private:
    zpu::Context &ctx;
    const Kernel &kernel;
    Evaluator evaluator;
    std::unordered_map<std::string, double> &vars = evaluator.vars;
    std::unordered_map<std::string, BufferRef> buffers;
    std::map<std::pair<std::string, int64_t>, sim::Token> tokens;
    std::map<std::pair<std::string, int64_t>, sim::Token> leaves; // of a mesh cluster's copies

    double scalar(const Expr &e) { return evaluator.scalar(e); }

    const BufferRef &buffer(const std::string &name) {
        auto it = buffers.find(name);
        internal_assert(it != buffers.end()) << "zpu executor: no buffer " << name << "\n";
        return it->second;
    }

    // ---- intrinsics ----
    void intrinsic(const Stmt &s) {
        ir::CopyOp c;
        ir::WaitOp w;
        ir::MmaOp m;
        std::string engine, barrier;
        if (ir::as_copy(s, &c)) {
            sim::Box dst{int64_t(scalar(c.dst_offset)), {}}, src{int64_t(scalar(c.src_offset)), {}};
            for (const ir::CopyDim &d : c.dims) {
                int64_t e = zpu::box_extent(int64_t(scalar(d.extent)));
                dst.dims.push_back({e, int64_t(scalar(d.dst_stride))});
                src.dims.push_back({e, int64_t(scalar(d.src_stride))});
            }
            int64_t slot = int64_t(scalar(c.slot));
            std::string label = c.src + " -> " + c.dst + " (version " + std::to_string(slot) + ")";
            if (c.multicast > 1) {
                tokens[{c.barrier, slot}] = zpu::column_copy(
                    ctx, c.multicast, c.sender.defined() ? int(scalar(c.sender)) : 0,
                    &leaves[{c.barrier, slot}], buffer(c.dst).id, c.dst.c_str(), dst,
                    buffer(c.src).id, src, label);
            } else {
                tokens[{c.barrier, slot}] =
                    ctx.core.dma_start(buffer(c.dst).id, dst, buffer(c.src).id, src, label);
            }
        } else if (ir::as_wait(s, &w)) {
            int64_t slot = int64_t(scalar(w.slot));
            auto it = tokens.find({w.barrier, slot});
            sim::Token t = it != tokens.end()            ? it->second
                           : is_empty_barrier(w.barrier) ? zpu::no_token()
                                                         : zpu::never_signalled();
            const std::string label = "wait " + w.barrier + " version " + std::to_string(slot);
            ctx.core.dma_wait(t, label);
            auto leaf = leaves.find({w.barrier, slot});
            if (leaf != leaves.end())
                ctx.core.dma_wait(leaf->second, label + " (column leaf)");
        } else if (ir::as_mesh_barrier(s, &barrier)) {
            zpu::mesh_barrier(ctx, kernel.cluster, barrier);
        } else if (ir::as_mma(s, &m)) {
            auto v = [&](const Expr &e) { return int64_t(scalar(e)); };
            zpu::mma(ctx, buffer(m.acc).id, v(m.acc_offset), v(m.acc_stride_n), v(m.acc_stride_m),
                     buffer(m.a).id, v(m.a_offset), v(m.a_stride_k), v(m.a_stride_m),
                     buffer(m.b).id, v(m.b_offset), v(m.b_stride_n), v(m.b_stride_k), v(m.n),
                     v(m.m), v(m.k), m.acc + " += " + m.a + " * " + m.b,
                     !m.accumulate.defined() || v(m.accumulate) != 0);
        } else if (ir::as_sync(s, &engine)) {
            zpu::sync(ctx, engine == "tensor" ? zpu::Engine::Tensor : zpu::Engine::Vector);

        } else {
            const Evaluate *e = s.as<Evaluate>();
            internal_assert(is_const(e->value))
                << "zpu executor: unexpected call " << e->value << "\n";
        }
    }

    static bool is_empty_barrier(const std::string &b) {
        return b.size() > 6 && b.compare(b.size() - 6, 6, ".empty") == 0;
    }

    void vector_op(const ir::VectorOp &v, const Stmt &body) {
        std::vector<sim::Access> accesses;
        for (const ir::Region &r : v.regions) {
            accesses.push_back({buffer(r.buffer).id,
                                sim::Box{int64_t(scalar(r.lo)), {{int64_t(scalar(r.extent)), 1}}},
                                r.write});
        }
        ctx.core.vector_op(v.label, int64_t(scalar(v.flops)), accesses,
                           [&] { evaluator.elements(body); });
    }
};

std::vector<zpu::BufferDecl> buffer_decls(const Kernel &kernel) {
    std::vector<zpu::BufferDecl> decls;
    for (const SramBuffer &b : kernel.buffers) {
        decls.push_back({b.name.c_str(), b.space, dtype_of(b.type), b.elements()});
    }
    return decls;
}

} // namespace

void execute(const Kernel &kernel, sim::Machine &machine,
             const std::map<std::string, int> &arguments, const Shapes &shapes) {
    std::vector<int> positional;
    for (const KernelArg &a : kernel.args) {
        auto it = arguments.find(a.name);
        if (it == arguments.end())
            throw Error("kernel " + kernel.name + ": no buffer given for argument " + a.name);
        positional.push_back(it->second);
    }
    zpu::run_on_all_cores(machine, positional, buffer_decls(kernel), [&](zpu::Context &ctx) {
        Interpreter interpreter(ctx, kernel, shapes);
        interpreter.exec(kernel.body);
    });
}

} // namespace tandem::zpu_backend
