#include "AscendCube.h"

#include "FirstMma.h"
#include "Nest.h"
#include "tandem/AsyncIR.h"

#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

std::string l0(const std::string &operand) { return operand + ".l0"; }

class Cube : public IRMutator {
public:
    explicit Cube(CompileContext &ctx) : ctx(ctx) {}
    std::map<std::string, std::pair<Halide::Type, int64_t>> l0_buffers; // name -> (type, elements)

private:
    using IRMutator::visit;
    CompileContext &ctx;
    LoopScope loops;

    Stmt visit(const For *op) override {
        push_loop(loops, op);
        Stmt s = IRMutator::visit(op);
        loops.pop(op->name);
        return s;
    }

    Stmt load_data(const std::string &operand, const Halide::Type &type, const Expr &offset,
                   const std::vector<std::pair<Expr, Expr>> &dims /* extent, L1 stride; innermost first */) {
        ir::CopyOp c;
        c.dst = l0(operand);
        c.src = operand;
        c.dst_offset = 0;
        c.src_offset = offset;
        Expr dense = 1;
        int64_t elements = 1;
        for (const auto &[extent, stride] : dims) {
            c.dims.push_back({extent, dense, stride});
            dense = dense * extent;
            elements *= std::max<int64_t>(1, constant_upper_bound(extent, loops));
        }
        c.barrier = ir::full_barrier(c.dst);
        c.slot = 0;
        // L0A/L0B operands start at 512-byte boundaries: round each version up.
        int64_t align = ctx.target.machine.integer("l0ab_align") / type.bytes();
        elements = (elements + align - 1) / align * align;
        auto &b = l0_buffers[c.dst];
        b = {type, std::max(b.second, elements)};
        Stmt copy = Block::make(ir::make_copy(c), ir::make_wait({c.barrier, 0}));
        return ProducerConsumer::make(c.dst, true, copy);
    }

    Stmt visit(const Evaluate *op) override {
        ir::MmaOp m;
        if (!ir::as_mma(op, &m)) return op;
        Halide::Type a_type = Halide::BFloat(16), b_type = Halide::BFloat(16);
        for (const auto &[name, f] : ctx.functions) {
            if (name == m.a) a_type = f.output_types()[0];
            if (name == m.b) b_type = f.output_types()[0];
        }
        Stmt a = load_data(m.a, a_type, m.a_offset, {{m.k, m.a_stride_k}, {m.m, m.a_stride_m}});
        Stmt b = load_data(m.b, b_type, m.b_offset, {{m.n, m.b_stride_n}, {m.k, m.b_stride_k}});
        ir::MmaOp cube = m;
        cube.a = l0(m.a);
        cube.a_offset = 0;
        cube.a_stride_k = 1;
        cube.a_stride_m = m.k;
        cube.b = l0(m.b);
        cube.b_offset = 0;
        cube.b_stride_n = 1;
        cube.b_stride_k = m.n;
        Stmt mma = ProducerConsumer::make(l0(m.a), false, ir::make_mma(cube));
        return Block::make({a, b, mma});
    }
};

} // namespace

Stmt stage_cube_operands(const Stmt &s, CompileContext &ctx) {
    Cube cube(ctx);
    Stmt result = cube.mutate(overwrite_first_mma(s, ctx));
    for (const auto &[name, buffer] : cube.l0_buffers) {
        result = Allocate::make(name, buffer.first, Halide::MemoryType::Auto, {Expr(int(buffer.second))}, const_true(), result);
        ctx.funcs.push_back(name);
        ctx.directives[name].async_copy = true;
        ctx.directives[name].multi_buffer = 2; // ping-pong L0 slots
    }
    if (!cube.l0_buffers.empty()) {
        ctx.notes.push_back("ascend cube: operands staged L1 -> L0A/L0B in two ping-pong slots; accumulators in L0C");
    }
    return result;
}

} // namespace tandem::lower
