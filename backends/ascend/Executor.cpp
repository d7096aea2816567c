#include "Executor.h"

#include "Cube.h"

#include "common/Evaluator.h"
#include "tandem/AsyncIR.h"

#include <memory>
#include <unordered_map>

namespace tandem::ascend_backend {

using namespace Halide::Internal;
using sim::ascend::Pipe;

namespace {

Pipe pipe_named(const std::string &name) {
    static const std::map<std::string, Pipe> pipes = {{"MTE2", Pipe::MTE2}, {"MTE1", Pipe::MTE1},
                                                      {"M", Pipe::M},       {"FIX", Pipe::FIX},
                                                      {"V", Pipe::V},       {"MTE3", Pipe::MTE3}};
    auto it = pipes.find(name);
    internal_assert(it != pipes.end()) << "ascend executor: no pipe " << name << "\n";
    return it->second;
}

class Stream {
public:
    Stream(const Kernel &kernel, sim::ascend::Machine &machine, int core, int block,
           std::unordered_map<std::string, BufferRef> buffers, const Shapes &shapes)
        : kernel(kernel), machine(machine), core(machine.core(core)), block_index(block),
          buffers(std::make_shared<std::unordered_map<std::string, BufferRef>>(std::move(buffers))),
          eval(lookup(), hook()) {
        for (const auto &[name, value] : shapes)
            eval.vars[name] = double(value);
    }

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
            if (ir::as_vector_op(s, &v, &body))
                return vector_op(v, body);
            eval.vars[l->name] = eval.scalar(l->value);
            exec(l->body);
        } else if (const Block *b = s.as<Block>()) {
            exec(b->first);
            exec(b->rest);
        } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            exec(pc->body);
        } else if (const IfThenElse *i = s.as<IfThenElse>()) {
            if (eval.scalar(i->condition) != 0)
                exec(i->then_case);
            else if (i->else_case.defined())
                exec(i->else_case);
        } else if (s.as<Evaluate>()) {
            op(s);
        } else {
            internal_error << "ascend executor: unexpected statement\n" << s << "\n";
        }
    }

private:
    const Kernel &kernel;
    sim::ascend::Machine &machine;
    sim::ascend::Core &core;
    int block_index; // GetBlockIdx(): the core's index among its kind
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
        bool aiv = machine.kind(core.id()) == sim::ascend::CoreKind::AIV;
        return [c, aiv](const Call *call, double *v) {
            if (ir::is_core_id(call))
                *v = c;
            else if (ir::is_vector_core(call))
                *v = aiv;
            else
                return false;
            return true;
        };
    }

    int64_t value(const Expr &e) { return int64_t(eval.scalar(e)); }
    int id(const std::string &name) { return lookup()(name).id; }

    void op(const Stmt &s) {
        ir::CopyOp c;
        ir::FlagOp f;
        ir::MmaOp m;
        ir::VectorInstruction vi;
        std::string counter;
        Expr flag;
        if (ir::as_copy(s, &c) && is_cube_copy(kernel, c)) {
            cube(cube_copy(kernel, c));
        } else if (ir::as_copy(s, &c)) {
            sim::Box dst{value(c.dst_offset), {}}, src{value(c.src_offset), {}};
            for (const ir::CopyDim &d : c.dims) {
                int64_t e = value(d.extent);
                if (e <= 0)
                    return; // a region the tile leaves empty: the emitted copy is skipped too
                dst.dims.push_back({e, value(d.dst_stride)});
                src.dims.push_back({e, value(d.src_stride)});
            }
            core.data_copy(id(c.dst), dst, id(c.src), src,
                           c.src + " -> " + c.dst); // the vector path
        } else if (ir::as_mma(s, &m)) {
            cube(cube_mma(kernel, m));
        } else if (ir::as_set_flag(s, &f)) {
            core.set_flag(pipe_named(f.src), pipe_named(f.dst), int(value(f.event)));
        } else if (ir::as_wait_flag(s, &f)) {
            core.wait_flag(pipe_named(f.src), pipe_named(f.dst), int(value(f.event)));
        } else if (ir::as_vector_instruction(s, &vi)) {
            sim::ascend::VectorCall v;
            v.op = vi.op;
            auto operand = [&](const std::string &buffer, const Expr &offset, size_t i) {
                sim::ascend::VectorOperand o{id(buffer), value(offset)};
                if (i < vi.strides.size())
                    o.block_stride = vi.strides[i].first, o.repeat_stride = vi.strides[i].second;
                return o;
            };
            v.dst = operand(vi.dst, vi.dst_offset, 0);
            for (size_t i = 0; i < vi.srcs.size(); i++)
                v.srcs.push_back(operand(vi.srcs[i].first, vi.srcs[i].second, i + 1));
            v.scalar = vi.scalar.defined() ? float(eval.scalar(vi.scalar)) : 0.0f;
            v.count = vi.count.defined() ? value(vi.count) : -1;
            v.mask = vi.mask.defined() ? int(value(vi.mask)) : 0;
            v.repeats = vi.repeats.defined() ? value(vi.repeats) : 0;
            v.mode = vi.mode;
            v.gather_base = vi.gather_base;
            v.gather_window = vi.gather_window;
            core.vector_instruction(v);
        } else if (ir::as_cross_core_set(s, &counter, &flag)) {
            core.cross_core_set_flag(pipe_named(counter), int(value(flag)));
        } else if (ir::as_cross_core_wait(s, &flag)) {
            core.cross_core_wait_flag(int(value(flag)));
        } else if (ir::as_pipe_barrier(s, &counter)) {
            core.pipe_barrier(pipe_named(counter));
        } else if (ir::as_advance(s, &counter)) {
            eval.vars[counter] += 1;
        } else {
            const Evaluate *e = s.as<Evaluate>();
            internal_assert(is_const(e->value)) << "ascend executor: unexpected op " << s << "\n";
        }
    }

    /** The real cube instruction (Cube.h), as the emitted kernel calls it. */
    void cube(const CubeCall &call) {
        auto v = [&](const Expr &e) { return value(e); };
        const std::string label = call.src + " -> " + call.dst;
        switch (call.kind) {
        case CubeCall::Kind::Nd2Nz: {
            sim::ascend::Nd2Nz p;
            p.n_value = v(call.n_value);
            p.d_value = v(call.d_value);
            p.src_d_value = v(call.src_d_value);
            p.dst_nz_c0_stride = v(call.dst_nz_c0_stride);
            if (p.n_value > 0 && p.d_value > 0) // AscendC: nothing to copy, no instruction
                core.nd2nz(id(call.dst), v(call.dst_offset), id(call.src), v(call.src_offset), p,
                           "Nd2Nz " + label);
            break;
        }
        case CubeCall::Kind::LoadData:
        case CubeCall::Kind::LoadDataTranspose8: {
            // `count` calls, each with its own `index`: LoadData2D (16-bit fractals, optionally
            // transposed) or LoadDataWithTranspose (8-bit 32 x 32 blocks).
            const bool blocks8 = call.kind == CubeCall::Kind::LoadDataTranspose8;
            const int64_t count = v(call.count);
            internal_assert(v(call.check) != 0)
                << "ascend executor: " << label << " starts inside a fractal (or 32-row block) "
                << "of its L1 tile\n";
            for (int64_t i = 0; i < count; i++) {
                eval.vars[cube_index()] = double(i);
                const int64_t repeats = v(call.repeat_times);
                if (repeats <= 0)
                    continue;
                if (blocks8) {
                    sim::ascend::LoadDataTranspose8 p;
                    p.start_index = v(call.start_index);
                    p.repeat_times = repeats;
                    p.src_stride = v(call.src_stride);
                    p.dst_gap = v(call.dst_gap);
                    p.dst_frac_gap = v(call.dst_frac_gap);
                    core.load_data_transpose_8(id(call.dst), v(call.dst_offset), id(call.src),
                                               v(call.src_offset), p,
                                               "LoadDataWithTranspose " + label);
                } else {
                    sim::ascend::LoadData2D p;
                    p.start_index = v(call.start_index);
                    p.repeat_times = repeats;
                    p.src_stride = v(call.src_stride);
                    p.dst_gap = v(call.dst_gap);
                    p.transpose = call.transpose;
                    core.load_data_2d(id(call.dst), v(call.dst_offset), id(call.src),
                                      v(call.src_offset), p, "LoadData " + label);
                }
            }
            eval.vars.erase(cube_index());
            break;
        }
        case CubeCall::Kind::Mmad:
            core.mmad_fractal(id(call.dst), v(call.dst_offset), id(call.src), v(call.src_offset),
                              id(call.src2), v(call.src2_offset), v(call.m), v(call.n), v(call.k),
                              v(call.accumulate) != 0,
                              call.dst + " += " + call.src + " * " + call.src2);
            break;
        case CubeCall::Kind::Fixpipe: {
            sim::ascend::FixpipeNz2Nd p;
            p.n_size = v(call.n_size);
            p.m_size = v(call.m_size);
            p.src_stride = v(call.fix_src_stride);
            p.dst_stride = v(call.dst_stride);
            core.fixpipe_nz2nd(id(call.dst), v(call.dst_offset), id(call.src), v(call.src_offset),
                               p, "Fixpipe " + label);
            break;
        }
        }
    }

    void vector_op(const ir::VectorOp &v, const Stmt &body) {
        if (ir::is_vector_instructions(body))
            return exec(body); // AscendC's instructions, one by one
        std::vector<sim::Access> accesses;
        for (const ir::Region &r : v.regions) {
            accesses.push_back(
                {id(r.buffer), sim::Box{value(r.lo), {{value(r.extent), 1}}}, r.write});
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

void execute(const Kernel &kernel, sim::ascend::Machine &machine,
             const std::map<std::string, int> &arguments, const Shapes &shapes) {
    // An AIV-only kernel (no tile MMA) runs on the vector cores, an AIC-only one on the cube
    // cores, a mix kernel on both (GetBlockIdx() is the index among the cores of a kind).
    std::vector<sim::ascend::CoreKind> kinds;
    if (kernel.mix || !kernel.vector_units_only)
        kinds.push_back(sim::ascend::CoreKind::AIC);
    if (kernel.mix || kernel.vector_units_only)
        kinds.push_back(sim::ascend::CoreKind::AIV);
    std::map<std::string, int> globals = arguments;
    if (kernel.mix) {
        machine.launch_mix();
        for (const KernelArg &w :
             kernel.workspaces) // the caller's allocation (AscendC: the launch's workspace)
            globals[w.name] = machine.add_gm(w.name, dtype_of(w.type), w.elements());
    }
    for (sim::ascend::CoreKind kind : kinds) {
        for (int block = 0; block < machine.cores_of(kind); block++) {
            const int c = machine.core_of(kind, block);
            std::unordered_map<std::string, BufferRef> buffers;
            auto add = [&](const std::string &name, int id) {
                buffers[name] =
                    BufferRef{machine.data(id), machine.type(id), machine.elements(id), id};
            };
            for (const auto &[name, id] : globals)
                add(name, id);
            for (const SramBuffer &b : kernel.buffers) {
                if (!sim::ascend::has_memory(kind, b.ascend_mem))
                    continue; // the other side's (mix)
                add(b.name,
                    machine.add_local(c, b.name, b.ascend_mem, dtype_of(b.type), b.elements()));
            }
            // The emitted kernel's prologue: AscendC's TPipe sets M_MTE1 0..2 on an AIC, and the
            // kernel's pipe.Destroy() waits for them and drains every pipe.
            sim::ascend::Core &core = machine.core(c);
            if (kind == sim::ascend::CoreKind::AIC) {
                for (int event = 0; event < sim::ascend::kTPipeReservedEvents; event++)
                    core.set_flag(Pipe::M, Pipe::MTE1, event, "TPipe");
                for (int event = 0; event < sim::ascend::kTPipeReservedEvents; event++)
                    core.wait_flag(Pipe::M, Pipe::MTE1, event, "TPipe::Destroy");
            }
            core.pipe_barrier(Pipe::ALL);
            Stream stream(kernel, machine, c, block, buffers, shapes);
            stream.exec(kernel.body);
            machine.run_core(c);
        }
    }
}

} // namespace tandem::ascend_backend
