// The Ascend model's scheduler and time: the discrete-event simulation of the ended cores over
// their pipes' queues in one time order (a core's dispatch, each pipe's next op, flags and
// cross-core flags firing), the costs of GM reads through the shared L2 and HBM, and the Machine
// API (buffers, cores, the report, the trace). The state: AscendRun.h.

#include "sim/AscendRun.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace tandem::sim::ascend {

// ---------------------------------------------------------------------------------------------
// GM reads through the shared L2 and HBM, and the counters of cross-core flags
// ---------------------------------------------------------------------------------------------

Cycles Machine::Impl::gm_read_cost(const Op &op, const Buffer &from, const Buffer &to,
                                   Cycles start) {
    detail::L2Lines::Split split = l2_lines.read(op.src, op.src_box, bytes_of(from.type));
    Cycles own = params.gm_read_cycles(to.mem, split.miss, split.hit);
    double through = l2.book(start, split.miss + split.hit);
    if (split.fill > 0) {
        through = std::max(through, hbm.book(start, split.fill)); // whole lines come from HBM
    }
    Cycles cost = std::max(own, Cycles(std::ceil(through)) - start + params.copy_fixed);
    // A line another read brought in but not yet arrived: this read waits for it, then
    // takes its bytes from L2.
    if (split.ready > double(start)) {
        cost = std::max(cost, Cycles(std::ceil(split.ready)) - start +
                                  Cycles(std::ceil(double(split.hit) / params.l2_read)));
    }
    l2_lines.arrived(double(start + cost));
    return cost;
}

const std::vector<Fire> &Machine::Impl::cross_passes(int core, int flag) {
    return cross_counter[{core, flag}];
}

const Fire &Machine::Impl::cross_pass(int core, int flag, int64_t ordinal) {
    ++cross_consumed[{core, flag}];
    return cross_counter[{core, flag}][size_t(ordinal)];
}

void Machine::Impl::count_up(int core, int flag, Fire fire) {
    std::vector<Fire> &counter = cross_counter[{core, flag}];
    counter.push_back(std::move(fire));
    int64_t pending = int64_t(counter.size()) - cross_consumed[{core, flag}];
    if (pending > kCrossCounterMax && !cross_overflow) {
        cross_overflow = true;
        deadlock = true;
        deadlock_message +=
            std::string(deadlock_message.empty() ? "" : "\n") + "cross-core flag " +
            std::to_string(flag) + " of " + core_text(core) + " is set " + std::to_string(pending) +
            " times without a wait: its counter holds at most 15 (the hardware hangs)";
    }
}

void Machine::Impl::cross_flags_left() {
    if (deadlock)
        return; // (a core that stopped early leaves its flags)
    for (const auto &[key, counter] : cross_counter) {
        const int64_t left = int64_t(counter.size()) - cross_consumed[key];
        if (left <= 0)
            continue;
        deadlock = true;
        deadlock_message += std::string(deadlock_message.empty() ? "" : "\n") + "cross-core flag " +
                            std::to_string(key.second) + " of " + core_text(key.first) +
                            " is left set " + std::to_string(left) +
                            " time(s) at the end of the kernel: the counter outlives it, so the "
                            "next kernel on these cores would pass a wait it should not (every "
                            "set needs its wait)";
    }
}

void Machine::Impl::cross_set(int core, int flag, Fire fire) {
    if (kind(core) == CoreKind::AIC) {
        count_up(aiv_of(core, 0), flag, fire);
        count_up(aiv_of(core, 1), flag, std::move(fire));
        return;
    }
    const int aic = aic_of(core);
    aiv_sets[{core, flag}].push_back(std::move(fire));
    const std::vector<Fire> &a = aiv_sets[{aiv_of(aic, 0), flag}],
                            &b = aiv_sets[{aiv_of(aic, 1), flag}];
    const size_t next = cross_counter[{aic, flag}].size();
    if (a.size() > next && b.size() > next) {
        Fire both{std::max(a[next].time, b[next].time), a[next].clock};
        for (size_t i = 0; i < both.clock.size(); ++i)
            both.clock[i] = std::max(both.clock[i], b[next].clock[i]);
        count_up(aic, flag, std::move(both));
    }
}

// ---------------------------------------------------------------------------------------------
// Simulation of one core
// ---------------------------------------------------------------------------------------------

Machine::Impl::CoreRun::CoreRun(Impl &impl, int core, Core::State &state,
                                detail::VectorClocks &clocks, int base, Core::State &gm)
    : impl_(impl), core_(core), state_(state), gm_state_(gm), program_(state.program),
      dispatched_(program_.size(), -1),
      dispatch_clock_(program_.size() * size_t(clocks.agents()), 0),
      fires_(size_t(kPipes * kPipes * impl.params.event_ids)), clocks_(clocks), base_(base) {
    for (size_t i = 0; i < program_.size(); ++i) {
        queue_[0].push_back(int(i)); // S walks every op
        if (program_[i].pipe != Pipe::S) {
            queue_[size_t(program_[i].pipe)].push_back(int(i));
        }
    }
}

bool Machine::Impl::CoreRun::next(int &best, Cycles &best_at) const {
    best = -1;
    for (int p = 0; p < kPipes; ++p) {
        Cycles at = 0;
        if (!ready(p, at)) {
            continue;
        }
        if (best < 0 || at < best_at || (at == best_at && head(p) < head(best))) {
            best = p;
            best_at = at;
        }
    }
    return best >= 0;
}

void Machine::Impl::CoreRun::end() {
    Cycles end = *std::max_element(free_.begin(), free_.end());
    state_.end = end;
    for (int p = 0; p < kPipes; ++p) {
        if (next_[size_t(p)] < queue_[size_t(p)].size()) {
            report_deadlock(end);
            break;
        }
    }
}

bool Machine::Impl::CoreRun::ready(int p, Cycles &at) const {
    if (done(p)) {
        return false;
    }
    int index = head(p);
    const Op &op = program_[size_t(index)];
    at = free_[size_t(p)];
    if (p != 0) {
        if (dispatched_[size_t(index)] < 0) {
            return false;
        }
        at = std::max(at, dispatched_[size_t(index)]);
    } else if (op.pipe != Pipe::S) {
        return true; // a dispatch
    }
    if (op.kind == OpKind::WaitFlag) {
        const std::vector<Fire> &fires =
            fires_[size_t(impl_.flag_key(op.flag_src, op.flag_dst, op.event))];
        if (int64_t(fires.size()) <= op.ordinal) {
            return false;
        }
        at = std::max(at, fires[size_t(op.ordinal)].time);
    }
    if (op.kind == OpKind::CrossWait) {
        const std::vector<Fire> &passes = impl_.cross_passes(core_, op.event);
        if (int64_t(passes.size()) <= op.ordinal) {
            return false;
        }
        at = std::max(at, passes[size_t(op.ordinal)].time);
    }
    if (op.kind == OpKind::Barrier && op.barrier == Pipe::ALL) {
        for (int q = 1; q < kPipes; ++q) {
            if (!done(q) && head(q) < index) {
                return false; // q still has ops recorded before the barrier
            }
            at = std::max(at, free_[size_t(q)]);
        }
    }
    return true;
}

void Machine::Impl::CoreRun::step(int p, Cycles start) {
    int index = head(p);
    ++next_[size_t(p)];
    const Op &op = program_[size_t(index)];
    Cycles idle_from = free_[size_t(p)];
    if (p == 0 && op.pipe != Pipe::S) {
        // The scalar stream dispatches the op to its pipe with S's clock.
        Cycles end = start + impl_.params.scalar_issue_cycles;
        free_[0] = end;
        dispatched_[size_t(index)] = end;
        std::copy(clock(0), clock(0) + agents(),
                  dispatch_clock_.begin() + ptrdiff_t(index) * agents());
        impl_.trace.add(op.label, "dispatch", core_, track_of(Pipe::S), start, end - start);
        return;
    }
    if (p != 0) {
        clocks_.join(base_ + p, dispatch_clock_.data() + ptrdiff_t(index) * agents());
        idle_from = std::max(idle_from, dispatched_[size_t(index)]);
    }
    Impl::Buffer *dst = op.dst >= 0 ? &impl_.buffers[size_t(op.dst)] : nullptr;
    Impl::Buffer *src = op.src >= 0 ? &impl_.buffers[size_t(op.src)] : nullptr;
    Cycles cost = op.cost;
    if (op.kind == OpKind::DataCopy && src->mem == Mem::GM && op.src_box.elements() > 0) {
        cost = impl_.gm_read_cost(op, *src, *dst, start);
    }
    if (dst && dst->mem == Mem::GM) { // into L2, written back to HBM: neither waited for
        const int64_t bytes = op.dst_box.elements() * bytes_of(dst->type);
        impl_.l2.book(start, bytes);
        impl_.hbm.book(start, bytes);
    }
    Cycles end = start + cost;
    uint64_t name = OpName{op.kind, Pipe(p), core_, op.label}.pack();
    bool numerics = impl_.numerics;
    Cycles trace_start = start;
    switch (op.kind) {
    case OpKind::DataCopy:
    case OpKind::LoadData:
        access(op.src, op.src_box, false, p, name);
        access(op.dst, op.dst_box, true, p, name);
        if (numerics && op.compute) {
            op.compute(); // a real instruction's own element map (Nd2Nz)
        } else if (numerics && op.dst_box.elements() > 0) {
            detail::copy_box(dst->data.get(), op.dst_box, src->data.get(), op.src_box,
                             bytes_of(dst->type));
        }
        break;
    case OpKind::Fixpipe:
        access(op.src, op.src_box, false, p, name);
        access(op.dst, op.dst_box, true, p, name);
        if (numerics && op.compute) {
            op.compute(); // Nz -> ND, converting
        }
        break;
    case OpKind::Mmad:
        access(op.src, op.src_box, false, p, name);
        access(op.src2, op.src2_box, false, p, name);
        access(op.dst, op.dst_box, true, p, name);
        if (numerics && op.compute) {
            op.compute(); // Zz x Zn -> Nz
        }
        break;
    case OpKind::Vector:
        // V's ops overlap in its pipeline: each is its own epoch of V_DONE, ordered after an
        // earlier one only by a PipeBarrier<PIPE_V>, a PIPE_ALL or a flag a V set after it.
        ++v_issued_;
        for (const Access &x : op.accesses) {
            access(x.buffer, x.box, x.write, p, name, base_ + kVDone, v_issued_);
        }
        if (numerics && op.compute) {
            op.compute();
        }
        break;
    case OpKind::SetFlag: {
        std::vector<Fire> &fires =
            fires_[size_t(impl_.flag_key(op.flag_src, op.flag_dst, op.event))];
        fires.push_back(Fire{end, released(p)});
        clocks_.tick(base_ + p); // later ops of p are not ordered by this set
        break;
    }
    case OpKind::CrossSet:
        impl_.cross_set(core_, op.event, Fire{end, released(p)});
        clocks_.tick(base_ + p);
        break;
    case OpKind::CrossWait: {
        const Fire &fire = impl_.cross_pass(core_, op.event, op.ordinal);
        clocks_.join(base_ + p, fire.clock.data());
        trace_start = idle_from;
        break;
    }
    case OpKind::WaitFlag: {
        const std::vector<Fire> &fires =
            fires_[size_t(impl_.flag_key(op.flag_src, op.flag_dst, op.event))];
        clocks_.join(base_ + p, fires[size_t(op.ordinal)].clock.data());
        trace_start = idle_from; // show how long the pipe waited
        break;
    }
    case OpKind::Barrier:
        if (op.barrier == Pipe::ALL) {
            for (int q = 1; q < kPipes; ++q) {
                clocks_.join(base_, clock(q));
                clocks_.tick(base_ + q);
            }
            clock(0)[base_ + kVDone] = v_issued_;
            trace_start = idle_from;
        } else if (op.barrier == Pipe::V) {
            clock(p)[base_ + kVDone] = v_issued_; // V's later ops wait for its earlier ones
        }
        break;
    }
    free_[size_t(p)] = end;
    bool work = op.kind != OpKind::SetFlag && op.kind != OpKind::WaitFlag &&
                op.kind != OpKind::Barrier && op.kind != OpKind::CrossSet &&
                op.kind != OpKind::CrossWait;
    if (work) {
        state_.busy[size_t(p)] += cost;
    }
    impl_.trace.add(op.label, op_kind_name(op.kind), core_, track_of(Pipe(p)), trace_start,
                    end - trace_start);
}

// --- clocks -------------------------------------------------------------------------------------

std::vector<int64_t> Machine::Impl::CoreRun::released(int p) {
    std::vector<int64_t> c = clocks_.copy(base_ + p);
    if (Pipe(p) == Pipe::V) {
        c[size_t(base_ + kVDone)] = v_issued_;
    }
    return c;
}

// ---------------------------------------------------------------------------------------------
// The cores together
// ---------------------------------------------------------------------------------------------

void Machine::Impl::run_core(int core) {
    Core::State &state = *cores[size_t(core)]->state_;
    if (state.ran) {
        throw SimError("run_core(" + std::to_string(core) +
                       "): the core already ran; run each core once");
    }
    state.ran = true;
    ended.push_back(core);
}

void Machine::Impl::simulate() {
    // Every ended core's pipes in one time order (ties: lower core, then the core's own order),
    // so that the L2 sees the reads in the order they happen.
    // A core's clock domain: its own, or in a mix kernel its group's (AIC i and AIV 2i, 2i + 1,
    // joined by cross-core flags), whose GM accesses are checked online in the AIC's histories.
    std::map<int, std::unique_ptr<detail::VectorClocks>> domains; // by group (AIC) or core
    std::vector<std::unique_ptr<CoreRun>> runs;
    std::vector<int> groups; // per run: its clock domain
    for (int core : ended) {
        const int group = mix ? (kind(core) == CoreKind::AIC ? core : aic_of(core)) : core;
        const int base =
            mix ? (kind(core) == CoreKind::AIC ? 0 : 1 + (core - aiv_of(group, 0))) * kAgents : 0;
        auto &domain = domains[group];
        if (!domain) {
            domain = std::make_unique<detail::VectorClocks>();
            domain->reset(mix ? 3 * kAgents
                              : kAgents); // per core its pipes, and V_DONE: V ops known complete
        }
        runs.push_back(std::make_unique<CoreRun>(*this, core, *cores[size_t(core)]->state_, *domain,
                                                 base, *cores[size_t(group)]->state_));
        groups.push_back(group);
    }
    ended.clear();
    // A run's next op depends only on its own state and, through cross-core flags, on its clock
    // domain's: it is recomputed only after a step in that domain.
    struct Next {
        bool known = false, any = false;
        int pipe = 0;
        Cycles at = 0;
    };
    std::vector<Next> next(runs.size());
    std::vector<size_t> live(runs.size()); // runs that may still have work, in core order
    std::iota(live.begin(), live.end(), size_t(0));
    for (;;) {
        int best = -1;
        for (size_t i : live) {
            Next &n = next[i];
            if (!n.known) {
                n.any = runs[i]->next(n.pipe, n.at);
                n.known = true;
            }
            if (n.any && (best < 0 || n.at < next[size_t(best)].at)) {
                best = int(i);
            }
        }
        if (!mix) { // outside a mix kernel nothing else can unblock a run that has no next op
            live.erase(
                std::remove_if(live.begin(), live.end(), [&](size_t i) { return !next[i].any; }),
                live.end());
        }
        if (best < 0) {
            break;
        }
        runs[size_t(best)]->step(next[size_t(best)].pipe, next[size_t(best)].at);
        for (size_t i = 0; i < runs.size(); ++i) {
            if (groups[i] == groups[size_t(best)]) {
                next[i].known = false;
            }
        }
    }
    for (const auto &run : runs) {
        run->end();
    }
}

// ---------------------------------------------------------------------------------------------
// Machine
// ---------------------------------------------------------------------------------------------

Machine::Machine(const AscendParams &params, bool numerics, bool trace)
    : params_(params), numerics_(numerics) {
    auto require = [](bool ok, const std::string &message) {
        if (!ok) {
            throw SimError("AscendParams: " + message);
        }
    };
    require(params.cube_cores >= 1 && params.vector_cores >= 1 &&
                params.cube_cores + params.vector_cores <= kMaxCores,
            "cube_cores and vector_cores must be at least 1, and at most 4096 together");
    require(params.hbm_bytes_per_cycle > 0 && params.l2_bytes_per_cycle > 0,
            "hbm_bytes_per_cycle and l2_bytes_per_cycle must be positive");
    require(params.l1_bytes >= 0 && params.l0a_bytes >= 0 && params.l0b_bytes >= 0 &&
                params.l0c_bytes >= 0 && params.ub_bytes >= 0,
            "capacities must not be negative");
    require(params.l1_align >= 1 && params.ub_align >= 1 && params.l0ab_align >= 1 &&
                params.l0c_align >= 1,
            "alignments must be at least 1");
    for (const Path &path : kPaths) {
        require(params.*(path.rate) > 0, "copy rates must be positive");
    }
    require(params.copy_fixed >= 0 && params.cube_fixed >= 0 && params.vector_fixed >= 0 &&
                params.scalar_issue_cycles >= 0 && params.flag_cycles >= 0 &&
                params.pipe_barrier_cycles >= 0,
            "fixed costs must not be negative");
    require(params.vector_bytes_per_cycle >= 1, "vector_bytes_per_cycle must be at least 1");
    require(params.event_ids >= 1 && params.event_ids <= kMaxEventIds,
            "event_ids must be in [1, 64]");
    impl_ = std::make_unique<Impl>(params, numerics, trace);
    for (int c = 0; c < num_cores(); ++c) {
        impl_->cores.emplace_back(new Core(this, c));
    }
}

Machine::~Machine() = default;

int Machine::add_gm(const std::string &name, DType type, int64_t elements) {
    if (elements < 0) {
        throw SimError("add_gm '" + name + "': negative element count " + std::to_string(elements));
    }
    Impl::Buffer buffer{name, type, Mem::GM, -1, elements, 0, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(elements * bytes_of(type))]());
    }
    impl_->buffers.push_back(std::move(buffer));
    return int(impl_->buffers.size()) - 1;
}

int Machine::add_local(int core, const std::string &name, Mem mem, DType type, int64_t elements) {
    std::string what = "add_local '" + name + "'";
    if (core < 0 || core >= num_cores()) {
        throw SimError(what + ": core " + std::to_string(core) +
                       " does not exist (the machine has " + std::to_string(num_cores()) +
                       " cores)");
    }
    if (mem == Mem::GM) {
        throw SimError(what + ": GM is not a local memory; use add_gm");
    }
    if (!has_memory(kind(core), mem)) {
        throw SimError(what + ": " + mem_name(mem) + " is on the " +
                       (mem == Mem::UB ? "vector cores (AIV)" : "cube cores (AIC)") +
                       ", and core " + std::to_string(core) + " is " + impl_->core_text(core) +
                       " (the 910B's cube and vector cores share only GM)");
    }
    if (elements < 0) {
        throw SimError(what + ": negative element count " + std::to_string(elements));
    }
    int64_t bytes = elements * bytes_of(type);
    int64_t &used = impl_->used[size_t(core)][size_t(mem)];
    int64_t align = params_.alignment(mem);
    int64_t start = (used + align - 1) / align * align;
    int64_t capacity = params_.capacity(mem);
    if (start > capacity || bytes > capacity - start) {
        throw SimError(std::string(mem_name(mem)) + " overflow: buffer '" + name + "' needs " +
                       std::to_string(bytes) + " bytes of " + mem_name(mem) + " on " +
                       impl_->core_text(core) + " from byte " + std::to_string(start) +
                       " (aligned to " + std::to_string(align) + "), but " + mem_name(mem) +
                       " has " + std::to_string(capacity) +
                       " bytes; use smaller tiles or fewer buffers");
    }
    used = start + bytes;
    Impl::Buffer buffer{name, type, mem, core, elements, start, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(bytes)]());
    }
    impl_->buffers.push_back(std::move(buffer));
    return int(impl_->buffers.size()) - 1;
}

namespace {
[[noreturn]] void no_buffer(int buffer, size_t count) {
    throw SimError("buffer id " + std::to_string(buffer) + " does not exist (the machine has " +
                   std::to_string(count) + " buffers)");
}
} // namespace

void *Machine::data(int buffer) {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[size_t(buffer)].data.get();
}

DType Machine::type(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[size_t(buffer)].type;
}

int64_t Machine::elements(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[size_t(buffer)].elements;
}

const std::string &Machine::name(int buffer) const {
    if (buffer < 0 || size_t(buffer) >= impl_->buffers.size()) {
        no_buffer(buffer, impl_->buffers.size());
    }
    return impl_->buffers[size_t(buffer)].name;
}

Core &Machine::core(int c) {
    if (c < 0 || c >= num_cores()) {
        throw SimError("core " + std::to_string(c) + " does not exist (the machine has " +
                       std::to_string(num_cores()) + " cores)");
    }
    return *impl_->cores[size_t(c)];
}

int Machine::core_of(CoreKind k, int i) const {
    if (i < 0 || i >= cores_of(k)) {
        throw SimError(std::string(core_kind_name(k)) + " " + std::to_string(i) +
                       " does not exist (the machine has " + std::to_string(cores_of(k)) + ")");
    }
    return k == CoreKind::AIC ? i : params_.cube_cores + i;
}

void Machine::launch_mix() {
    if (params_.vector_cores != 2 * params_.cube_cores) {
        throw SimError("launch_mix: a mix kernel (KERNEL_TYPE_MIX_AIC_1_2) pairs each AIC with two "
                       "AIVs, but the "
                       "machine has " +
                       std::to_string(params_.cube_cores) + " AIC and " +
                       std::to_string(params_.vector_cores) + " AIV");
    }
    impl_->mix = true;
}

bool Machine::mix() const {
    return impl_->mix;
}

void Machine::run_core(int c) {
    core(c); // checks the index
    impl_->run_core(c);
}

Report Machine::finish() {
    for (const auto &core : impl_->cores) {
        const Core::State &state = *core->state_;
        if (!state.ran && !state.program.empty()) {
            throw SimError("finish: core " + std::to_string(core->id()) + " recorded " +
                           std::to_string(state.program.size()) +
                           " ops but never ran; call run_core(" + std::to_string(core->id()) +
                           ") first");
        }
    }
    impl_->simulate();
    impl_->cross_core_races();
    impl_->cross_flags_left();
    Report report;
    std::array<Cycles, kPipes> busy{};
    for (const auto &core : impl_->cores) {
        const Core::State &state = *core->state_;
        report.core_cycles.push_back(state.end);
        report.cycles = std::max(report.cycles, state.end);
        for (Pipe p : kWorkPipes) {
            busy[size_t(p)] += state.busy[size_t(p)];
            report.bound_cycles = std::max(report.bound_cycles, state.busy[size_t(p)]);
        }
    }
    for (Pipe p : kWorkPipes) {
        report.busy.push_back({pipe_name(p), busy[size_t(p)]});
    }
    Cycles hbm = Cycles(std::ceil(impl_->hbm.bytes / params_.hbm_bytes_per_cycle));
    Cycles l2 = Cycles(std::ceil(impl_->l2.bytes / params_.l2_bytes_per_cycle));
    report.busy.push_back({"HBM", hbm});
    report.busy.push_back({"L2", l2});
    report.bound_cycles = std::max({report.bound_cycles, hbm, l2});
    impl_->races.report(report, impl_->deadlock, impl_->deadlock_message);
    return report;
}

void Machine::write_trace(const std::string &path) const {
    impl_->simulate();
    std::vector<std::string> tracks(std::begin(kTrackNames), std::end(kTrackNames));
    std::vector<detail::TraceProcess> processes;
    for (const auto &core : impl_->cores) {
        if (core->state_->ran) {
            processes.push_back({core->id(), impl_->core_text(core->id()), tracks});
        }
    }
    impl_->trace.write(path, processes, impl_->labels);
}

} // namespace tandem::sim::ascend
