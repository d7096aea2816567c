#include "Executor.h"

#include "Plan.h"
#include "VectorCost.h"

#include "common/Evaluator.h"
#include "tandem/AsyncIR.h"

#include <cstdlib>
#include <unordered_map>

namespace tandem::hopper_backend {

using namespace Halide::Internal;
using sim::hopper::AgentOps;
using sim::hopper::AgentProgram;

namespace {

/** One instruction of a role: loops and ifs are jumps, ops are intrinsic statements. */
struct Instr {
    enum Kind { ForInit, ForTest, ForNext, Let, IfFalse, Jump, Op } kind;
    std::string name;
    Expr a, b;
    Stmt op;
    int target = -1;
};

void compile(const Stmt &s, std::vector<Instr> &code) {
    if (!s.defined())
        return;
    if (const For *f = s.as<For>()) {
        code.push_back({Instr::ForInit, f->name, f->min, f->extent, Stmt(), -1});
        int test = int(code.size());
        code.push_back({Instr::ForTest, f->name, Expr(), Expr(), Stmt(), -1});
        compile(f->body, code);
        code.push_back({Instr::ForNext, f->name, Expr(), Expr(), Stmt(), test});
        code[test].target = int(code.size());
    } else if (const LetStmt *l = s.as<LetStmt>()) {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(s, &v, &body)) {
            code.push_back({Instr::Op, "", Expr(), Expr(), s, -1});
            return;
        }
        code.push_back({Instr::Let, l->name, l->value, Expr(), Stmt(), -1});
        compile(l->body, code);
    } else if (const IfThenElse *i = s.as<IfThenElse>()) {
        int branch = int(code.size());
        code.push_back({Instr::IfFalse, "", i->condition, Expr(), Stmt(), -1});
        compile(i->then_case, code);
        if (i->else_case.defined()) {
            int jump = int(code.size());
            code.push_back({Instr::Jump, "", Expr(), Expr(), Stmt(), -1});
            code[branch].target = int(code.size());
            compile(i->else_case, code);
            code[jump].target = int(code.size());
        } else {
            code[branch].target = int(code.size());
        }
    } else if (const Block *b = s.as<Block>()) {
        compile(b->first, code);
        compile(b->rest, code);
    } else if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
        compile(pc->body, code);
    } else if (const Evaluate *e = s.as<Evaluate>()) {
        if (!is_const(e->value))
            code.push_back({Instr::Op, "", Expr(), Expr(), s, -1});
    } else {
        internal_error << "hopper executor: unexpected statement\n" << s << "\n";
    }
}

/** What a CTA's agents share: buffer ids, barrier ids, the kernel. */
struct Cta {
    const Kernel &kernel;
    const Shapes &shapes; // the call's runtime extents
    int grid;             // CTAs launched
    sim::hopper::Machine &machine;
    int index;
    std::unordered_map<std::string, int> shared;                 // args and smem by name
    std::vector<std::unordered_map<std::string, int>> registers; // per agent
    std::map<std::pair<std::string, int64_t>, int> barriers;     // (name, version) -> id
    std::set<std::string> thread_tiles;  // copied by threads: TMA cannot (Plan.h)
    std::set<std::string> operand_tiles; // MMA operands by TMA: their loads end at the reads
    const Plan *plan = nullptr;          // its tail checks, evaluated as the GPU would
    // Each vector op's shared-memory work (VectorCost.h) by its Stmt and its regions' extents,
    // shared by the CTAs
    std::map<std::pair<const void *, std::vector<int64_t>>, VectorCost> *vector_costs = nullptr;
};

class Role : public AgentProgram {
public:
    Role(Cta &cta, const std::vector<Instr> &code, int agent)
        : cta(cta), code(code), agent(agent),
          eval([this](const std::string &n) -> const BufferRef & { return buffer(n); },
               [this](const Call *c, double *v) {
                   if (ir::is_core_id(c))
                       *v = this->cta.index;
                   else if (ir::is_grid_size(c))
                       *v = this->cta.grid;
                   else if (ir::is_warpgroup(c))
                       *v = this->agent;
                   else
                       return false;
                   return true;
               }) {
        for (const BarrierDecl &b : cta.kernel.barriers) {
            for (int s = 0; s < b.slots; s++)
                phase[{b.name, s}] = b.initial_phase;
        }
        for (const auto &[name, value] : cta.shapes)
            eval.vars[name] = double(value);
    }

    Step step(AgentOps &ops) override {
        if (!started) {
            // Barrier initialisation by warpgroup 0, then a CTA-wide barrier (as the kernel's
            // prologue does before the roles branch).
            if (agent == 0 && !initialised) {
                for (const BarrierDecl &b : cta.kernel.barriers) {
                    for (int s = 0; s < b.slots; s++)
                        ops.mbarrier_init(cta.barriers.at({b.name, s}), b.arrivals);
                }
                initialised = true;
            }
            // In a cluster, the peers' barriers must be initialised before any arrival or
            // multicast reaches them: a cluster-wide barrier.
            waiting = cta.kernel.cluster > 1 ? "the cluster barrier after mbarrier initialisation"
                                             : "the CTA-wide barrier after mbarrier initialisation";
            if (!(cta.kernel.cluster > 1 ? ops.cluster_sync()
                                         : ops.named_barrier_sync(0, cta.kernel.warpgroups)))
                return Step::Blocked;
            started = true;
            return Step::Progress;
        }
        while (pc < code.size()) {
            const Instr &in = code[pc];
            switch (in.kind) {
            case Instr::ForInit:
                vars()[in.name] = eval.scalar(in.a);
                vars()[in.name + ".end"] = eval.scalar(in.a) + eval.scalar(in.b);
                pc++;
                break;
            case Instr::ForTest:
                pc = vars()[in.name] < vars()[in.name + ".end"] ? pc + 1 : size_t(in.target);
                break;
            case Instr::ForNext:
                vars()[in.name] += 1;
                pc = size_t(in.target);
                break;
            case Instr::Let:
                vars()[in.name] = eval.scalar(in.a);
                pc++;
                break;
            case Instr::IfFalse:
                pc = eval.scalar(in.a) != 0 ? pc + 1 : size_t(in.target);
                break;
            case Instr::Jump:
                pc = size_t(in.target);
                break;
            case Instr::Op: {
                std::string counter;
                if (ir::as_advance(in.op, &counter)) {
                    vars()[counter] += 1;
                    pc++;
                    break;
                }
                if (!run(in.op, ops))
                    return Step::Blocked;
                pc++;
                return Step::Progress;
            }
            }
        }
        return Step::Done;
    }

    std::string waiting_for() const override { return waiting; }

private:
    Cta &cta;
    const std::vector<Instr> &code;
    int agent;
    Evaluator eval;
    size_t pc = 0;
    bool started = false, initialised = false;
    std::map<std::pair<std::string, int64_t>, int> phase; // the parity this agent waits for next
    std::unordered_map<std::string, BufferRef> refs;
    std::string waiting;

    std::unordered_map<std::string, double> &vars() { return eval.vars; }

    int id(const std::string &name) {
        if (agent < int(cta.registers.size())) {
            auto r = cta.registers[agent].find(name);
            if (r != cta.registers[agent].end())
                return r->second;
        }
        auto it = cta.shared.find(name);
        internal_assert(it != cta.shared.end())
            << "hopper executor: no buffer " << name << " for agent " << agent << "\n";
        return it->second;
    }

    const BufferRef &buffer(const std::string &name) {
        auto it = refs.find(name);
        if (it != refs.end())
            return it->second;
        int b = id(name);
        BufferRef r{cta.machine.data(b), cta.machine.type(b), cta.machine.elements(b), b};
        return refs[name] = r;
    }

    int64_t value(const Expr &e) { return int64_t(eval.scalar(e)); }

    int barrier(const std::string &name, int64_t slot) {
        auto it = cta.barriers.find({name, slot});
        internal_assert(it != cta.barriers.end())
            << "hopper executor: no mbarrier " << name << "[" << slot << "]\n";
        return it->second;
    }

    /** The global tensor of a kernel argument and the coordinates of element `offset` in it. */
    sim::hopper::TensorView view(const std::string &arg, int64_t offset,
                                 std::vector<int64_t> *coords) {
        const KernelArg *a = cta.kernel.arg(arg);
        sim::hopper::TensorView v;
        v.buffer = id(arg);
        coords->clear();
        for (const KernelArg::Dim &d : a->copy_view(cta.shapes)) {
            const int64_t extent = *as_const_int(d.extent), stride = *as_const_int(d.stride);
            v.extents.push_back(extent);
            v.strides.push_back(stride);
            coords->push_back((offset / stride) % extent);
        }
        return v;
    }

    /** A TMA box: `extents` of the global view at `coords`, dense in shared memory at `smem`. */
    struct TmaBox {
        std::vector<int64_t> coords, extents;
        int64_t smem;
    };

    /** The TMA boxes of a copy. The smem tile may have a row pitch wider than the copy (a full
     * tile with a tail's data): the box then covers the pitch, and TMA's out-of-bounds rules drop
     * (store) or zero (load) what lies outside the tensor. Boxes wider than 256 elements are split
     * (row by row when the innermost dim is the wide one), as TMA requires. */
    std::vector<TmaBox> boxes(const ir::CopyOp &c, const sim::hopper::TensorView &v,
                              const std::vector<int64_t> &origin, int64_t smem_offset,
                              bool global_is_src) {
        // Match the copy's dims to the tensor's by stride; a dim Halide dropped (extent 1) is a box
        // dim of extent 1.
        size_t rank = v.extents.size();
        std::vector<int64_t> full(rank, 1), smem_stride(rank, 0);
        for (const ir::CopyDim &dim : c.dims) {
            int64_t global_stride = value(global_is_src ? dim.src_stride : dim.dst_stride);
            int64_t e = value(dim.extent);
            size_t d = 0;
            while (d < rank && v.strides[d] != global_stride)
                d++;
            internal_assert(d < rank || e == 1) << "hopper: copy of " << c.src << " -> " << c.dst
                                                << " does not follow the tensor's dims\n";
            if (d == rank)
                continue;
            full[d] = e;
            smem_stride[d] = value(global_is_src ? dim.dst_stride : dim.src_stride);
        }
        int64_t dense = 1;
        for (size_t d = 0; d < rank; d++) {
            if (full[d] == 1 && smem_stride[d] == 0)
                smem_stride[d] = dense;
            dense = smem_stride[d] * full[d];
        }
        for (size_t d = 0; d + 1 < rank; d++) {
            if (full[d + 1] <= 1)
                continue;
            int64_t pitch = smem_stride[d + 1] / std::max<int64_t>(smem_stride[d], 1);
            internal_assert(pitch >= full[d] && pitch * smem_stride[d] == smem_stride[d + 1])
                << "hopper: copy of " << c.src << " -> " << c.dst
                << " has no row-major smem tile\n";
            full[d] = pitch;
        }
        internal_assert(smem_stride[0] == 1 || full[0] == 1)
            << "hopper: smem tile of " << c.dst << " is not dense\n";
        const int64_t limit = 256;
        std::vector<TmaBox> out;
        // Chunks along every dim; a chunk of an inner dim narrower than the tile is one row high.
        std::vector<int64_t> chunk(rank);
        bool inner_split = full[0] > limit;
        for (size_t d = 0; d < rank; d++)
            chunk[d] = (inner_split && d > 0) ? 1 : std::min(full[d], limit);
        std::vector<int64_t> at(rank, 0);
        while (true) {
            TmaBox b;
            b.smem = smem_offset;
            for (size_t d = 0; d < rank; d++) {
                b.coords.push_back(origin[d] + at[d]);
                b.extents.push_back(std::min(chunk[d], full[d] - at[d]));
                b.smem += at[d] * (d == 0 ? 1 : smem_stride[d]);
            }
            out.push_back(b);
            size_t d = 0;
            for (; d < rank; d++) {
                at[d] += chunk[d];
                if (at[d] < full[d])
                    break;
                at[d] = 0;
            }
            if (d == rank)
                break;
        }
        return out;
    }

    /** The copy's tail checks (Plan::tail_checks) with this call's values, as hopper::check_tail
     * evaluates them on the GPU: a failed one is an error here where the GPU kernel traps. */
    void check_tails(const Stmt &s, const ir::CopyOp &c, bool load) {
        auto checks = cta.plan->tail_checks.find(s.get());
        if (checks == cta.plan->tail_checks.end())
            return;
        const int64_t offset = value(load ? c.src_offset : c.dst_offset);
        for (const TailCheck &t : checks->second) {
            const int64_t extent = value(c.dims.at(t.dim).extent), stride = value(t.view_stride);
            if (extent <= 0)
                continue; // an empty region: the box lands where nothing reads it
            const int64_t view_extent = value(t.view_extent), edge = value(t.edge);
            int64_t coordinate = offset / stride - (offset % stride < 0);
            if (!t.outermost)
                coordinate = ((coordinate % view_extent) + view_extent) % view_extent;
            if (extent > t.reach || (extent != t.reach && coordinate + extent < edge)) {
                throw sim::SimError("hopper: the tail check of the copy " + c.src + " -> " + c.dst +
                                    " fails (the GPU kernel would trap): a box of " +
                                    std::to_string(t.reach) + " for " + std::to_string(extent) +
                                    " elements at " + std::to_string(coordinate) +
                                    " of an edge at " + std::to_string(edge));
            }
        }
    }

    /** Runs one op; false when it must block. */
    bool run(const Stmt &s, AgentOps &ops) {
        ir::CopyOp c;
        ir::WaitOp w;
        ir::ArriveOp a;
        ir::MmaOp m;
        ir::VectorOp v;
        Expr bytes;
        Stmt body;
        int registers = 0, pending = 0;
        bool increase = false;
        if (ir::as_expect(s, &a, &bytes)) {
            // A region a tile leaves empty (a mask, a window: its loop's extent is negative, box
            // sizes too) lands nothing.
            ops.mbarrier_arrive_expect_tx(barrier(a.barrier, value(a.slot)),
                                          std::max<int64_t>(value(bytes), 0));
        } else if (ir::as_copy(s, &c) &&
                   (cta.thread_tiles.count(c.src) || cta.thread_tiles.count(c.dst))) {
            sim::Box src{value(c.src_offset), {}}, dst{value(c.dst_offset), {}};
            bool empty = false; // a region the tile leaves empty: nothing lands (the expect is 0)
            for (const ir::CopyDim &d : c.dims) {
                empty = empty || value(d.extent) <= 0;
                src.dims.push_back({value(d.extent), value(d.src_stride)});
                dst.dims.push_back({value(d.extent), value(d.dst_stride)});
            }
            if (empty) {
                // (On the GPU the threads copy nothing and complete the full tile's bytes, which
                // its expect counts.)
            } else if (cta.kernel.arg(c.dst)) {
                ops.thread_store(id(c.dst), dst, id(c.src), src, c.src + " -> " + c.dst);
                ops.bulk_commit_group();
            } else {
                int64_t slot = value(c.slot);
                ops.thread_load(id(c.dst), dst, id(c.src), src, barrier(c.barrier, slot),
                                c.src + " -> " + c.dst + " (version " + std::to_string(slot) + ")");
            }
        } else if (ir::as_copy(s, &c)) {
            std::vector<int64_t> coords;
            check_tails(s, c, c.dst != cta.kernel.args.back().name);
            if (c.dst == cta.kernel.args.back().name) {
                auto out = view(c.dst, value(c.dst_offset), &coords);
                for (const TmaBox &b : boxes(c, out, coords, value(c.src_offset), false)) {
                    ops.tma_store(out, b.coords, b.extents, id(c.src), b.smem,
                                  c.src + " -> " + c.dst);
                }
                ops.bulk_commit_group();
            } else {
                auto in = view(c.src, value(c.src_offset), &coords);
                if (cta.operand_tiles.count(c.dst)) {
                    // Its tensor map ends where the algorithm's reads do (TensorMap::bounds).
                    const std::vector<Expr> reads = cta.kernel.arg(c.src)->view_read_extents();
                    for (size_t d = 0; d < in.extents.size() && d < reads.size(); d++)
                        in.extents[d] = std::min(in.extents[d], value(reads[d]));
                }
                int64_t slot = value(c.slot);
                const std::string label =
                    c.src + " -> " + c.dst + " (version " + std::to_string(slot) + ")";
                bool empty = false; // a region the tile leaves empty: no box to load
                for (const ir::CopyDim &d : c.dims)
                    empty = empty || value(d.extent) <= 0;
                std::vector<TmaBox> all;
                if (!empty)
                    all = boxes(c, in, coords, value(c.dst_offset), true);
                for (size_t i = 0; i < all.size(); i++) {
                    const TmaBox &b = all[i];
                    if (c.multicast > 1) {
                        // The boxes dealt over the cluster's CTAs, each multicast to all of them.
                        if (int(i % size_t(c.multicast)) != ops.cluster_rank())
                            continue;
                        ops.tma_load_multicast(id(c.dst), b.smem, in, b.coords, b.extents,
                                               barrier(c.barrier, slot), (1u << c.multicast) - 1,
                                               label);
                    } else {
                        ops.tma_load(id(c.dst), b.smem, in, b.coords, b.extents,
                                     barrier(c.barrier, slot), label);
                    }
                }
            }
        } else if (ir::as_wait(s, &w)) {
            int64_t slot = value(w.slot);
            if (cta.barriers.count({w.barrier, slot})) {
                int &bit = phase[{w.barrier, slot}];
                int parity = w.parity.defined() ? int(value(w.parity)) : bit;
                waiting = "wait " + w.barrier + "[" + std::to_string(slot) + "] parity " +
                          std::to_string(parity);
                if (!ops.mbarrier_try_wait_parity(barrier(w.barrier, slot), parity))
                    return false;
                bit ^= 1;
            } else {
                // The empty barrier of a store source: the bulk stores reading it are done.
                waiting = "bulk stores out of " + w.barrier;
                if (!ops.bulk_wait_group_read(0))
                    return false;
            }
        } else if (ir::as_arrive(s, &a) && a.cluster > 1) {
            for (int rank = 0; rank < a.cluster; rank++)
                ops.mbarrier_arrive_remote(barrier(a.barrier, value(a.slot)), rank);
        } else if (ir::as_arrive(s, &a)) {
            ops.mbarrier_arrive(barrier(a.barrier, value(a.slot)));
        } else if (ir::as_mma(s, &m)) {
            ops.wgmma_fence();
            ops.wgmma(
                id(m.acc),
                sim::Box{
                    value(m.acc_offset),
                    {{value(m.n), value(m.acc_stride_n)}, {value(m.m), value(m.acc_stride_m)}}},
                id(m.a),
                sim::Box{value(m.a_offset),
                         {{value(m.k), value(m.a_stride_k)}, {value(m.m), value(m.a_stride_m)}}},
                id(m.b),
                sim::Box{value(m.b_offset),
                         {{value(m.n), value(m.b_stride_n)}, {value(m.k), value(m.b_stride_k)}}},
                m.acc + " += " + m.a + " * " + m.b);
            ops.wgmma_commit_group();
        } else if (std::string acc; ir::as_mma_wait(s, &acc, &pending)) {
            ops.wgmma_wait_group(pending);
        } else if (ir::as_vector_op(s, &v, &body)) {
            std::vector<sim::Access> accesses;
            std::vector<int64_t> extents;
            for (const ir::Region &r : v.regions) {
                accesses.push_back(
                    {id(r.buffer), sim::Box{value(r.lo), {{value(r.extent), 1}}}, r.write});
                extents.push_back(accesses.back().box.dims[0].extent);
            }
            // Its shared-memory work as the emitter runs it, once per op and region extents.
            auto [known, added] = cta.vector_costs->try_emplace({s.get(), extents});
            if (added) {
                known->second = vector_cost(*cta.plan, v, body, warpgroup_threads,
                                            [&](const Expr &e) { return value(e); });
            }
            ops.vector_op(v.label, value(v.flops), known->second.wavefronts, known->second.rounds,
                          accesses, [&] { eval.elements(body); });
        } else if (ir::is_fence_proxy_async(s)) {
            ops.fence_proxy_async();
        } else if (ir::as_setmaxnreg(s, &registers, &increase)) {
            ops.setmaxnreg(registers, increase);
        } else {
            internal_error << "hopper executor: unexpected op " << s << "\n";
        }
        return true;
    }
};

} // namespace

int resident_ctas(const Kernel &kernel, const Plan &plan, const sim::hopper::HopperParams &params) {
    int64_t accumulator_bytes = 0;
    for (const SramBuffer &buf : kernel.buffers) {
        if (buf.in_registers)
            accumulator_bytes += buf.elements() * buf.type.bytes();
    }
    const int64_t registers =
        std::max(register_floor(kernel),
                 accumulator_bytes / 4 / (warpgroup_threads * kernel.consumer_warpgroups) +
                     params.thread_registers);
    return params.resident_ctas(launch_shared_bytes(kernel, plan), cta_threads(kernel), registers);
}

void execute(const Kernel &kernel, sim::hopper::Machine &machine,
             const std::map<std::string, int> &arguments, const Shapes &shapes) {
    std::vector<Instr> code;
    compile(kernel.body, code);
    std::set<std::string> thread_tiles;
    // A stride TMA cannot take at this call: the variant whose threads copy those tiles.
    // TANDEM_HOPPER_CHECK_PROVEN_TAILS: keep and evaluate the tail checks TailProof removes too.
    const bool prove_tails = std::getenv("TANDEM_HOPPER_CHECK_PROVEN_TAILS") == nullptr;
    // As the emitted dispatcher chooses: the variant whose threads copy the tensors of the
    // pitches that fail here, else the one that thread-copies every runtime pitch.
    Plan plan = plan_kernel(kernel, StridePolicy::tma(), prove_tails);
    try {
        check_call(plan.launch_checks, shapes, kernel.name);
    } catch (const ShapeError &e) {
        if (!e.target_limit)
            throw;
        std::map<std::string, Expr> values;
        for (const auto &[name, value] : shapes)
            values[name] = Expr(int(value));
        const std::vector<std::string> classes = pitch_classes(plan);
        const unsigned failing = failing_pitches(plan, classes, [&](size_t i) {
            return is_const_one(simplify(substitute(values, plan.launch_checks[i].holds)));
        });
        try {
            plan = plan_kernel(kernel, StridePolicy::threads(), prove_tails);
        } catch (const Error &) {
            throw e; // no thread-copy variant (its tiles do not fit): the call is refused
        }
        const StridePolicy policy = stride_policy(classes, failing);
        if (!policy.all) {
            try {
                plan = plan_kernel(kernel, policy, prove_tails);
            } catch (const Error &) {
                // that variant's tiles do not fit: the one that thread-copies every pitch
            }
        }
    }
    std::set<std::string> operand_tiles;
    for (const auto &[name, tile] : plan.tiles) {
        if (tile.threads())
            thread_tiles.insert(name);
        else if (tile.kind != TileKind::Plain)
            operand_tiles.insert(name);
    }
    std::map<std::string, Expr> extents;
    for (const auto &[name, value] : shapes)
        extents[name] = Expr(int(value));
    // A persistent grid is sized at launch as on the GPU: this machine's SMs (at most the machine
    // description's it was compiled for), or the call's tile count where it is smaller (the kernel
    // strides by tandem_grid_size()).
    int grid = kernel.grid;
    if (kernel.ctas_per_sm) {
        const int64_t tiles = *as_const_int(simplify(substitute(extents, kernel.tiles)));
        const int64_t sms = std::min<int64_t>(machine.params().sms, kernel.target.units());
        grid = int(std::clamp<int64_t>(tiles, 1, sms * kernel.ctas_per_sm));
        // Whole clusters (as many as the SMs hold at once, at least one).
        const int c = kernel.cluster;
        grid = int(std::max<int64_t>(
            c, std::min<int64_t>((grid + c - 1) / c * c, sms * kernel.ctas_per_sm / c * c)));
    }
    machine.set_grid(grid, resident_ctas(kernel, plan, machine.params()));
    // The CTAs that run at once share one time line; each has its own agents and buffers.
    std::vector<Cta> ctas;
    ctas.reserve(size_t(grid));
    std::map<std::pair<const void *, std::vector<int64_t>>, VectorCost> vector_costs;
    for (int index = 0; index < grid; index++) {
        ctas.push_back(Cta{
            kernel, shapes, grid, machine, index, {}, {}, {}, thread_tiles, operand_tiles, &plan});
        ctas.back().vector_costs = &vector_costs;
        for (const auto &[name, id] : arguments)
            ctas.back().shared[name] = id;
    }
    machine.run_grid(grid, kernel.cluster, [&](sim::hopper::Machine::CtaBuilder &b, int index) {
        Cta &cta = ctas[size_t(index)];
        std::vector<int> agents;
        for (int a = 0; a < kernel.warpgroups; a++) {
            agents.push_back(b.add_agent(kernel.warpgroups == 1 ? "warpgroup"
                                         : a == 0               ? "producer"
                                                  : "consumer " + std::to_string(a - 1)));
        }
        cta.registers.assign(kernel.warpgroups, {});
        for (const SramBuffer &buf : kernel.buffers) {
            sim::DType t = dtype_of(buf.type);
            if (!buf.in_registers) {
                cta.shared[buf.name] =
                    b.add_smem(buf.name, t, buf.elements(),
                               buf.chip_slot_bytes ? buf.slots * buf.chip_slot_bytes : -1);
                continue;
            }
            // Accumulators: one copy per warpgroup that computes (not the producer).
            for (int a = kernel.warpgroups == 1 ? 0 : 1; a < kernel.warpgroups; a++) {
                cta.registers[a][buf.name] =
                    b.add_registers(agents[a], buf.name, t, buf.elements());
            }
        }
        for (const BarrierDecl &bar : kernel.barriers) {
            for (int s = 0; s < bar.slots; s++) {
                cta.barriers[{bar.name, s}] =
                    b.add_barrier(bar.name + "[" + std::to_string(s) + "]");
            }
        }
        std::vector<std::unique_ptr<AgentProgram>> programs;
        for (int a = 0; a < kernel.warpgroups; a++)
            programs.push_back(std::make_unique<Role>(cta, code, a));
        return programs;
    });
}

} // namespace tandem::hopper_backend
