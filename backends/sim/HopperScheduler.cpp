// The Hopper model's scheduler and time: the event loop of a cluster (the earliest TMA completion,
// else the ready agent with the earliest time), an agent's steps, blocking and waking, the TMA
// unit's occupancy, the memory system shared by the SMs in time (SharedBandwidth, TimedL2) and the
// cost formulas, and the Machine API (buffers, CTAs and clusters, the report, the trace). The
// state: HopperRun.h.

#include "sim/HopperRun.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace tandem::sim::hopper {

// ---------------------------------------------------------------------------------------------
// Costs, and the memory system the SMs share in time
// ---------------------------------------------------------------------------------------------

HopperParams HopperParams::from(const ParamLookup &get) {
    return params_from<HopperParams>(get);
}

int HopperParams::resident_ctas(int64_t smem, int threads, int64_t registers) const {
    int64_t most = ctas_per_sm_max;
    most = std::min<int64_t>(most, threads_per_sm / std::max(threads, 1));
    most =
        std::min<int64_t>(most, smem_per_sm / std::max<int64_t>(smem + smem_reserved_per_cta, 1));
    const int64_t allocated = (std::max<int64_t>(registers, 1) + 7) / 8 * 8;
    most = std::min<int64_t>(most, registers_per_sm / (allocated * std::max(threads, 1)));
    return int(std::max<int64_t>(most, 1));
}

int64_t HopperParams::tma_cycles(int64_t miss, int64_t hit, int active) const {
    const double share = 1.0 / std::max(active, 1);
    const double from_hbm = std::min(tma_bytes_per_cycle, hbm_bytes_per_cycle * share),
                 from_l2 = std::min(tma_bytes_per_cycle, l2_bytes_per_cycle * share);
    return tma_latency + int64_t(std::ceil(double(miss) / from_hbm + double(hit) / from_l2));
}

SharedBandwidth::SharedBandwidth(double bytes_per_cycle) : rate_(bytes_per_cycle) {}

double SharedBandwidth::move(double start, double bytes, double port) {
    total_ += std::max(bytes, 0.0);
    double t = start;
    while (bytes > 0) {
        const size_t b = size_t(t / kBucketCycles);
        if (used_.size() <= b)
            used_.resize(b + 4096, 0.0);
        const double bucket_end = double(b + 1) * kBucketCycles;
        const double room = rate_ * kBucketCycles - used_[b];
        const double span = bucket_end - t;
        const double take = std::min(room, port * span);
        if (take >= bytes) {
            add(b, bytes);
            return t +
                   bytes / std::max(take / span, 1e-9); // at this bucket's rate for the transfer
        }
        if (take > 0) {
            add(b, take);
            bytes -= take;
        }
        t = bucket_end;
    }
    return t;
}

void SharedBandwidth::add(size_t bucket, double bytes) {
    if (tree_.size() < used_.size()) { // rebuild for the new size
        tree_.assign(used_.size(), 0.0);
        for (size_t i = 0; i < used_.size(); ++i) {
            tree_[i] += used_[i];
            size_t parent = i | (i + 1);
            if (parent < tree_.size())
                tree_[parent] += tree_[i];
        }
    }
    used_[bucket] += bytes;
    for (size_t i = bucket; i < tree_.size(); i |= i + 1)
        tree_[i] += bytes;
}

double SharedBandwidth::between(double from, double to) const {
    auto prefix = [&](double t) { // the buckets before the one t lies in, and that one
        if (t < 0)
            return 0.0;
        double sum = 0;
        for (int64_t i = std::min<int64_t>(int64_t(t / kBucketCycles), int64_t(tree_.size()) - 1);
             i >= 0; i = (i & (i + 1)) - 1)
            sum += tree_[size_t(i)];
        return sum;
    };
    return from > to ? 0.0 : prefix(to) - prefix(from - kBucketCycles);
}

TimedL2::Split TimedL2::read(int buffer, const Box &box, int element_bytes, double time) {
    Split split;
    uint64_t previous = ~uint64_t(0);
    // Every line (sector) a read touches moves whole: a row that straddles sectors costs more than
    // its bytes.
    detail::for_each_line(buffer, box, element_bytes, line_, [&](uint64_t key, int64_t) {
        if (key == previous)
            return; // the next run of the same line (short rows)
        previous = key;
        auto it = lines_.find(key);
        if (it == lines_.end()) {
            (warm_ ? split.hit : split.miss) += line_;
            lines_.emplace(key, Uses{time, time});
            return;
        }
        Uses &u = it->second;
        double since = time >= u.last    ? hbm_.between(u.last, time)
                       : time <= u.first ? hbm_.between(time, u.first)
                                         : 0;
        (since < capacity_ ? split.hit : split.miss) += line_;
        u.first = std::min(u.first, time);
        u.last = std::max(u.last, time);
    });
    return split;
}

int64_t HopperParams::wgmma_cycles(int64_t m, int64_t n, int64_t k, DType operands) const {
    const double rate = operands == DType::F16  ? wgmma_f16_macs_per_cycle
                        : operands == DType::I8 ? wgmma_int8_macs_per_cycle
                        : operands == DType::E4M3 || operands == DType::E5M2
                            ? wgmma_fp8_macs_per_cycle
                            : wgmma_macs_per_cycle;
    return wgmma_latency +
           int64_t(std::ceil(double(m) * double(n) * double(k) / (rate * tensor_clock)));
}

// ---------------------------------------------------------------------------------------------
// One CTA: its agents' steps, waits and the TMA unit
// ---------------------------------------------------------------------------------------------

int Machine::Impl::track(int sm, const std::string &agent_name) {
    std::vector<std::string> &tracks = sm_tracks[size_t(sm)];
    if (tracks.empty()) {
        tracks = {"tma", "tensor"};
    }
    for (size_t t = 2; t < tracks.size(); ++t) {
        if (tracks[t] == agent_name) {
            return int(t);
        }
    }
    tracks.push_back(agent_name);
    return int(tracks.size()) - 1;
}

// --- running ------------------------------------------------------------------------------------

void Machine::Impl::CtaRun::start(std::vector<std::unique_ptr<AgentProgram>> programs) {
    building_ = false;
    if (agents_.empty()) {
        throw SimError("CTA " + std::to_string(cta_) +
                       ": the factory declared no agent; add_agent at least one");
    }
    if (programs.size() != agents_.size()) {
        throw SimError("CTA " + std::to_string(cta_) + ": the factory declared " +
                       std::to_string(agents_.size()) + " agents but returned " +
                       std::to_string(programs.size()) + " programs; return one per agent");
    }
    std::vector<uint32_t> names;
    for (size_t a = 0; a < agents_.size(); ++a) {
        if (!programs[a]) {
            throw SimError("CTA " + std::to_string(cta_) + ": the program of agent '" +
                           agents_[a].name + "' is null");
        }
        agents_[a].program = std::move(programs[a]);
        agents_[a].now = start_;
        // A CTA sharing its SM with others has tracks of its own (slot 0 the agents' names).
        agents_[a].track =
            impl_.track(sm_, slot_ ? agents_[a].name + " (slot " + std::to_string(slot_) + ")"
                                   : agents_[a].name);
        names.push_back(agents_[a].label);
    }
    impl_.cta_agents[cta_] = names;
}

int Machine::Impl::CtaRun::next_agent(Cycles *time) const {
    int next = -1;
    *time = std::numeric_limits<Cycles>::max();
    for (size_t a = 0; a < agents_.size(); ++a) {
        if (agents_[a].state == Agent::State::Ready && agents_[a].now < *time) {
            *time = agents_[a].now;
            next = int(a);
        }
    }
    return next;
}

bool Machine::Impl::CtaRun::next_event(Cycles *time) const {
    if (events_.empty()) {
        return false;
    }
    *time = events_.top().time;
    return true;
}

void Machine::Impl::CtaRun::run_event() {
    Event event = events_.top();
    events_.pop();
    time_ = event.time;
    complete_load(event.time, event.load);
}

void Machine::Impl::CtaRun::run_agent(int index) {
    time_ = agents_[size_t(index)].now;
    step(index);
}

void Machine::Impl::CtaRun::finish_run() {
    for (const Agent &agent : agents_) {
        end_ =
            std::max(end_, agent.state == Agent::State::Blocked ? agent.blocked_since : agent.now);
    }
    for (const Agent &agent : agents_) {
        for (const Group &g : agent.store_groups) {
            end_ = std::max(end_, g.end);
        }
        end_ = std::max(end_, agent.store_open_end);
    }
    bool blocked = std::any_of(agents_.begin(), agents_.end(), [](const Agent &agent) {
        return agent.state == Agent::State::Blocked;
    });
    if (blocked) {
        report_deadlock();
    } else {
        check_loads_were_waited();
        check_stores_were_retired();
        check_remote_arrivals();
    }
}

std::vector<std::pair<int, BufferHistory>> Machine::Impl::CtaRun::take_global_histories() {
    std::vector<std::pair<int, BufferHistory>> out;
    for (size_t b = 0; b < global_history_.size(); ++b) {
        if (!global_history_[b].empty()) {
            out.emplace_back(int(b), std::move(global_history_[b]));
        }
    }
    return out;
}

// --- TMA ----------------------------------------------------------------------------------------

Cycles Machine::Impl::CtaRun::reserve_tma(Cycles issue, detail::L2Lines::Split bytes, uint64_t name,
                                          Cycles latency, double split) {
    Cycles start = std::max(issue, impl_.tma_free[size_t(sm_)]);
    // At the SM's port (split requests holding it longer, split_cycles), and within what
    // HBM (misses) and L2 (every byte) have left at that time after the transfers of the SMs'
    // CTAs simulated before.
    const double port = params_.tma_bytes_per_cycle, from = double(start);
    const double all = double(bytes.miss + bytes.hit);
    const double at_port = all / port + split;
    const double done = std::max({from + at_port, impl_.l2_bandwidth.move(from, all, port),
                                  impl_.hbm.move(from, double(bytes.miss), port)});
    Cycles transfer = Cycles(std::ceil(done - from));
    Cycles total = transfer + latency;
    impl_.tma_free[size_t(sm_)] = start + transfer;
    impl_.tma_busy[size_t(sm_)] += transfer;
    OpName op = OpName::unpack(name);
    impl_.trace.add(op.label, op_kind_name(op.kind), sm_, kTmaTrack, start, transfer);
    end_ = std::max(end_, start + total);
    return start + total;
}

// --- scheduling ---------------------------------------------------------------------------------

void Machine::Impl::CtaRun::block(WaitKind kind, int id, Cycles wake) {
    failed_wait_ = true;
    wake_at_ = wake;
    Agent &agent = me();
    agent.wait = kind;
    agent.wait_id = id;
}

void Machine::Impl::CtaRun::wake(int index, Cycles time) {
    Agent &agent = agents_[size_t(index)];
    if (agent.state != Agent::State::Blocked) {
        return;
    }
    time = std::max(time, agent.blocked_since);
    if (impl_.trace.on() && time > agent.blocked_since) {
        impl_.trace.add(impl_.labels.id("wait: " + agent.program->waiting_for()), "wait", sm_,
                        agent.track, agent.blocked_since, time - agent.blocked_since);
    }
    impl_.barrier_wait += time - agent.blocked_since;
    agent.now = time;
    agent.state = Agent::State::Ready;
    agent.wait = WaitKind::None;
}

void Machine::Impl::CtaRun::step(int index) {
    current_ = index;
    failed_wait_ = false;
    ops_in_step_ = 0;
    wake_at_ = -1;
    Agent &agent = agents_[size_t(index)];
    AgentProgram::Step result = agent.program->step(*this);
    auto contract = [&](const std::string &message) {
        throw SimError("CTA " + std::to_string(cta_) + ", agent '" + agent.name + "': " + message);
    };
    if (failed_wait_) {
        if (result != AgentProgram::Step::Blocked) {
            contract("a wait returned false but step() did not return Step::Blocked; return "
                     "Blocked after a failed wait and retry it when woken");
        }
        agent.state = Agent::State::Blocked;
        agent.blocked_since = agent.now;
        if (wake_at_ >= 0) {
            wake(index, wake_at_);
        }
        return;
    }
    if (result == AgentProgram::Step::Blocked) {
        contract("step() returned Step::Blocked but no wait in the step returned false; "
                 "Blocked only follows a failed try_wait, named_barrier_sync or "
                 "bulk_wait_group_read");
    }
    if (result == AgentProgram::Step::Done) {
        agent.state = Agent::State::Done;
        return;
    }
    agent.idle_steps = ops_in_step_ ? 0 : agent.idle_steps + 1;
    if (agent.idle_steps > kMaxIdleSteps) {
        contract("step() ran " + std::to_string(kMaxIdleSteps) +
                 " times without an op; every step must make progress");
    }
}

// ---------------------------------------------------------------------------------------------
// The grid's event loop
// ---------------------------------------------------------------------------------------------

/** A cluster in the grid's loop: its CTAs (by rank) and what they share. */
struct Machine::Impl::ClusterRun {
    Cluster cluster;
    std::vector<std::unique_ptr<CtaRun>> ctas;

    /** The earliest TMA completion or ready agent of its CTAs (false: none left). */
    bool next(Cycles *time) const {
        bool any = false;
        *time = std::numeric_limits<Cycles>::max();
        for (const auto &run : ctas) {
            Cycles t;
            if (run->next_agent(&t) >= 0 && t < *time) {
                *time = t;
                any = true;
            }
            if (run->next_event(&t) && t < *time) {
                *time = t;
                any = true;
            }
        }
        return any;
    }

    /** Runs that step: the earliest TMA completion, else the ready agent with the earliest time
     * (on a tie events first, then the lower rank and agent). */
    void step(CtaRun *&running) {
        CtaRun *agent_cta = nullptr, *event_cta = nullptr;
        int agent = -1;
        Cycles best = std::numeric_limits<Cycles>::max(), event = best;
        for (auto &run : ctas) {
            Cycles t;
            int a = run->next_agent(&t);
            if (a >= 0 && t < best) {
                best = t;
                agent = a;
                agent_cta = run.get();
            }
            if (run->next_event(&t) && t < event) {
                event = t;
                event_cta = run.get();
            }
        }
        if (event_cta && event <= best) {
            running = event_cta;
            event_cta->run_event();
        } else {
            running = agent_cta;
            agent_cta->run_agent(agent);
        }
    }
};

void Machine::Impl::run_grid(int first, int ctas, int cluster, const CtaFactory &make_cta) {
    const std::string what = "run_cluster " + std::to_string(first);
    if (cluster < 1 || cluster > params.sms) {
        throw SimError(what + ": a cluster of " + std::to_string(cluster) +
                       " CTAs runs on as many SMs at once; the machine has " +
                       std::to_string(params.sms));
    }
    if (ctas < cluster || ctas % cluster != 0) {
        throw SimError(what + ": " + std::to_string(ctas) + " CTAs are not whole clusters of " +
                       std::to_string(cluster));
    }
    if (first < 0 || first > kMaxCtas - ctas) {
        throw SimError("run_cta: CTA index " + std::to_string(first) + " must be in [0, " +
                       std::to_string(kMaxCtas - ctas + 1) + ")");
    }
    if (running) {
        throw SimError(what + ": called while CTA " + std::to_string(running->cta()) +
                       " runs; CTAs run one after another");
    }
    if (size_t(first + ctas) > cta_ran.size()) {
        cta_ran.resize(size_t(first + ctas), false);
    }
    for (int cta = first; cta < first + ctas; ++cta) {
        if (cta_ran[size_t(cta)]) {
            throw SimError("run_cta: CTA " + std::to_string(cta) + " already ran");
        }
    }
    if (!make_cta) {
        throw SimError(what + ": the CTA factory is empty");
    }
    int64_t footprint = 0; // what a launch of this kernel before it left in L2
    for (const Buffer &global : globals)
        footprint += global.elements * bytes_of(global.type);
    l2_lines.set_warm(params.l2_warm != 0 && footprint <= params.l2_bytes);
    for (int cta = first; cta < first + ctas; ++cta) {
        cta_ran[size_t(cta)] = true;
    }
    struct Running {
        CtaRun *&slot;
        ~Running() { slot = nullptr; }
    } guard{running};
    // CTA i runs on SM i % sms, at most `resident` CTAs of the grid on an SM at once. The
    // clusters start in order, each once every SM of it has a slot free (a CTA before it there
    // has finished, at its end); the running ones share one time line.
    const int resident = std::max(1, resident_ctas);
    std::vector<std::unique_ptr<ClusterRun>> live;
    std::vector<std::vector<int>> occupant(size_t(params.sms),
                                           std::vector<int>(size_t(resident), -1));
    std::vector<std::vector<Cycles>> slot_free(size_t(params.sms));
    for (int sm = 0; sm < params.sms; ++sm) {
        slot_free[size_t(sm)].assign(size_t(resident), sm_free[size_t(sm)]);
    }
    std::set<std::pair<Cycles, int>> queue; // live clusters by their next time
    std::vector<Cycles> key;
    int next = first;
    auto retire = [&](int index) {
        for (auto &cta : live[size_t(index)]->ctas) {
            running = cta.get();
            cta->finish_run();
            const size_t sm = size_t(cta->sm()), slot = size_t(cta->slot());
            sm_free[sm] = std::max(sm_free[sm], cta->end());
            slot_free[sm][slot] = cta->end();
            occupant[sm][slot] = -1;
            finished.push_back(CtaGlobals{cta->cta(), cta->take_global_histories()});
        }
        running = nullptr;
        live[size_t(index)].reset();
    };
    // The slot of `sm` free earliest (-1: every slot holds a CTA).
    auto free_slot = [&](int sm) {
        int best = -1;
        for (int slot = 0; slot < resident; ++slot) {
            if (occupant[size_t(sm)][size_t(slot)] < 0 &&
                (best < 0 ||
                 slot_free[size_t(sm)][size_t(slot)] < slot_free[size_t(sm)][size_t(best)])) {
                best = slot;
            }
        }
        return best;
    };
    auto launch = [&] {
        for (; next < first + ctas; next += cluster) {
            std::vector<int> sms, slots;
            Cycles start = 0;
            for (int cta = next; cta < next + cluster; ++cta) {
                const int sm = cta % params.sms, slot = free_slot(sm);
                if (slot < 0) {
                    return;
                }
                sms.push_back(sm);
                slots.push_back(slot);
                start = std::max(start, slot_free[size_t(sm)][size_t(slot)]);
            }
            auto run = std::make_unique<ClusterRun>();
            for (int rank = 0; rank < cluster; ++rank) {
                run->ctas.push_back(std::make_unique<CtaRun>(*this, run->cluster, rank, next + rank,
                                                             sms[size_t(rank)], slots[size_t(rank)],
                                                             start));
                run->cluster.ctas.push_back(run->ctas.back().get());
            }
            int clocks = 0;
            for (auto &cta : run->ctas) {
                running = cta.get();
                cta->start(make_cta(*cta, cta->cta()));
                cta->set_clock_base(clocks);
                clocks += cta->clock_count();
            }
            running = nullptr;
            run->cluster.clocks.reset(clocks);
            const int index = int(live.size());
            live.push_back(std::move(run));
            key.push_back(0);
            for (int rank = 0; rank < cluster; ++rank) {
                occupant[size_t(sms[size_t(rank)])][size_t(slots[size_t(rank)])] = index;
            }
            live[size_t(index)]->next(&key[size_t(index)]); // every agent starts ready
            queue.insert({key[size_t(index)], index});
        }
    };
    launch();
    while (!queue.empty()) {
        // The earliest cluster steps, then goes back at its next time (the node is reused).
        auto node = queue.extract(queue.begin());
        const int index = node.value().second;
        live[size_t(index)]->step(running);
        running = nullptr;
        if (live[size_t(index)]->next(&key[size_t(index)])) {
            node.value().first = key[size_t(index)];
            queue.insert(std::move(node));
        } else {
            retire(index);
            launch();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Machine
// ---------------------------------------------------------------------------------------------

Machine::Machine(const HopperParams &params, bool numerics, bool trace)
    : params_(params), numerics_(numerics) {
    auto require = [](bool ok, const std::string &message) {
        if (!ok) {
            throw SimError("HopperParams: " + message);
        }
    };
    require(params.sms >= 1 && params.sms <= 4096, "sms must be in [1, 4096]");
    require(params.smem_bytes >= 0, "smem_bytes must not be negative");
    require(params.registers_per_sm >= 0, "registers_per_sm must not be negative");
    require(params.tma_latency >= 0 && params.hbm_latency >= 0 && params.wgmma_latency >= 0 &&
                params.barrier_latency >= 0 && params.launch_cycles >= 0 &&
                params.issue_cycles >= 0,
            "latencies and issue_cycles must not be negative");
    require(params.tma_bytes_per_cycle > 0 && params.hbm_bytes_per_cycle > 0 &&
                params.l2_bytes_per_cycle > 0,
            "tma_bytes_per_cycle, hbm_bytes_per_cycle and l2_bytes_per_cycle must be positive");
    require(params.l2_line >= 1 && params.l2_bytes >= 0, "l2_line must be positive");
    require(params.wgmma_macs_per_cycle > 0, "wgmma_macs_per_cycle must be positive");
    require(params.wgmma_f16_macs_per_cycle > 0, "wgmma_f16_macs_per_cycle must be positive");
    require(params.wgmma_int8_macs_per_cycle > 0, "wgmma_int8_macs_per_cycle must be positive");
    require(params.wgmma_fp8_macs_per_cycle > 0, "wgmma_fp8_macs_per_cycle must be positive");
    require(params.tensor_clock > 0 && params.tensor_clock <= 1, "tensor_clock must be in (0, 1]");
    require(params.vector_flops_per_cycle >= 1, "vector_flops_per_cycle must be at least 1");
    impl_ = std::make_unique<Impl>(params, numerics, trace);
}

Machine::~Machine() = default;

int Machine::add_global(const std::string &name, DType type, int64_t elements) {
    if (elements < 0) {
        throw SimError("add_global '" + name + "': negative element count " +
                       std::to_string(elements));
    }
    if (impl_->globals.size() + 1 >= size_t(kFirstCtaBuffer)) {
        throw SimError("add_global '" + name + "': too many global buffers");
    }
    Buffer buffer{name, type, Memory::Global, -1, elements, nullptr};
    if (numerics_) {
        buffer.data.reset(new std::byte[size_t(elements * bytes_of(type))]());
    }
    impl_->globals.push_back(std::move(buffer));
    return int(impl_->globals.size()) - 1;
}

namespace {
[[noreturn]] void no_buffer(int buffer, size_t count) {
    if (buffer >= kFirstCtaBuffer) {
        throw SimError("buffer id " + std::to_string(buffer) +
                       " is smem or registers of a CTA that is not running; those exist only "
                       "while their CTA runs");
    }
    throw SimError("buffer id " + std::to_string(buffer) + " does not exist (the machine has " +
                   std::to_string(count) + " global buffers)");
}
} // namespace

Buffer &Machine::Impl::buffer(int id) {
    if (id >= 0 && size_t(id) < globals.size()) {
        return globals[size_t(id)];
    }
    Buffer *local = running ? running->local_buffer(id) : nullptr;
    if (!local) {
        no_buffer(id, globals.size());
    }
    return *local;
}

void *Machine::data(int buffer) {
    return impl_->buffer(buffer).data.get();
}

DType Machine::type(int buffer) const {
    return impl_->buffer(buffer).type;
}

int64_t Machine::elements(int buffer) const {
    return impl_->buffer(buffer).elements;
}

const std::string &Machine::name(int buffer) const {
    return impl_->buffer(buffer).name;
}

void Machine::set_grid(int ctas, int resident) {
    if (resident < 1) {
        throw SimError("set_grid: " + std::to_string(resident) +
                       " CTAs resident per SM; at least one runs");
    }
    impl_->active_sms = std::max(1, std::min(ctas, params_.sms));
    impl_->resident_ctas = resident;
}

void Machine::run_cta(int cta, const CtaFactory &make_cta) {
    impl_->run_grid(cta, 1, 1, make_cta);
}

void Machine::run_cluster(int first_cta, int ctas, const CtaFactory &make_cta) {
    impl_->run_grid(first_cta, ctas, ctas, make_cta);
}

void Machine::run_grid(int ctas, int cluster, const CtaFactory &make_cta) {
    impl_->run_grid(0, ctas, cluster, make_cta);
}

Report Machine::finish() {
    impl_->cross_cta_races();
    Report report;
    Cycles tma = 0, tensor = 0;
    for (int sm = 0; sm < params_.sms; ++sm) {
        Cycles finish = impl_->sm_free[size_t(sm)];
        report.core_cycles.push_back(finish);
        report.cycles = std::max(report.cycles, finish);
        report.bound_cycles = std::max(
            {report.bound_cycles, impl_->tma_busy[size_t(sm)], impl_->tensor_busy[size_t(sm)]});
    }
    {
        // The device's own bounds: every byte through L2, every miss and write through HBM.
        report.bound_cycles =
            std::max({report.bound_cycles,
                      Cycles(std::ceil(impl_->hbm.total() / params_.hbm_bytes_per_cycle)),
                      Cycles(std::ceil(impl_->l2_bandwidth.total() / params_.l2_bytes_per_cycle))});
    }
    for (int sm = 0; sm < params_.sms; ++sm) {
        tma += impl_->tma_busy[size_t(sm)];
        tensor += impl_->tensor_busy[size_t(sm)];
    }
    report.busy = {{"tma", tma},
                   {"tensor", tensor},
                   {"vector", impl_->vector_busy},
                   {"barrier_wait", impl_->barrier_wait}};
    impl_->races.report(report, impl_->deadlock, impl_->deadlock_message);
    return report;
}

void Machine::write_trace(const std::string &path) const {
    std::vector<detail::TraceProcess> processes;
    for (int sm = 0; sm < params_.sms; ++sm) {
        if (!impl_->sm_tracks[size_t(sm)].empty()) {
            processes.push_back({sm, "SM " + std::to_string(sm), impl_->sm_tracks[size_t(sm)]});
        }
    }
    impl_->trace.write(path, processes, impl_->labels);
}

} // namespace tandem::sim::hopper
