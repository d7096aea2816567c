#include "tandem/AsyncIR.h"

#include <atomic>
#include <sstream>

namespace tandem::ir {

using namespace Halide::Internal;
using Halide::Int;

namespace {

const char *const copy_name = "tandem_copy";
const char *const wait_name = "tandem_wait";
const char *const mma_name = "tandem_mma";
const char *const vector_op_name = "tandem_vector_op";
const char *const core_id_name = "tandem_core_id";
const char *const grid_size_name = "tandem_grid_size";
const char *const cluster_tile_name = "tandem_cluster_tile";
const char *const vector_op_prefix = "tandem.vector_op.";
const char *const arrive_name = "tandem_arrive";
const char *const set_flag_name = "tandem_set_flag";
const char *const wait_flag_name = "tandem_wait_flag";
const char *const expect_name = "tandem_expect";
const char *const fence_name = "tandem_fence_proxy_async";
const char *const advance_name = "tandem_advance";
const char *const pipe_barrier_name = "tandem_pipe_barrier";
const char *const vector_instruction_name = "tandem_vector";
const char *const sync_name = "tandem_sync";
const char *const mesh_barrier_name = "tandem_mesh_barrier";
const char *const mma_wait_name = "tandem_mma_wait";
const char *const setmaxnreg_name = "tandem_setmaxnreg";
const char *const warpgroup_name = "tandem_warpgroup";
const char *const cross_set_name = "tandem_cross_core_set";
const char *const cross_wait_name = "tandem_cross_core_wait";
const char *const vector_core_name = "tandem_vector_core";

Stmt make_call(const char *name, const std::vector<Expr> &args) {
    return Evaluate::make(Call::make(Int(32), name, args, Call::Extern));
}

const Call *as_call(const Stmt &s, const char *name) {
    const Evaluate *e = s.as<Evaluate>();
    if (!e)
        return nullptr;
    const Call *c = e->value.as<Call>();
    return (c && c->name == name) ? c : nullptr;
}

std::string str(const Expr &e) {
    const StringImm *s = e.as<StringImm>();
    internal_assert(s) << "tandem intrinsic: expected a buffer name, got " << e << "\n";
    return s->value;
}

int int_arg(const Expr &e) {
    const IntImm *i = e.as<IntImm>();
    internal_assert(i) << "tandem intrinsic: expected a constant, got " << e << "\n";
    return int(i->value);
}

class Touches : public IRVisitor {
public:
    Touches(const std::string &b, bool only_writes) : buffer(b), only_writes(only_writes) {}
    const std::string &buffer;
    bool only_writes;
    bool found = false;

private:
    using IRVisitor::visit;
    void visit(const Load *op) override {
        if (!only_writes && op->name == buffer)
            found = true;
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        if (op->name == buffer)
            found = true;
        IRVisitor::visit(op);
    }
    void visit(const Call *op) override {
        if (op->name == copy_name) {
            if (str(op->args[0]) == buffer || (!only_writes && str(op->args[2]) == buffer))
                found = true;
        } else if (op->name == mma_name) {
            if (str(op->args[0]) == buffer)
                found = true;
            if (!only_writes && (str(op->args[4]) == buffer || str(op->args[8]) == buffer))
                found = true;
        } else if (op->name == vector_op_name) {
            for (size_t i = 2; i + 3 < op->args.size() + 1; i += 4) {
                if (str(op->args[i]) == buffer && (!only_writes || int_arg(op->args[i + 3])))
                    found = true;
            }
        }
        IRVisitor::visit(op);
    }
};

} // namespace

Stmt make_copy(const CopyOp &op) {
    std::vector<Expr> args = {op.dst, op.dst_offset, op.src, op.src_offset, int(op.dims.size())};
    for (const CopyDim &d : op.dims) {
        args.push_back(d.extent);
        args.push_back(d.dst_stride);
        args.push_back(d.src_stride);
    }
    args.push_back(op.barrier);
    args.push_back(op.slot);
    if (op.multicast > 1)
        args.push_back(op.multicast);
    if (op.multicast > 1 && op.sender.defined())
        args.push_back(op.sender);
    return make_call(copy_name, args);
}

bool as_copy(const Stmt &s, CopyOp *op) {
    const Call *c = as_call(s, copy_name);
    if (!c)
        return false;
    op->dst = str(c->args[0]);
    op->dst_offset = c->args[1];
    op->src = str(c->args[2]);
    op->src_offset = c->args[3];
    int dims = int_arg(c->args[4]);
    op->dims.clear();
    for (int d = 0; d < dims; d++) {
        op->dims.push_back({c->args[5 + 3 * d], c->args[6 + 3 * d], c->args[7 + 3 * d]});
    }
    op->barrier = str(c->args[5 + 3 * dims]);
    op->slot = c->args[6 + 3 * dims];
    op->multicast = c->args.size() > size_t(7 + 3 * dims) ? int_arg(c->args[7 + 3 * dims]) : 0;
    op->sender = c->args.size() > size_t(8 + 3 * dims) ? c->args[8 + 3 * dims] : Expr();
    return true;
}

Stmt make_wait(const WaitOp &op) {
    if (op.parity.defined())
        return make_call(wait_name, {op.barrier, op.slot, op.parity});
    return make_call(wait_name, {op.barrier, op.slot});
}

bool as_wait(const Stmt &s, WaitOp *op) {
    const Call *c = as_call(s, wait_name);
    if (!c)
        return false;
    op->barrier = str(c->args[0]);
    op->slot = c->args[1];
    op->parity = c->args.size() > 2 ? c->args[2] : Expr();
    return true;
}

Stmt make_mma(const MmaOp &op) {
    Stmt e = make_call(mma_name, {op.acc, op.acc_offset, op.acc_stride_n, op.acc_stride_m, op.a,
                                  op.a_offset, op.a_stride_k, op.a_stride_m, op.b, op.b_offset,
                                  op.b_stride_n, op.b_stride_k, op.n, op.m, op.k});
    if (op.accumulate.defined()) {
        const Call *c = e.as<Evaluate>()->value.as<Call>();
        std::vector<Expr> args = c->args;
        args.push_back(op.accumulate);
        return make_call(mma_name, args);
    }
    return e;
}

bool as_mma(const Stmt &s, MmaOp *op) {
    const Call *c = as_call(s, mma_name);
    if (!c)
        return false;
    const auto &a = c->args;
    *op = MmaOp{str(a[0]), str(a[4]), str(a[8]), a[1],
                a[2],      a[3],      a[5],      a[6],
                a[7],      a[9],      a[10],     a[11],
                a[12],     a[13],     a[14],     a.size() > 15 ? a[15] : Expr()};
    return true;
}

Stmt make_vector_op(const VectorOp &op, const Stmt &body) {
    static std::atomic<int> counter{0};
    std::vector<Expr> args = {op.label, op.flops};
    for (const Region &r : op.regions) {
        args.push_back(r.buffer);
        args.push_back(r.lo);
        args.push_back(r.extent);
        args.push_back(int(r.write));
    }
    Expr info = Call::make(Int(32), vector_op_name, args, Call::Extern);
    return LetStmt::make(vector_op_prefix + std::to_string(counter++), info, body);
}

bool as_vector_op(const Stmt &s, VectorOp *op, Stmt *body) {
    const LetStmt *let = s.as<LetStmt>();
    if (!let)
        return false;
    const Call *c = let->value.as<Call>();
    if (!c || c->name != vector_op_name)
        return false;
    op->label = str(c->args[0]);
    op->flops = c->args[1];
    op->regions.clear();
    for (size_t i = 2; i + 3 < c->args.size(); i += 4) {
        op->regions.push_back(
            {str(c->args[i]), c->args[i + 1], c->args[i + 2], int_arg(c->args[i + 3]) != 0});
    }
    *body = let->body;
    return true;
}

Expr core_id() {
    return Call::make(Int(32), core_id_name, {}, Call::PureExtern);
}

bool is_core_id(const Expr &e) {
    const Call *c = e.as<Call>();
    return c && c->name == core_id_name;
}

Expr grid_size() {
    return Call::make(Int(32), grid_size_name, {}, Call::PureExtern);
}

Expr cluster_tile(const Expr &owns, const Expr &tile, const Expr &fallback) {
    return Call::make(Int(32), cluster_tile_name, {owns, tile, fallback}, Call::PureExtern);
}

bool as_cluster_tile(const Expr &e, Expr *owns, Expr *tile, Expr *fallback) {
    const Call *c = e.as<Call>();
    if (!c || c->name != cluster_tile_name)
        return false;
    *owns = c->args[0];
    *tile = c->args[1];
    *fallback = c->args[2];
    return true;
}

bool is_grid_size(const Expr &e) {
    const Call *c = e.as<Call>();
    return c && c->name == grid_size_name;
}

Stmt make_set_flag(const FlagOp &op) {
    return make_call(set_flag_name, {op.src, op.dst, op.event});
}
Stmt make_wait_flag(const FlagOp &op) {
    return make_call(wait_flag_name, {op.src, op.dst, op.event});
}

static bool as_flag(const Call *c, FlagOp *op) {
    if (!c)
        return false;
    *op = FlagOp{str(c->args[0]), str(c->args[1]), c->args[2]};
    return true;
}
bool as_set_flag(const Stmt &s, FlagOp *op) {
    return as_flag(as_call(s, set_flag_name), op);
}
bool as_wait_flag(const Stmt &s, FlagOp *op) {
    return as_flag(as_call(s, wait_flag_name), op);
}

Stmt make_pipe_barrier(const std::string &pipe) {
    return make_call(pipe_barrier_name, {pipe});
}

Stmt make_cross_core_set(const std::string &pipe, const Expr &flag) {
    return make_call(cross_set_name, {pipe, flag});
}
Stmt make_cross_core_wait(const Expr &flag) {
    return make_call(cross_wait_name, {flag});
}

bool as_cross_core_set(const Stmt &s, std::string *pipe, Expr *flag) {
    const Call *c = as_call(s, cross_set_name);
    if (!c)
        return false;
    *pipe = str(c->args[0]);
    *flag = c->args[1];
    return true;
}

bool as_cross_core_wait(const Stmt &s, Expr *flag) {
    const Call *c = as_call(s, cross_wait_name);
    if (!c)
        return false;
    *flag = c->args[0];
    return true;
}

Expr vector_core() {
    return Call::make(Halide::Bool(), vector_core_name, {}, Call::PureExtern);
}

bool is_vector_core(const Expr &e) {
    const Call *c = e.as<Call>();
    return c && c->name == vector_core_name;
}

Stmt make_mix(const Stmt &cube, const Stmt &vector) {
    return Block::make(IfThenElse::make(!vector_core(), cube),
                       IfThenElse::make(vector_core(), vector));
}

bool as_mix(const Stmt &s, Stmt *cube, Stmt *vector) {
    const Block *b = s.as<Block>();
    const IfThenElse *c = b ? b->first.as<IfThenElse>() : nullptr;
    const IfThenElse *v = b ? b->rest.as<IfThenElse>() : nullptr;
    const Not *n = c ? c->condition.as<Not>() : nullptr;
    if (!n || !is_vector_core(n->a) || !v || !is_vector_core(v->condition))
        return false;
    *cube = c->then_case;
    *vector = v->then_case;
    return true;
}

Stmt make_vector_instruction(const VectorInstruction &op) {
    const bool repeat = !op.count.defined();
    std::vector<Expr> args = {op.op,
                              op.dst,
                              op.dst_offset,
                              repeat ? Expr(0) : op.count,
                              int(op.scalar.defined()),
                              op.scalar.defined() ? op.scalar : Expr(0.0f),
                              op.mode,
                              int(repeat),
                              repeat ? op.mask : Expr(0),
                              repeat ? op.repeats : Expr(0),
                              Expr(int(op.gather_base)),
                              Expr(int(op.gather_window)),
                              int(op.strides.size())};
    for (const auto &[block, rep] : op.strides) {
        args.push_back(block);
        args.push_back(rep);
    }
    for (const auto &[buffer, offset] : op.srcs) {
        args.push_back(buffer);
        args.push_back(offset);
    }
    return make_call(vector_instruction_name, args);
}

bool is_vector_instructions(const Stmt &body) {
    Stmt first = body;
    while (first.as<Block>() || first.as<For>()) {
        if (const Block *b = first.as<Block>())
            first = b->first;
        else
            first = first.as<For>()->body;
    }
    VectorInstruction v;
    std::string pipe;
    return as_vector_instruction(first, &v) || as_pipe_barrier(first, &pipe);
}

bool as_vector_instruction(const Stmt &s, VectorInstruction *op) {
    const Call *c = as_call(s, vector_instruction_name);
    if (!c)
        return false;
    op->op = str(c->args[0]);
    op->dst = str(c->args[1]);
    op->dst_offset = c->args[2];
    const bool repeat = int_arg(c->args[7]) != 0;
    op->count = repeat ? Expr() : c->args[3];
    op->scalar = int_arg(c->args[4]) ? c->args[5] : Expr();
    op->mode = int(int_arg(c->args[6]));
    op->mask = repeat ? c->args[8] : Expr();
    op->repeats = repeat ? c->args[9] : Expr();
    op->gather_base = int_arg(c->args[10]);
    op->gather_window = int_arg(c->args[11]);
    const size_t strides = size_t(int_arg(c->args[12]));
    op->strides.clear();
    for (size_t i = 0; i < strides; i++)
        op->strides.push_back(
            {int(int_arg(c->args[13 + 2 * i])), int(int_arg(c->args[14 + 2 * i]))});
    op->srcs.clear();
    for (size_t i = 13 + 2 * strides; i + 1 < c->args.size(); i += 2)
        op->srcs.push_back({str(c->args[i]), c->args[i + 1]});
    return true;
}

bool as_pipe_barrier(const Stmt &s, std::string *pipe) {
    const Call *c = as_call(s, pipe_barrier_name);
    if (!c)
        return false;
    *pipe = str(c->args[0]);
    return true;
}

Stmt make_arrive(const ArriveOp &op) {
    if (op.cluster > 1)
        return make_call(arrive_name, {op.barrier, op.slot, op.cluster});
    return make_call(arrive_name, {op.barrier, op.slot});
}

bool as_arrive(const Stmt &s, ArriveOp *op) {
    const Call *c = as_call(s, arrive_name);
    if (!c)
        return false;
    op->barrier = str(c->args[0]);
    op->slot = c->args[1];
    op->cluster = c->args.size() > 2 ? int_arg(c->args[2]) : 0;
    return true;
}

Stmt make_expect(const ArriveOp &op, const Expr &bytes) {
    return make_call(expect_name, {op.barrier, op.slot, bytes});
}

bool as_expect(const Stmt &s, ArriveOp *op, Expr *bytes) {
    const Call *c = as_call(s, expect_name);
    if (!c)
        return false;
    op->barrier = str(c->args[0]);
    op->slot = c->args[1];
    *bytes = c->args[2];
    return true;
}

Stmt make_fence_proxy_async() {
    return make_call(fence_name, {});
}
bool is_fence_proxy_async(const Stmt &s) {
    return as_call(s, fence_name) != nullptr;
}

Stmt make_advance(const std::string &counter) {
    return make_call(advance_name, {counter});
}

bool as_advance(const Stmt &s, std::string *counter) {
    const Call *c = as_call(s, advance_name);
    if (!c)
        return false;
    *counter = str(c->args[0]);
    return true;
}

Stmt make_sync(const std::string &engine) {
    return make_call(sync_name, {engine});
}

bool as_sync(const Stmt &s, std::string *engine) {
    const Call *c = as_call(s, sync_name);
    if (!c)
        return false;
    *engine = str(c->args[0]);
    return true;
}

Stmt make_mesh_barrier(const std::string &label) {
    return make_call(mesh_barrier_name, {label});
}

bool as_mesh_barrier(const Stmt &s, std::string *label) {
    const Call *c = as_call(s, mesh_barrier_name);
    if (!c)
        return false;
    *label = str(c->args[0]);
    return true;
}

Stmt make_mma_wait(const std::string &acc, int pending) {
    return make_call(mma_wait_name, {acc, pending});
}

bool as_mma_wait(const Stmt &s, std::string *acc, int *pending) {
    const Call *c = as_call(s, mma_wait_name);
    if (!c)
        return false;
    *acc = str(c->args[0]);
    *pending = int_arg(c->args[1]);
    return true;
}

Stmt make_setmaxnreg(int registers, bool increase) {
    return make_call(setmaxnreg_name, {registers, int(increase)});
}

bool as_setmaxnreg(const Stmt &s, int *registers, bool *increase) {
    const Call *c = as_call(s, setmaxnreg_name);
    if (!c)
        return false;
    *registers = int_arg(c->args[0]);
    *increase = int_arg(c->args[1]) != 0;
    return true;
}

Expr warpgroup() {
    return Call::make(Int(32), warpgroup_name, {}, Call::PureExtern);
}

bool is_warpgroup(const Expr &e) {
    const Call *c = e.as<Call>();
    return c && c->name == warpgroup_name;
}

std::string full_barrier(const std::string &buffer) {
    return buffer + ".full";
}
std::string empty_barrier(const std::string &buffer) {
    return buffer + ".empty";
}
std::string stage_var(const std::string &buffer) {
    return buffer + ".stage";
}

Stmt substitute(const std::string &var, const Expr &value, const Stmt &s) {
    return Halide::Internal::substitute(var, value, s);
}

bool touches(const Stmt &s, const std::string &buffer) {
    Touches t(buffer, false);
    s.accept(&t);
    return t.found;
}

bool writes(const Stmt &s, const std::string &buffer) {
    Touches t(buffer, true);
    s.accept(&t);
    return t.found;
}

std::string to_string(const Stmt &s) {
    std::ostringstream os;
    os << s;
    return os.str();
}

} // namespace tandem::ir
