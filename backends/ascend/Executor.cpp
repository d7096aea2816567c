#include "Executor.h"

#include "tandem/AsyncIR.h"
#include "common/Evaluator.h"

#include <memory>
#include <set>
#include <unordered_map>

namespace tandem::ascend_backend {

using namespace Halide::Internal;
using sim::ascend::Pipe;

namespace {

Pipe pipe_named(const std::string &name) {
    static const std::map<std::string, Pipe> pipes = {{"MTE2", Pipe::MTE2}, {"MTE1", Pipe::MTE1}, {"M", Pipe::M},
                                                      {"FIX", Pipe::FIX},   {"V", Pipe::V},       {"MTE3", Pipe::MTE3}};
    auto it = pipes.find(name);
    internal_assert(it != pipes.end()) << "ascend executor: no pipe " << name << "\n";
    return it->second;
}

class Stream {
public:
    Stream(sim::ascend::Machine &machine, int core, int block, std::unordered_map<std::string, BufferRef> buffers,
           std::set<std::string> l0c)
        : machine(machine), core(machine.core(core)), block_index(block), l0c(std::move(l0c)),
          buffers(std::make_shared<std::unordered_map<std::string, BufferRef>>(std::move(buffers))), eval(lookup(), hook()) {}

    void exec(const Stmt &s) {
        if (const For *f = s.as<For>()) {
            int64_t min = value(f->min), extent = value(f->extent);
            for (int64_t i = min; i < min + extent; i++) {
                eval.vars[f->name] = double(i);
                exec(f->body);
            }
        } else if (const LetStmt *l = s.as<LetStmt>()) {
            ir::VectorOp v;
            Stmt body;
            if (ir::as_vector_op(s, &v, &body)) return vector_op(v, body);
            eval.vars[l->name] = eval.scalar(l->value);
            exec(l->body);
        } else if (const Block *b = s.as<Block>()) {
            exec(b->first);
            exec(b->rest);
        } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            exec(pc->body);
        } else if (const IfThenElse *i = s.as<IfThenElse>()) {
            if (eval.scalar(i->condition) != 0) exec(i->then_case);
            else if (i->else_case.defined()) exec(i->else_case);
        } else if (s.as<Evaluate>()) {
            op(s);
        } else {
            internal_error << "ascend executor: unexpected statement\n" << s << "\n";
        }
    }

private:
    sim::ascend::Machine &machine;
    sim::ascend::Core &core;
    int block_index; // GetBlockIdx(): the core's index among its kind
    std::set<std::string> l0c; // accumulators: stored by the Fixpipe
    std::shared_ptr<std::unordered_map<std::string, BufferRef>> buffers;
    Evaluator eval;

    Evaluator::Lookup lookup() const {
        auto table = buffers;
        return [table](const std::string &n) -> const BufferRef & {
            auto it = table->find(n);
            internal_assert(it != table->end()) << "ascend executor: no buffer " << n << "\n";
            return it->second;
        };
    }
    Evaluator::CallHook hook() const {
        int c = block_index;
        return [c](const Call *call, double *v) {
            if (!ir::is_core_id(call)) return false;
            *v = c;
            return true;
        };
    }

    int64_t value(const Expr &e) { return int64_t(eval.scalar(e)); }
    int id(const std::string &name) { return lookup()(name).id; }

    void op(const Stmt &s) {
        ir::CopyOp c;
        ir::FlagOp f;
        ir::MmaOp m;
        std::string counter;
        if (ir::as_copy(s, &c)) {
            sim::Box dst{value(c.dst_offset), {}}, src{value(c.src_offset), {}};
            for (const ir::CopyDim &d : c.dims) {
                int64_t e = value(d.extent);
                dst.dims.push_back({e, value(d.dst_stride)});
                src.dims.push_back({e, value(d.src_stride)});
            }
            if (l0c.count(c.src)) {
                core.fixpipe(id(c.dst), dst, id(c.src), src, "Fixpipe " + c.src + " -> " + c.dst); // L0C -> GM
            } else {
                core.data_copy(id(c.dst), dst, id(c.src), src, c.src + " -> " + c.dst);
            }
        } else if (ir::as_mma(s, &m)) {
            auto v = [&](const Expr &e) { return value(e); };
            core.mmad(id(m.acc), sim::Box{v(m.acc_offset), {{v(m.n), v(m.acc_stride_n)}, {v(m.m), v(m.acc_stride_m)}}},
                      id(m.a), sim::Box{v(m.a_offset), {{v(m.k), v(m.a_stride_k)}, {v(m.m), v(m.a_stride_m)}}},
                      id(m.b), sim::Box{v(m.b_offset), {{v(m.n), v(m.b_stride_n)}, {v(m.k), v(m.b_stride_k)}}},
                      !m.accumulate.defined() || v(m.accumulate) != 0, m.acc + " += " + m.a + " * " + m.b);
        } else if (ir::as_set_flag(s, &f)) {
            core.set_flag(pipe_named(f.src), pipe_named(f.dst), int(value(f.event)));
        } else if (ir::as_wait_flag(s, &f)) {
            core.wait_flag(pipe_named(f.src), pipe_named(f.dst), int(value(f.event)));
        } else if (ir::as_advance(s, &counter)) {
            eval.vars[counter] += 1;
        } else {
            const Evaluate *e = s.as<Evaluate>();
            internal_assert(is_const(e->value)) << "ascend executor: unexpected op " << s << "\n";
        }
    }

    void vector_op(const ir::VectorOp &v, const Stmt &body) {
        std::vector<sim::Access> accesses;
        for (const ir::Region &r : v.regions) {
            accesses.push_back({id(r.buffer), sim::Box{value(r.lo), {{value(r.extent), 1}}}, r.write});
        }
        // The model runs the numerics later: take the loop variables as they are now.
        auto run = [vars = eval.vars, body, lookup = lookup(), hook = hook()] {
            Evaluator e(lookup, hook);
            e.vars = vars;
            e.elements(body);
        };
        core.vector_op(v.label, value(v.flops), accesses, run);
    }
};

} // namespace

void execute(const Kernel &kernel, sim::ascend::Machine &machine, const std::map<std::string, int> &arguments) {
    // An AIV-only kernel (no tile MMA) runs on the vector cores, an AIC-only one on the cube
    // cores; GetBlockIdx() is the index among them.
    const sim::ascend::CoreKind kind = kernel.vector_units_only ? sim::ascend::CoreKind::AIV : sim::ascend::CoreKind::AIC;
    for (int block = 0; block < machine.cores_of(kind); block++) {
        const int c = machine.core_of(kind, block);
        std::unordered_map<std::string, BufferRef> buffers;
        auto add = [&](const std::string &name, int id) {
            buffers[name] = BufferRef{machine.data(id), machine.type(id), machine.elements(id), id};
        };
        for (const auto &[name, id] : arguments) add(name, id);
        for (const SramBuffer &b : kernel.buffers) {
            add(b.name, machine.add_local(c, b.name, b.ascend_mem, dtype_of(b.type), b.elements()));
        }
        std::set<std::string> l0c;
        for (const SramBuffer &b : kernel.buffers) {
            if (b.ascend_mem == sim::ascend::Mem::L0C) l0c.insert(b.name);
        }
        // The emitted kernel's prologue: AscendC's TPipe sets M_MTE1 0..2 on an AIC, and the
        // kernel's pipe.Destroy() waits for them and drains every pipe.
        sim::ascend::Core &core = machine.core(c);
        if (kind == sim::ascend::CoreKind::AIC) {
            for (int event = 0; event < 3; event++) core.set_flag(Pipe::M, Pipe::MTE1, event, "TPipe");
            for (int event = 0; event < 3; event++) core.wait_flag(Pipe::M, Pipe::MTE1, event, "TPipe::Destroy");
        }
        core.pipe_barrier(Pipe::ALL);
        Stream stream(machine, c, block, buffers, l0c);
        stream.exec(kernel.body);
        machine.run_core(c);
    }
}

} // namespace tandem::ascend_backend
