// The Hopper model's checks: each access against the CTA's history of its buffer (happens-before,
// and the async-proxy fence), races named by their ops, the cross-CTA check of global memory at
// finish(), and at a CTA's end its deadlock report or the checks at exit (loads no agent waited
// for, stores no wait retired, remote arrivals not ordered before the exit). The state:
// HopperRun.h; the race check itself: Hazards.h.

#include "sim/HopperRun.h"

#include <algorithm>
#include <string>
#include <vector>

namespace tandem::sim::hopper {

// ---------------------------------------------------------------------------------------------
// Races
// ---------------------------------------------------------------------------------------------

std::string Machine::Impl::op_text(uint64_t packed) const {
    OpName op = OpName::unpack(packed);
    std::string cta = "CTA " + std::to_string(op.cta);
    if (op.kind == OpKind::Exit) {
        return "exit of " + cta;
    }
    std::string agent;
    auto it = cta_agents.find(op.cta);
    if (it != cta_agents.end() && op.agent >= 0 && size_t(op.agent) < it->second.size()) {
        agent = "agent '" + labels.text(it->second[size_t(op.agent)]) + "', ";
    }
    std::string engine;
    switch (op.kind) {
    case OpKind::TmaLoad:
    case OpKind::TmaStore:
        engine = "tma, ";
        break;
    case OpKind::Wgmma:
        engine = "tensor core, ";
        break;
    default:
        break;
    }
    return std::string(op_kind_name(op.kind)) + " '" + labels.text(op.label) + "' (" + engine +
           agent + cta + ")";
}

void Machine::Impl::add_race(uint64_t first, uint64_t second, int64_t key, RaceKind kind,
                             const std::string &buffer, const char *reason) {
    races.add(first, second, key * kRaceKinds + kind, [&] {
        return Race{op_text(first), op_text(second), buffer, reason};
    });
}

void Machine::Impl::cross_cta_races() {
    std::vector<std::vector<detail::RunHistory>> by_buffer(globals.size());
    for (const CtaGlobals &cta : finished) {
        for (const auto &entry : cta.histories) {
            by_buffer[size_t(entry.first)].push_back({cta.cta, &entry.second});
        }
    }
    for (size_t buffer = 0; buffer < globals.size(); ++buffer) {
        if (!globals[buffer].written) {
            continue;
        }
        detail::cross_run_races(by_buffer[buffer], [&](const AccessRecord &first,
                                                       const AccessRecord &second) {
            add_race(first.op, second.op, int64_t(buffer), kUnordered, globals[buffer].name, "");
        });
    }
}

// ---------------------------------------------------------------------------------------------
// One CTA: its accesses, deadlock and the checks at exit
// ---------------------------------------------------------------------------------------------

// --- buffers ------------------------------------------------------------------------------------

BufferHistory &Machine::Impl::CtaRun::history(int id) {
    if (id < kFirstCtaBuffer) {
        if (size_t(id) >= global_history_.size()) {
            global_history_.resize(size_t(id) + 1);
        }
        return global_history_[size_t(id)];
    }
    return local_history_[size_t(id - kFirstCtaBuffer)];
}

void Machine::Impl::CtaRun::access(int id, const Box &box, bool write, int clock_index, uint64_t op,
                                   uint8_t proxy) {
    ElementSet elements = detail::element_set(box);
    if (elements.empty) {
        return;
    }
    Buffer &buffer = *find(id);
    const int64_t *clock = clocks_.clock(clock_index);
    bool check_fence = proxy == kAsyncProxy && !write && buffer.memory == Memory::Shared;
    detail::check_access(
        history(id), AccessRecord{elements, clock_index, clock[clock_index], op, write, proxy},
        clock,
        [&](const AccessRecord &earlier) {
            impl_.add_race(earlier.op, op, id, kUnordered, buffer.name, "");
        },
        [&](const AccessRecord &earlier) {
            if (!check_fence || !earlier.write || earlier.proxy != kGenericProxy ||
                fenced(earlier, clock) || !detail::overlaps(earlier.elements, elements)) {
                return;
            }
            impl_.add_race(earlier.op, op, id, kMissingFence, buffer.name,
                           "missing fence.proxy.async: the async proxy (TMA or wgmma) reads "
                           "what a generic-proxy write left in smem, and the writing agent ran "
                           "no fence_proxy_async between that write and the synchronisation "
                           "that orders the read");
        });
    if (write) {
        buffer.written = true;
    }
}

bool Machine::Impl::CtaRun::fenced(const AccessRecord &write, const int64_t *clock) const {
    const std::vector<int64_t> &fences = agents_[size_t((write.agent - base_) / 3)].fence_epochs;
    auto it = std::lower_bound(fences.begin(), fences.end(), write.epoch);
    return it != fences.end() && *it <= clock[write.agent];
}

// --- barriers -----------------------------------------------------------------------------------

void Machine::Impl::CtaRun::check_remote_arrivals() {
    if (remote_arrivals_.empty()) {
        return;
    }
    std::vector<int64_t> exit;
    for (size_t a = 0; a < agents_.size(); ++a) {
        clocks_.join_into(exit, clocks_.clock(wg(int(a))));
    }
    uint64_t exit_op = OpName{OpKind::Exit, -1, cta_, 0}.pack();
    for (const RemoteArrival &r : remote_arrivals_) {
        if (exit[size_t(r.clock)] >= r.epoch) {
            continue;
        }
        impl_.add_race(r.op, exit_op, -1 - int64_t(r.barrier), kRemoteArrival,
                       "mbarrier " + barriers_[size_t(r.barrier)].name,
                       "a remote arrival (another CTA of the cluster) on this CTA's mbarrier is "
                       "not ordered before the CTA exits: wait for the phase it completes (the "
                       "producer's tail over its ring) or cluster_sync before exit");
    }
}

// --- deadlock and the checks at exit ------------------------------------------------------------

std::string Machine::Impl::CtaRun::wait_state(const Agent &agent) const {
    switch (agent.wait) {
    case WaitKind::Mbarrier: {
        const Barrier &bar = barriers_[size_t(agent.wait_id)];
        return "mbarrier '" + bar.name + "' is in phase " + std::to_string(bar.completions) +
               " (parity " + std::to_string(bar.completions & 1) + ") with " +
               std::to_string(bar.pending) + " of " + std::to_string(bar.count) + " arrivals and " +
               std::to_string(bar.tx) + " tx bytes pending";
    }
    case WaitKind::ClusterSync:
        return "the cluster barrier has " + std::to_string(cluster_.sync_arrived.size()) +
               " arrivals";
    case WaitKind::NamedBarrier: {
        const NamedBarrier &nb = named_[size_t(agent.wait_id)];
        return "named barrier " + std::to_string(agent.wait_id) + " has " +
               std::to_string(nb.arrived.size()) + " of " + std::to_string(nb.expected) + " agents";
    }
    default:
        return "";
    }
}

void Machine::Impl::CtaRun::report_deadlock() {
    Cycles at = 0;
    for (const Agent &agent : agents_) {
        at = std::max(at, agent.state == Agent::State::Blocked ? agent.blocked_since : agent.now);
    }
    std::string message = "deadlock in CTA " + std::to_string(cta_) + " (SM " +
                          std::to_string(sm_) + ") at cycle " + std::to_string(at) +
                          ": every unfinished agent is blocked and no TMA load is in flight";
    for (const Agent &agent : agents_) {
        message += "; agent '" + agent.name + "' ";
        if (agent.state == Agent::State::Done) {
            message += "finished";
            continue;
        }
        message += "waits for '" + agent.program->waiting_for() + "' since cycle " +
                   std::to_string(agent.blocked_since);
        std::string state = wait_state(agent);
        if (!state.empty()) {
            message += " (" + state + ")";
        }
    }
    impl_.deadlock = true;
    impl_.deadlock_message += (impl_.deadlock_message.empty() ? "" : "\n") + message;
}

void Machine::Impl::CtaRun::check_loads_were_waited() {
    for (size_t b = 0; b < barriers_.size(); ++b) {
        const Barrier &bar = barriers_[b];
        if (bar.last_load_epoch == 0) {
            continue;
        }
        int lane = lane_of(int(b));
        bool seen = false;
        for (size_t a = 0; a < agents_.size() && !seen; ++a) {
            seen = clocks_.clock(wg(int(a)))[lane] >= bar.last_load_epoch;
        }
        if (!seen) {
            uint64_t exit = OpName{OpKind::Exit, -1, cta_, 0}.pack();
            impl_.add_race(bar.last_load_op, exit, bar.last_load_buffer, kLostLoad,
                           locals_[size_t(bar.last_load_buffer - kFirstCtaBuffer)].name,
                           "no agent waited for this load's mbarrier phase before the CTA "
                           "exited (a wait that passed on an older phase?): its data was never "
                           "used, and it writes smem that the SM gives to its next CTA");
        }
    }
}

void Machine::Impl::CtaRun::check_stores_were_retired() {
    uint64_t exit = OpName{OpKind::Exit, -1, cta_, 0}.pack();
    auto report = [&](uint64_t op, int buffer) {
        impl_.add_race(op, exit, buffer, kUnretiredStore,
                       locals_[size_t(buffer - kFirstCtaBuffer)].name,
                       "no bulk wait_group_read retired this TMA store before the CTA exited: "
                       "it may still read smem that the SM gives to its next CTA");
    };
    for (const Agent &agent : agents_) {
        for (const Group &g : agent.store_groups) {
            if (g.buffer >= 0) {
                report(g.op, g.buffer);
            }
        }
        if (agent.store_open) {
            report(agent.store_open_op, agent.store_open_buffer);
        }
    }
}

} // namespace tandem::sim::hopper
