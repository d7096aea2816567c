// The Ascend model's checks: each access against its core's (or GM's) history with the pipes'
// happens-before, races named by their ops, the cross-core check of GM at finish(), and the
// deadlock report of a core whose pipes cannot go on (each blocked pipe and what it waits for).
// The state: AscendRun.h; the race check itself: Hazards.h.

#include "sim/AscendRun.h"

#include <string>
#include <vector>

namespace tandem::sim::ascend {

// ---------------------------------------------------------------------------------------------
// Races
// ---------------------------------------------------------------------------------------------

std::string Machine::Impl::op_text(uint64_t packed) const {
    OpName op = OpName::unpack(packed);
    return std::string(op_kind_name(op.kind)) + " '" + labels.text(op.label) + "' (" +
           pipe_name(op.pipe) + ", " + core_text(op.core) + ")";
}

void Machine::Impl::add_race(uint64_t first, uint64_t second, int buffer) {
    races.add(first, second, buffer, [&] {
        return Race{op_text(first), op_text(second), buffers[size_t(buffer)].name, ""};
    });
}

std::string Machine::Impl::cross_rule(int core) const {
    return kind(core) == CoreKind::AIC
               ? "an AIC's counter moves when both its AIVs (" + core_text(aiv_of(core, 0)) + ", " +
                     core_text(aiv_of(core, 1)) + ") have set the flag"
               : "an AIV's counter moves when its AIC (" + core_text(aic_of(core)) +
                     ") sets the flag";
}

void Machine::Impl::cross_core_races() {
    for (size_t buffer = 0; buffer < buffers.size(); ++buffer) {
        if (buffers[buffer].mem != Mem::GM || !buffers[buffer].written) {
            continue;
        }
        std::vector<detail::RunHistory> histories;
        for (const auto &core : cores) {
            const Core::State &state = *core->state_;
            if (buffer < state.history.size()) {
                histories.push_back({core->id(), &state.history[buffer]});
            }
        }
        detail::cross_run_races(histories,
                                [&](const AccessRecord &first, const AccessRecord &second) {
                                    add_race(first.op, second.op, int(buffer));
                                });
    }
}

// ---------------------------------------------------------------------------------------------
// One core: its accesses, deadlock
// ---------------------------------------------------------------------------------------------

void Machine::Impl::CoreRun::access(int buffer, const Box &box, bool write, int pipe, uint64_t op,
                                    int agent, int64_t epoch) {
    ElementSet elements = detail::element_set(box);
    if (elements.empty) {
        return;
    }
    const int64_t *clock = this->clock(pipe);
    if (agent < 0) {
        agent = base_ + pipe;
        epoch = clock[agent];
    }
    // An op's own accesses (an in-place vector op reads what it writes) are one instruction.
    detail::check_access_ordered(
        (impl_.buffers[size_t(buffer)].mem == Mem::GM ? gm_state_ : state_).history_of(buffer),
        AccessRecord{elements, agent, epoch, op, write},
        [&](const AccessRecord &earlier) {
            return earlier.epoch <= clock[earlier.agent] ||
                   (earlier.agent == agent && earlier.epoch == epoch);
        },
        [&](const AccessRecord &earlier) { impl_.add_race(earlier.op, op, buffer); },
        [](const AccessRecord &) {});
    if (write) {
        impl_.buffers[size_t(buffer)].written = true;
    }
}

void Machine::Impl::CoreRun::report_deadlock(Cycles at) {
    std::string message = "deadlock on " + impl_.core_text(core_) + " at cycle " +
                          std::to_string(at) + ": no pipe can start its next op";
    for (int p = 0; p < kPipes; ++p) {
        if (done(p)) {
            continue;
        }
        int index = head(p);
        const Op &op = program_[size_t(index)];
        if (p != 0 && dispatched_[size_t(index)] < 0) {
            continue; // not dispatched: S is blocked, and says why
        }
        const std::string &label = impl_.labels.text(op.label);
        if (op.kind == OpKind::WaitFlag) {
            std::string text = flag_text("WaitFlag", op.flag_src, op.flag_dst, op.event);
            message += "; pipe " + std::string(pipe_name(Pipe(p))) + " waits at " + text + " '" +
                       label + "' (" + why_not_fired(op) + ")";
        } else if (op.kind == OpKind::Barrier) {
            message += "; pipe S waits at PipeBarrier<PIPE_ALL> '" + label +
                       "' for every pipe to finish the ops recorded before it";
        } else if (op.kind == OpKind::CrossWait) {
            message += "; pipe S waits at CrossCoreWaitFlag(" + std::to_string(op.event) + ") '" +
                       label + "' (wait " + std::to_string(op.ordinal + 1) +
                       " of this flag, but only " +
                       std::to_string(impl_.cross_passes(core_, op.event).size()) +
                       " of its sets reached this core: " + impl_.cross_rule(core_) + ")";
        }
    }
    impl_.deadlock = true;
    impl_.deadlock_message += (impl_.deadlock_message.empty() ? "" : "\n") + message;
}

std::string Machine::Impl::CoreRun::why_not_fired(const Op &wait) const {
    std::string set = flag_text("SetFlag", wait.flag_src, wait.flag_dst, wait.event);
    int key = impl_.flag_key(wait.flag_src, wait.flag_dst, wait.event);
    int64_t sets = state_.sets[size_t(key)];
    std::string nth = "it is wait " + std::to_string(wait.ordinal + 1) + " of this flag";
    if (sets <= wait.ordinal) {
        return nth + ", but the program has only " + std::to_string(sets) + " " + set +
               ": no set will ever fire it";
    }
    for (size_t i = 0; i < program_.size(); ++i) {
        const Op &op = program_[i];
        if (op.kind == OpKind::SetFlag &&
            impl_.flag_key(op.flag_src, op.flag_dst, op.event) == key &&
            op.ordinal == wait.ordinal) {
            bool dispatched = op.pipe == Pipe::S || dispatched_[i] >= 0;
            return nth + "; its " + set + " '" + impl_.labels.text(op.label) + "' on " +
                   pipe_name(op.pipe) +
                   (dispatched ? " is queued behind a blocked op of that pipe"
                               : " is never dispatched: the scalar stream is blocked");
        }
    }
    return nth;
}

} // namespace tandem::sim::ascend
