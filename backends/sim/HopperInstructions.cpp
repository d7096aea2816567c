// The Hopper model's instruction semantics: what each op of a CTA's agents does, as the CTA's
// builder (smem, registers, mbarriers, agents) and its AgentOps (mbarriers, TMA and thread copies,
// bulk store groups, wgmma, named and cluster barriers, setmaxnreg, vector ops): their arguments
// checked (SimError), their numerics, clocks and accesses. The state: HopperRun.h; when ops run:
// HopperScheduler.cpp; what the accesses are checked against: HopperChecks.cpp.

#include "sim/HopperRun.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace tandem::sim::hopper {

// ---------------------------------------------------------------------------------------------
// One CTA: its builder and its agents' ops
// ---------------------------------------------------------------------------------------------

// --- builder ------------------------------------------------------------------------------------

int Machine::Impl::CtaRun::add_smem(const std::string &name, DType type, int64_t elements,
                                    int64_t charged_bytes) {
    std::string what = "add_smem '" + name + "'";
    check_building(what);
    if (elements < 0) {
        build_error(what + ": negative element count " + std::to_string(elements));
    }
    take_smem(name, "buffer", charged_bytes >= 0 ? charged_bytes : elements * bytes_of(type));
    return add_local(name, type, Memory::Shared, -1, elements);
}

int Machine::Impl::CtaRun::add_registers(int agent, const std::string &name, DType type,
                                         int64_t elements) {
    std::string what = "add_registers '" + name + "'";
    check_building(what);
    if (agent < 0 || size_t(agent) >= agents_.size()) {
        build_error(what + ": agent " + std::to_string(agent) + " does not exist (the CTA has " +
                    std::to_string(agents_.size()) + " agents; add_agent first)");
    }
    if (elements < 0) {
        build_error(what + ": negative element count " + std::to_string(elements));
    }
    int64_t registers = detail::ceil_div(elements * bytes_of(type), 4);
    int64_t free = params_.registers_per_sm - registers_used_;
    if (registers > free) {
        build_error("register file overflow in CTA " + std::to_string(cta_) + ": buffer '" + name +
                    "' of agent '" + agents_[size_t(agent)].name + "' needs " +
                    std::to_string(registers) + " registers, but only " + std::to_string(free) +
                    " of " + std::to_string(params_.registers_per_sm) +
                    " are free; use smaller accumulator tiles");
    }
    registers_used_ += registers;
    return add_local(name, type, Memory::Registers, agent, elements);
}

int Machine::Impl::CtaRun::add_barrier(const std::string &name) {
    check_building("add_barrier '" + name + "'");
    take_smem(name, "mbarrier", kBarrierBytes);
    barriers_.emplace_back();
    barriers_.back().name = name;
    return int(barriers_.size()) - 1;
}

int Machine::Impl::CtaRun::add_agent(const std::string &name) {
    check_building("add_agent '" + name + "'");
    if (agents_.size() >= size_t(kMaxAgents)) {
        build_error("add_agent '" + name + "': a CTA has at most " + std::to_string(kMaxAgents) +
                    " agents (warpgroups)");
    }
    agents_.emplace_back();
    agents_.back().name = name;
    agents_.back().label = impl_.labels.id(name);
    return int(agents_.size()) - 1;
}

// --- agent ops ----------------------------------------------------------------------------------

void Machine::Impl::CtaRun::mbarrier_init(int barrier, int count) {
    const char *op = "mbarrier_init";
    begin_op(op);
    Barrier &bar = barrier_of(op, barrier);
    if (bar.initialised) {
        fail(op, "mbarrier '" + bar.name + "' is already initialised (count " +
                     std::to_string(bar.count) + "); initialise each barrier once");
    }
    if (count < 1 || count > kMaxTxBytes) {
        fail(op, "mbarrier '" + bar.name + "': count " + std::to_string(count) +
                     " must be in [1, " + std::to_string(kMaxTxBytes) + "]");
    }
    bar.initialised = true;
    bar.count = bar.pending = count;
    bar.init_agent = wg(current_);
    bar.init_epoch = clocks_.epoch(wg(current_));
    bar.init_op = op_name(OpKind::Mbarrier, "init " + bar.name);
    me().now += params_.issue_cycles;
}

void Machine::Impl::CtaRun::mbarrier_arrive(int barrier) {
    arrive("mbarrier_arrive", barrier, 0);
}

void Machine::Impl::CtaRun::mbarrier_arrive_expect_tx(int barrier, int64_t bytes) {
    arrive("mbarrier_arrive_expect_tx", barrier, bytes);
}

bool Machine::Impl::CtaRun::mbarrier_try_wait_parity(int barrier, int parity) {
    const char *op = "mbarrier_try_wait_parity";
    begin_op(op);
    Barrier &bar = used_barrier(op, barrier, "wait");
    if (parity != 0 && parity != 1) {
        fail(op,
             "mbarrier '" + bar.name + "': parity " + std::to_string(parity) + " must be 0 or 1");
    }
    Agent &agent = me();
    prune(bar);
    // Completions visible at this agent's time: all but a suffix of the recent ones.
    int64_t visible = bar.completions;
    size_t at = bar.recent.size();
    while (at > 0 && bar.recent[at - 1].time + params_.barrier_latency > agent.now) {
        --at;
        --visible;
    }
    if ((visible & 1) != parity) {
        if (visible > 0) {
            clocks_.join(wg(current_), bar.recent[at - 1].clock.data());
        }
        agent.now += params_.issue_cycles;
        return true;
    }
    Cycles wake = at < bar.recent.size() ? bar.recent[at].time + params_.barrier_latency : -1;
    block(WaitKind::Mbarrier, barrier, wake);
    if (wake < 0) {
        bar.waiters.push_back(current_);
    }
    return false;
}

void Machine::Impl::CtaRun::tma_load(int smem, int64_t smem_offset, const TensorView &view,
                                     const std::vector<int64_t> &coords,
                                     const std::vector<int64_t> &box, int barrier,
                                     const std::string &label) {
    const char *op = "tma_load";
    begin_op(op, &label);
    TmaBoxes boxes = tma_boxes(op, label, smem, smem_offset, view, coords, box);
    land(OpKind::TmaLoad, smem, view.buffer, boxes, barrier, label);
}

void Machine::Impl::CtaRun::tma_load_multicast(int smem, int64_t smem_offset,
                                               const TensorView &view,
                                               const std::vector<int64_t> &coords,
                                               const std::vector<int64_t> &box, int barrier,
                                               uint32_t cta_mask, const std::string &label) {
    const char *op = "tma_load_multicast";
    begin_op(op, &label);
    if (cta_mask == 0 || (cta_mask >> cluster_size()) != 0) {
        fail(op, label,
             "CTA mask " + std::to_string(cta_mask) + " must name ranks of the cluster (" +
                 std::to_string(cluster_size()) + " CTAs), at least one");
    }
    TmaBoxes boxes = tma_boxes(op, label, smem, smem_offset, view, coords, box);
    land(OpKind::TmaLoad, smem, view.buffer, boxes, barrier, label, cta_mask);
}

void Machine::Impl::CtaRun::mbarrier_arrive_remote(int barrier, int rank) {
    const char *op = "mbarrier_arrive_remote";
    if (rank < 0 || rank >= cluster_size()) {
        fail(op, "rank " + std::to_string(rank) + " is not in the cluster (" +
                     std::to_string(cluster_size()) + " CTAs)");
    }
    CtaRun *to = cluster_.ctas[size_t(rank)];
    arrive(op, barrier, 0, to == this ? nullptr : to);
}

bool Machine::Impl::CtaRun::cluster_sync() {
    const char *op = "cluster_sync";
    begin_op(op);
    Agent &agent = me();
    if (agent.cluster_released) {
        agent.cluster_released = false;
        agent.now += params_.issue_cycles;
        return true;
    }
    cluster_.sync_arrived.push_back({rank_, current_});
    clocks_.join_into(cluster_.sync_clock, clocks_.clock(wg(current_)));
    clocks_.tick(wg(current_));
    cluster_.sync_latest = std::max(cluster_.sync_latest, agent.now);
    size_t expected = 0;
    for (const CtaRun *cta : cluster_.ctas) {
        expected += cta->agents_.size();
    }
    if (cluster_.sync_arrived.size() < expected) {
        block(WaitKind::ClusterSync, 0, -1);
        return false;
    }
    Cycles release = cluster_.sync_latest + params_.barrier_latency;
    for (const Cluster::Arrival &a : cluster_.sync_arrived) {
        CtaRun &cta = *cluster_.ctas[size_t(a.rank)];
        clocks_.join(cta.wg(a.agent), cluster_.sync_clock.data());
        cta.agents_[size_t(a.agent)].cluster_released = true;
        if (&cta != this || a.agent != current_) {
            cta.wake(a.agent, release);
        }
    }
    cluster_.sync_arrived.clear();
    cluster_.sync_clock.clear();
    cluster_.sync_latest = 0;
    block(WaitKind::ClusterSync, 0, release);
    return false;
}

void Machine::Impl::CtaRun::thread_load(int smem, const Box &smem_box, int global,
                                        const Box &global_box, int barrier,
                                        const std::string &label) {
    const char *op = "thread_load";
    begin_op(op, &label);
    land(OpKind::ThreadLoad, smem, global,
         thread_boxes(op, label, smem, smem_box, global, global_box), barrier, label);
}

void Machine::Impl::CtaRun::land(OpKind kind, int smem, int global, const TmaBoxes &boxes,
                                 int barrier, const std::string &label, uint32_t multicast) {
    const char *op = op_kind_name(kind);
    const bool threads = kind == OpKind::ThreadLoad;
    uint64_t name = op_name(kind, label);
    std::vector<CtaRun *> into;
    for (size_t r = 0; r < cluster_.ctas.size(); ++r) {
        if (multicast ? (multicast >> r & 1) != 0 : cluster_.ctas[r] == this) {
            into.push_back(cluster_.ctas[r]);
        }
    }
    for (CtaRun *cta : into) {
        used_barrier(op, barrier, nullptr, &name, cta == this ? nullptr : cta);
        const Buffer *peer = cta->local_buffer(smem);
        const Buffer &own = local(smem);
        if (!peer || peer->memory != Memory::Shared || peer->name != own.name ||
            peer->elements != own.elements || peer->type != own.type) {
            fail(op, label,
                 "smem '" + own.name + "' is not the same buffer in CTA " +
                     std::to_string(cta->cta_) +
                     "; a multicast lands at the same smem of every CTA");
        }
    }
    int64_t bytes = boxes.elements * bytes_of(local(smem).type);
    Agent &agent = me();
    detail::L2Lines::Split traffic;
    if (boxes.any_inside) {
        TimedL2::Split lines =
            impl_.l2_lines.read(global, boxes.global_inside, bytes_of(local(smem).type),
                                double(std::max(agent.now, impl_.tma_free[size_t(sm_)])));
        traffic.miss = lines.miss;
        traffic.hit = lines.hit;
    }
    // A multicast streams into every receiving SM at once: it starts when all their ports
    // are free, and occupies each for the transfer (the L2 reads the bytes once).
    Cycles issue = agent.now;
    for (CtaRun *cta : into) {
        issue = std::max(issue, impl_.tma_free[size_t(cta->sm_)]);
    }
    const Cycles start = std::max(issue, impl_.tma_free[size_t(sm_)]);
    // A load waits on HBM when any of its sectors misses L2.
    Cycles end = reserve_tma(issue, traffic, name,
                             traffic.miss > 0 ? params_.hbm_latency : params_.tma_latency,
                             split_cycles(kind, boxes, bytes_of(local(smem).type)));
    if (threads)
        end += thread_latencies(boxes.elements);

    // Each CTA's TMA lane of the barrier is ordered after the issue.
    for (CtaRun *cta : into) {
        clocks_.join(cta->lane_of(barrier), clocks_.clock(wg(current_)));
    }
    clocks_.tick(wg(current_));
    if (boxes.any_inside) {
        access(global, boxes.global_inside, false, into.front()->lane_of(barrier), name,
               kAsyncProxy);
    }
    const std::string issuer = "agent '" + agents_[size_t(current_)].name + "'";
    const Cycles transfer_end = impl_.tma_free[size_t(sm_)];
    for (CtaRun *cta : into) {
        if (cta != this) {
            Cycles &port = impl_.tma_free[size_t(cta->sm_)];
            impl_.tma_busy[size_t(cta->sm_)] += transfer_end - start;
            port = transfer_end;
        }
        cta->receive(Load{cta == this ? issuer : issuer + " of CTA " + std::to_string(cta_),
                          cta != this,
                          barrier,
                          bytes,
                          smem,
                          global,
                          boxes.smem_full,
                          boxes.smem_inside,
                          boxes.global_inside,
                          boxes.any_inside,
                          boxes.clipped,
                          uint32_t(name >> 32),
                          {},
                          op},
                     name, end);
    }
    agent.now = threads ? end : agent.now + params_.issue_cycles;
}

double Machine::Impl::CtaRun::split_cycles(OpKind kind, const TmaBoxes &boxes,
                                           int element_bytes) const {
    if (kind == OpKind::ThreadLoad || kind == OpKind::ThreadStore || !boxes.any_inside)
        return 0;
    // The TMA unit asks L2 for a box row in requests of up to a line (128 bytes, the inner
    // extent of a 128-byte-swizzled box), each from where the one before ended.
    const int64_t request = 128, sector = 32;
    int64_t split = 0;
    detail::for_each_run(boxes.global_inside, element_bytes, [&](int64_t first, int64_t bytes) {
        if (first % sector != 0)
            split += (bytes + request - 1) / request;
    });
    return double(split * params_.tma_split_row_cycles);
}

void Machine::Impl::CtaRun::receive(Load load, uint64_t name, Cycles at) {
    int lane = lane_of(load.barrier);
    access(load.smem, load.smem_full, true, lane, name, kAsyncProxy);
    Barrier &bar = barriers_[size_t(load.barrier)];
    bar.last_load_epoch = clocks_.epoch(lane);
    bar.last_load_op = name;
    bar.last_load_buffer = load.smem;
    load.clock = clocks_.copy(lane);
    loads_.push_back(std::move(load));
    clocks_.tick(lane);
    events_.push(Event{at, next_event_++, loads_.size() - 1});
    end_ = std::max(end_, at);
}

Cycles Machine::Impl::CtaRun::thread_latencies(int64_t elements) const {
    const int64_t batch = 128 * int64_t(params_.thread_copy_batch);
    return std::max<int64_t>(0, (elements + batch - 1) / batch - 1) * params_.tma_latency;
}

TmaBoxes Machine::Impl::CtaRun::thread_boxes(const char *op, const std::string &label, int smem,
                                             const Box &smem_box, int global,
                                             const Box &global_box) {
    const Buffer &shared = checked(op, label, "smem", smem, smem_box);
    const Buffer &tensor = checked(op, label, "global", global, global_box);
    if (shared.memory != Memory::Shared || tensor.memory != Memory::Global) {
        fail(op, label,
             "a thread copy moves a box between global memory ('" + tensor.name + "') and smem ('" +
                 shared.name + "')");
    }
    if (shared.type != tensor.type) {
        fail(op, label,
             "smem '" + shared.name + "' is " + dtype_name(shared.type) + " but '" + tensor.name +
                 "' is " + dtype_name(tensor.type) +
                 "; a thread copy moves elements without conversion");
    }
    if (smem_box.elements() != global_box.elements()) {
        fail(op, label,
             "the smem box has " + std::to_string(smem_box.elements()) +
                 " elements but the global box " + std::to_string(global_box.elements()));
    }
    TmaBoxes out;
    out.smem_full = out.smem_inside = smem_box;
    out.global_inside = global_box;
    out.elements = smem_box.elements();
    out.any_inside = out.elements > 0;
    return out;
}

void Machine::Impl::CtaRun::thread_store(int global, const Box &global_box, int smem,
                                         const Box &smem_box, const std::string &label) {
    const char *op = "thread_store";
    begin_op(op, &label);
    drain(OpKind::ThreadStore, global, thread_boxes(op, label, smem, smem_box, global, global_box),
          smem, label);
}

void Machine::Impl::CtaRun::tma_store(const TensorView &view, const std::vector<int64_t> &coords,
                                      const std::vector<int64_t> &box, int smem,
                                      int64_t smem_offset, const std::string &label) {
    const char *op = "tma_store";
    begin_op(op, &label);
    drain(OpKind::TmaStore, view.buffer, tma_boxes(op, label, smem, smem_offset, view, coords, box),
          smem, label);
}

void Machine::Impl::CtaRun::drain(OpKind kind, int global, const TmaBoxes &boxes, int smem,
                                  const std::string &label) {
    const bool threads = kind == OpKind::ThreadStore;
    const uint8_t proxy = threads ? kGenericProxy : kAsyncProxy;
    uint64_t name = op_name(kind, label);
    const Buffer &source = local(smem);
    Agent &agent = me();
    // Stores go to HBM (writes do not allocate L2 lines here).
    detail::L2Lines::Split traffic;
    if (boxes.any_inside)
        traffic.miss = boxes.global_inside.elements() * bytes_of(source.type);
    Cycles end = reserve_tma(agent.now, traffic, name, params_.tma_latency,
                             split_cycles(kind, boxes, bytes_of(source.type)));

    int store = store_of(current_);
    clocks_.join(store, clocks_.clock(wg(current_)));
    clocks_.tick(wg(current_));
    access(smem, boxes.smem_full, false, store, name, proxy);
    if (boxes.any_inside) {
        access(global, boxes.global_inside, true, store, name, proxy);
        if (impl_.numerics) {
            detail::copy_box(impl_.globals[size_t(global)].data.get(), boxes.global_inside,
                             source.data.get(), boxes.smem_inside, bytes_of(source.type));
        }
    }
    agent.store_open = true;
    agent.store_open_end = std::max(agent.store_open_end, end);
    agent.store_open_op = name;
    agent.store_open_buffer = smem;
    agent.now = threads ? std::max(agent.now + params_.issue_cycles, end - params_.tma_latency)
                        : agent.now + params_.issue_cycles;
}

void Machine::Impl::CtaRun::bulk_commit_group() {
    begin_op("bulk_commit_group");
    Agent &agent = me();
    int store = store_of(current_);
    if (agent.store_open) {
        agent.store_groups.push_back(Group{agent.store_open_end, clocks_.copy(store),
                                           agent.store_open_op, agent.store_open_buffer});
    } else {
        agent.store_groups.push_back(Group{0, clocks_.copy(store)});
    }
    clocks_.tick(store);
    agent.store_open = false;
    agent.store_open_end = 0;
    agent.now += params_.issue_cycles;
}

bool Machine::Impl::CtaRun::bulk_wait_group_read(int pending) {
    const char *op = "bulk_wait_group_read";
    begin_op(op);
    if (pending < 0) {
        fail(op, "pending group count " + std::to_string(pending) + " is negative");
    }
    Agent &agent = me();
    std::deque<Group> &groups = agent.store_groups;
    if (groups.size() <= size_t(pending)) {
        agent.now += params_.issue_cycles;
        return true;
    }
    size_t retire = groups.size() - size_t(pending);
    Cycles end = 0;
    for (size_t g = 0; g < retire; ++g) {
        end = std::max(end, groups[g].end);
    }
    if (end > agent.now) {
        block(WaitKind::BulkRead, pending, end);
        return false;
    }
    clocks_.join(wg(current_), groups[retire - 1].clock.data());
    groups.erase(groups.begin(), groups.begin() + std::ptrdiff_t(retire));
    agent.now += params_.issue_cycles;
    return true;
}

void Machine::Impl::CtaRun::wgmma_fence() {
    begin_op("wgmma_fence");
    me().now += params_.issue_cycles;
}

void Machine::Impl::CtaRun::wgmma(int acc, const Box &acc_box, int a, const Box &a_box, int b,
                                  const Box &b_box, const std::string &label) {
    const char *op = "wgmma";
    begin_op(op, &label);
    const Buffer &acc_buffer = operand(op, label, "acc", acc, acc_box, Memory::Registers);
    const Buffer &a_buffer = operand(op, label, "a", a, a_box, Memory::Shared);
    const Buffer &b_buffer = operand(op, label, "b", b, b_box, Memory::Shared);
    struct Operand {
        const char *role;
        const Box &box;
        const char *dims;
    };
    for (const Operand &x : {Operand{"acc", acc_box, "{N, M}"}, Operand{"a", a_box, "{K, M}"},
                             Operand{"b", b_box, "{N, K}"}}) {
        std::string rank = detail::mma_rank_error(x.role, x.box, x.dims);
        if (!rank.empty()) {
            fail(op, label, rank);
        }
    }
    std::string types =
        detail::mma_type_error(acc_buffer.name, acc_buffer.type, a_buffer.name, a_buffer.type,
                               b_buffer.name, b_buffer.type, "wgmma", true, true);
    if (!types.empty()) {
        fail(op, label, types);
    }
    std::string shapes = detail::mma_shape_error(acc_box, a_box, b_box);
    if (!shapes.empty()) {
        fail(op, label, shapes);
    }
    int64_t n = acc_box.dims[0].extent, m = acc_box.dims[1].extent;
    int64_t k = a_box.dims[0].extent;
    uint64_t name = op_name(OpKind::Wgmma, label);
    Agent &agent = me();

    Cycles start = std::max(agent.now, impl_.tensor_free[size_t(sm_)]);
    Cycles total = params_.wgmma_cycles(m, n, k, a_buffer.type);
    Cycles compute = total - params_.wgmma_latency;
    impl_.tensor_free[size_t(sm_)] = start + compute;
    impl_.tensor_busy[size_t(sm_)] += compute;
    impl_.trace.add(uint32_t(name >> 32), "wgmma", sm_, kTensorTrack, start, compute);
    Cycles end = start + total;
    end_ = std::max(end_, end);

    int tensor = tensor_of(current_);
    clocks_.join(tensor, clocks_.clock(wg(current_)));
    clocks_.tick(wg(current_));
    access(a, a_box, false, tensor, name, kAsyncProxy);
    access(b, b_box, false, tensor, name, kAsyncProxy);
    access(acc, acc_box, true, tensor, name, kAsyncProxy);
    if (impl_.numerics) {
        impl_.multiplier.multiply_add(acc_buffer.data.get(), acc_box, a_buffer.data.get(),
                                      a_buffer.type, a_box, b_buffer.data.get(), b_buffer.type,
                                      b_box);
    }
    agent.wgmma_open = true;
    agent.wgmma_open_end = std::max(agent.wgmma_open_end, end);
    agent.now += params_.issue_cycles;
}

void Machine::Impl::CtaRun::wgmma_commit_group() {
    begin_op("wgmma_commit_group");
    Agent &agent = me();
    int tensor = tensor_of(current_);
    agent.wgmma_groups.push_back(
        Group{agent.wgmma_open ? agent.wgmma_open_end : 0, clocks_.copy(tensor)});
    clocks_.tick(tensor);
    agent.wgmma_open = false;
    agent.wgmma_open_end = 0;
    agent.now += params_.issue_cycles;
}

void Machine::Impl::CtaRun::wgmma_wait_group(int pending) {
    const char *op = "wgmma_wait_group";
    begin_op(op);
    if (pending < 0) {
        fail(op, "pending group count " + std::to_string(pending) + " is negative");
    }
    Agent &agent = me();
    std::deque<Group> &groups = agent.wgmma_groups;
    if (groups.size() > size_t(pending)) {
        size_t retire = groups.size() - size_t(pending);
        Cycles end = 0;
        for (size_t g = 0; g < retire; ++g) {
            end = std::max(end, groups[g].end);
        }
        clocks_.join(wg(current_), groups[retire - 1].clock.data());
        groups.erase(groups.begin(), groups.begin() + std::ptrdiff_t(retire));
        if (end > agent.now) {
            if (impl_.trace.on()) {
                impl_.trace.add(impl_.labels.id("wgmma_wait_group " + std::to_string(pending)),
                                "wgmma_wait", sm_, agent.track, agent.now, end - agent.now);
            }
            agent.now = end;
        }
    }
    agent.now += params_.issue_cycles;
}

void Machine::Impl::CtaRun::fence_proxy_async() {
    begin_op("fence_proxy_async");
    int self = wg(current_);
    me().fence_epochs.push_back(clocks_.epoch(self));
    clocks_.tick(self);
    me().now += params_.issue_cycles;
}

bool Machine::Impl::CtaRun::named_barrier_sync(int id, int agents) {
    const char *op = "named_barrier_sync";
    begin_op(op);
    if (id < 0 || id >= kNamedBarriers) {
        fail(op, "named barrier " + std::to_string(id) + " does not exist (ids 0.." +
                     std::to_string(kNamedBarriers - 1) + ")");
    }
    if (agents < 1) {
        fail(op, "named barrier " + std::to_string(id) + ": agent count " + std::to_string(agents) +
                     " must be at least 1");
    }
    Agent &agent = me();
    if (agent.released[size_t(id)]) {
        agent.released[size_t(id)] = false;
        agent.now += params_.issue_cycles;
        return true;
    }
    NamedBarrier &barrier = named_[size_t(id)];
    if (barrier.arrived.empty()) {
        barrier.expected = agents;
    } else if (barrier.expected != agents) {
        fail(op, "named barrier " + std::to_string(id) + " is synced for " +
                     std::to_string(agents) + " agents here but for " +
                     std::to_string(barrier.expected) + " by agent '" +
                     agents_[size_t(barrier.arrived.front())].name +
                     "'; all participants must give the same count");
    }
    barrier.arrived.push_back(current_);
    clocks_.join_into(barrier.clock, clocks_.clock(wg(current_)));
    clocks_.tick(wg(current_));
    barrier.latest = std::max(barrier.latest, agent.now);
    if (int(barrier.arrived.size()) < barrier.expected) {
        block(WaitKind::NamedBarrier, id, -1);
        return false;
    }
    Cycles release = barrier.latest + params_.barrier_latency;
    for (int participant : barrier.arrived) {
        clocks_.join(wg(participant), barrier.clock.data());
        agents_[size_t(participant)].released[size_t(id)] = true;
        if (participant != current_) {
            wake(participant, release);
        }
    }
    barrier = NamedBarrier{};
    block(WaitKind::NamedBarrier, id, release);
    return false;
}

void Machine::Impl::CtaRun::setmaxnreg(int registers, bool increase) {
    const char *op = "setmaxnreg";
    begin_op(op);
    if (registers < 24 || registers > 256 || registers % 8 != 0) {
        fail(op, std::string(increase ? "inc" : "dec") + " to " + std::to_string(registers) +
                     " registers: the count must be a multiple of 8 in [24, 256]");
    }
    me().max_registers = registers;
    me().now += params_.issue_cycles;
}

void Machine::Impl::CtaRun::vector_op(const std::string &label, int64_t flops, int64_t wavefronts,
                                      int64_t rounds, const std::vector<Access> &accesses,
                                      const std::function<void()> &compute) {
    const char *op = "vector";
    begin_op(op, &label);
    if (flops < 0 || wavefronts < 0 || rounds < 0) {
        fail(op, label,
             "negative work (" + std::to_string(flops) + " flops, " + std::to_string(wavefronts) +
                 " wavefronts, " + std::to_string(rounds) + " rounds)");
    }
    for (const Access &x : accesses) {
        checked(op, label, x.write ? "written" : "read", x.buffer, x.box);
    }
    Agent &agent = me();
    uint64_t name = op_name(OpKind::Vector, label);
    // The SM's CUDA cores are shared by its warpgroups: vector ops of one SM take turns.
    Cycles start = std::max(agent.now, impl_.vector_free[size_t(sm_)]);
    // The CUDA cores and the shared-memory pipe overlap; the rounds are this warpgroup's wait.
    Cycles work =
        params_.issue_cycles +
        std::max<Cycles>(detail::ceil_div(flops, params_.vector_flops_per_cycle), wavefronts);
    Cycles duration = (start - agent.now) + work + rounds * params_.shared_latency;
    impl_.vector_free[size_t(sm_)] = start + work;
    impl_.trace.add(uint32_t(name >> 32), "vector", sm_, agent.track, start, work);
    for (const Access &x : accesses) {
        access(x.buffer, x.box, x.write, wg(current_), name, kGenericProxy);
    }
    if (impl_.numerics && compute) {
        compute();
    }
    agent.now += duration;
    impl_.vector_busy += work;
}

// --- running ------------------------------------------------------------------------------------

Buffer *Machine::Impl::CtaRun::local_buffer(int id) {
    size_t index = size_t(id - kFirstCtaBuffer);
    return id >= kFirstCtaBuffer && index < locals_.size() ? &locals_[index] : nullptr;
}

// --- errors -------------------------------------------------------------------------------------

void Machine::Impl::CtaRun::fail(const char *op, const std::string &message) const {
    throw SimError("CTA " + std::to_string(cta_) + ", agent '" + agents_[size_t(current_)].name +
                   "': " + op + ": " + message);
}

void Machine::Impl::CtaRun::fail(const char *op, const std::string &label,
                                 const std::string &message) const {
    throw SimError("CTA " + std::to_string(cta_) + ", agent '" + agents_[size_t(current_)].name +
                   "': " + op + " '" + label + "': " + message);
}

void Machine::Impl::CtaRun::check_building(const std::string &what) const {
    if (!building_) {
        throw SimError(what + ": the CtaBuilder of CTA " + std::to_string(cta_) +
                       " is only valid inside the CTA factory");
    }
}

void Machine::Impl::CtaRun::take_smem(const std::string &name, const char *kind, int64_t bytes) {
    int64_t free = params_.smem_bytes - smem_used_;
    if (bytes > free) {
        build_error("smem overflow in CTA " + std::to_string(cta_) + ": " + kind + " '" + name +
                    "' needs " + std::to_string(bytes) + " bytes, but only " +
                    std::to_string(free) + " of " + std::to_string(params_.smem_bytes) +
                    " bytes are free; use fewer stages or smaller tiles");
    }
    smem_used_ += bytes;
}

int Machine::Impl::CtaRun::add_local(const std::string &name, DType type, Memory memory, int agent,
                                     int64_t elements) {
    Buffer buffer{name, type, memory, agent, elements, nullptr};
    if (impl_.numerics) {
        buffer.data.reset(new std::byte[size_t(elements * bytes_of(type))]());
    }
    locals_.push_back(std::move(buffer));
    local_history_.emplace_back();
    return kFirstCtaBuffer + int(locals_.size()) - 1;
}

void Machine::Impl::CtaRun::begin_op(const char *op, const std::string *label) {
    if (failed_wait_) {
        std::string what = label ? std::string(op) + " '" + *label + "'" : std::string(op);
        throw SimError("CTA " + std::to_string(cta_) + ", agent '" + me().name + "': " + what +
                       " follows a wait that returned false in the same step; return "
                       "Step::Blocked right after a failed wait and retry that wait");
    }
    ++ops_in_step_;
}

// --- buffers ------------------------------------------------------------------------------------

Buffer *Machine::Impl::CtaRun::find(int id) {
    if (id >= 0 && size_t(id) < impl_.globals.size()) {
        return &impl_.globals[size_t(id)];
    }
    return local_buffer(id);
}

const Buffer &Machine::Impl::CtaRun::checked(const char *op, const std::string &label,
                                             const char *role, int id, const Box &box) {
    Buffer *buffer = find(id);
    if (!buffer) {
        fail(op, label,
             std::string(role) + " buffer id " + std::to_string(id) +
                 " is neither a global buffer nor smem or registers of CTA " +
                 std::to_string(cta_));
    }
    if (buffer->memory == Memory::Registers && buffer->agent != current_) {
        fail(op, label,
             std::string(role) + " buffer '" + buffer->name + "' is registers of agent '" +
                 agents_[size_t(buffer->agent)].name +
                 "'; an agent can only touch its own registers");
    }
    std::string outside = detail::box_outside_error(role, box, buffer->name, buffer->elements);
    if (!outside.empty()) {
        fail(op, label, outside);
    }
    return *buffer;
}

const Buffer &Machine::Impl::CtaRun::operand(const char *op, const std::string &label,
                                             const char *role, int id, const Box &box,
                                             Memory memory) {
    const Buffer &buffer = checked(op, label, role, id, box);
    if (buffer.memory != memory) {
        fail(op, label,
             std::string("operand ") + role + " (buffer '" + buffer.name + "') is in " +
                 memory_name(buffer.memory) + "; wgmma takes it from " +
                 (memory == Memory::Registers ? "registers of the issuing agent" : "smem"));
    }
    return buffer;
}

uint64_t Machine::Impl::CtaRun::op_name(OpKind kind, const std::string &label) {
    return OpName{kind, current_, cta_, impl_.labels.id(label)}.pack();
}

// --- barriers -----------------------------------------------------------------------------------

Barrier &Machine::Impl::CtaRun::barrier_of(const char *op, int barrier, CtaRun *owner) {
    CtaRun &to = owner ? *owner : *this;
    if (barrier < 0 || size_t(barrier) >= to.barriers_.size()) {
        fail(op, "mbarrier " + std::to_string(barrier) + " does not exist (CTA " +
                     std::to_string(to.cta_) + " has " + std::to_string(to.barriers_.size()) +
                     " mbarriers)");
    }
    return to.barriers_[size_t(barrier)];
}

Barrier &Machine::Impl::CtaRun::used_barrier(const char *op, int barrier, const char *use,
                                             const uint64_t *use_op, CtaRun *owner) {
    Barrier &bar = barrier_of(op, barrier, owner);
    if (!bar.initialised) {
        fail(op, "mbarrier '" + bar.name +
                     "' is not initialised; mbarrier_init it (and sync the CTA) first");
    }
    if (clocks_.clock(wg(current_))[bar.init_agent] < bar.init_epoch) {
        uint64_t name = use_op ? *use_op : op_name(OpKind::Mbarrier, use + (" " + bar.name));
        impl_.add_race(bar.init_op, name, -1 - int64_t(barrier), kBarrierInit,
                       "mbarrier " + bar.name,
                       "the mbarrier is used before its mbarrier_init is ordered before the "
                       "use; initialise, then sync the CTA (a named barrier of all agents; "
                       "in a cluster, cluster_sync) before other agents use it");
    }
    return bar;
}

void Machine::Impl::CtaRun::arrive(const char *op, int barrier, int64_t bytes, CtaRun *owner) {
    begin_op(op);
    CtaRun &to = owner ? *owner : *this;
    Barrier &bar = used_barrier(op, barrier, "arrive", nullptr, owner);
    if (bytes < 0 || bytes > kMaxTxBytes) {
        fail(op, "mbarrier '" + bar.name + "': expect_tx of " + std::to_string(bytes) +
                     " bytes; it must be in [0, " + std::to_string(kMaxTxBytes) + "]");
    }
    if (bar.pending == 0) {
        fail(op, "mbarrier '" + bar.name + "' gets more arrivals than its count (" +
                     std::to_string(bar.count) + ") in phase " + std::to_string(bar.completions) +
                     " (parity " + std::to_string(bar.completions & 1) +
                     "), which still waits for " + std::to_string(bar.tx) +
                     " tx bytes; arrive once per expected arrival and phase");
    }
    if (bar.tx + bytes > kMaxTxBytes) {
        fail(op, "mbarrier '" + bar.name + "' would expect " + std::to_string(bar.tx + bytes) +
                     " tx bytes in one phase; at most " + std::to_string(kMaxTxBytes));
    }
    Agent &agent = me();
    if (&to != this) {
        to.remote_arrivals_.push_back(
            {wg(current_), clocks_.epoch(wg(current_)),
             op_name(OpKind::Mbarrier, "arrive " + bar.name + " of CTA " + std::to_string(to.cta_)),
             barrier});
    }
    clocks_.join_into(bar.clock, clocks_.clock(wg(current_)));
    clocks_.tick(wg(current_));
    bar.tx += bytes;
    --bar.pending;
    bar.phase_latest = std::max(bar.phase_latest, agent.now);
    if (bar.pending == 0 && bar.tx == 0) {
        to.complete_phase(bar, bar.phase_latest);
    }
    agent.now += params_.issue_cycles;
}

void Machine::Impl::CtaRun::complete_phase(Barrier &bar, Cycles time) {
    if (!bar.recent.empty()) {
        time = std::max(time, bar.recent.back().time);
    }
    bar.recent.push_back(Completion{time, bar.clock});
    ++bar.completions;
    bar.pending = bar.count;
    bar.tx = 0;
    bar.phase_latest = 0;
    Cycles visible = time + params_.barrier_latency;
    for (int waiter : bar.waiters) {
        wake(waiter, visible);
    }
    bar.waiters.clear();
}

void Machine::Impl::CtaRun::prune(Barrier &bar) {
    while (bar.recent.size() >= 2 && bar.recent[1].time + params_.barrier_latency <= time_) {
        bar.recent.pop_front();
    }
}

// --- TMA ----------------------------------------------------------------------------------------

TmaBoxes Machine::Impl::CtaRun::tma_boxes(const char *op, const std::string &label, int smem,
                                          int64_t smem_offset, const TensorView &view,
                                          const std::vector<int64_t> &coords,
                                          const std::vector<int64_t> &box) {
    size_t rank = box.size();
    if (rank < 1 || rank > size_t(kMaxTensorRank)) {
        fail(op, label,
             "box has " + std::to_string(rank) + " dims; TMA takes 1 to " +
                 std::to_string(kMaxTensorRank));
    }
    if (view.extents.size() != rank || view.strides.size() != rank || coords.size() != rank) {
        fail(op, label,
             "the box has " + std::to_string(rank) + " dims but the view has " +
                 std::to_string(view.extents.size()) + " extents and " +
                 std::to_string(view.strides.size()) + " strides and there are " +
                 std::to_string(coords.size()) + " coordinates; give each one per dim");
    }
    Buffer *global = view.buffer >= 0 && size_t(view.buffer) < impl_.globals.size()
                         ? &impl_.globals[size_t(view.buffer)]
                         : nullptr;
    if (!global) {
        fail(op, label,
             "the tensor view's buffer id " + std::to_string(view.buffer) +
                 " is not a global buffer (add_global)");
    }
    Buffer *shared = local_buffer(smem);
    if (!shared || shared->memory != Memory::Shared) {
        fail(op, label,
             "buffer id " + std::to_string(smem) + " is not smem of CTA " + std::to_string(cta_) +
                 (shared ? " ('" + shared->name + "' is registers)" : ""));
    }
    if (shared->type != global->type) {
        fail(op, label,
             "smem '" + shared->name + "' is " + dtype_name(shared->type) + " but '" +
                 global->name + "' is " + dtype_name(global->type) +
                 "; TMA copies elements without conversion");
    }
    int64_t reach = 0;
    for (size_t d = 0; d < rank; ++d) {
        if (view.extents[d] < 1 || view.strides[d] < 1) {
            fail(op, label,
                 "view of '" + global->name + "' dim " + std::to_string(d) + " has extent " +
                     std::to_string(view.extents[d]) + " and stride " +
                     std::to_string(view.strides[d]) + "; both must be at least 1");
        }
        if (box[d] < 1 || box[d] > kMaxBoxDim) {
            fail(op, label,
                 "box dim " + std::to_string(d) + " is " + std::to_string(box[d]) +
                     "; each TMA box dim must be in [1, " + std::to_string(kMaxBoxDim) + "]");
        }
        reach += (view.extents[d] - 1) * view.strides[d];
    }
    if (reach >= global->elements) {
        fail(op, label,
             "the view reaches element " + std::to_string(reach) + " of '" + global->name +
                 "', which has " + std::to_string(global->elements) + " elements");
    }
    TmaBoxes out;
    out.smem_full.offset = smem_offset;
    out.smem_inside.offset = smem_offset;
    out.any_inside = true;
    int64_t smem_stride = 1, global_offset = 0;
    for (size_t d = 0; d < rank; ++d) {
        int64_t lo = std::max<int64_t>(0, -coords[d]);
        int64_t hi = std::min<int64_t>(box[d], view.extents[d] - coords[d]);
        out.clipped = out.clipped || lo > 0 || hi < box[d];
        if (hi <= lo) {
            out.any_inside = false;
        }
        out.smem_full.dims.push_back({box[d], smem_stride});
        out.smem_inside.offset += lo * smem_stride;
        out.smem_inside.dims.push_back({std::max<int64_t>(hi - lo, 0), smem_stride});
        global_offset += (coords[d] + lo) * view.strides[d];
        out.global_inside.dims.push_back({std::max<int64_t>(hi - lo, 0), view.strides[d]});
        smem_stride *= box[d];
    }
    out.global_inside.offset = global_offset;
    out.elements = smem_stride;
    std::string outside =
        detail::box_outside_error("smem", out.smem_full, shared->name, shared->elements);
    if (!outside.empty()) {
        fail(op, label, outside);
    }
    return out;
}

void Machine::Impl::CtaRun::complete_load(Cycles time, size_t index) {
    Load &load = loads_[index];
    if (impl_.numerics) {
        const Buffer &shared = local(load.smem);
        int bytes = bytes_of(shared.type);
        std::byte *base = shared.data.get();
        if (load.clipped) {
            std::memset(base + load.smem_full.offset * bytes, 0,
                        size_t(load.smem_full.elements() * bytes));
        }
        if (load.any_inside) {
            detail::copy_box(base, load.smem_inside, impl_.globals[size_t(load.global)].data.get(),
                             load.global_inside, bytes);
        }
    }
    Barrier &bar = barriers_[size_t(load.barrier)];
    clocks_.join_into(bar.clock, load.clock.data());
    // A peer's multicast may land before this CTA's own expect_tx (its arrival still pending).
    if (load.bytes > bar.tx && !(load.remote && bar.pending > 0)) {
        throw SimError("CTA " + std::to_string(cta_) + ", " + load.issuer + ": " + load.op + " '" +
                       impl_.labels.text(load.label) + "' completes " + std::to_string(load.bytes) +
                       " tx bytes on mbarrier '" + bar.name + "', whose phase " +
                       std::to_string(bar.completions) + " expects only " + std::to_string(bar.tx) +
                       " more: the tx count would go negative; arrive_expect_tx the full box "
                       "bytes on this barrier before the load");
    }
    bar.tx -= load.bytes;
    bar.phase_latest = std::max(bar.phase_latest, time);
    if (bar.pending == 0 && bar.tx == 0) {
        complete_phase(bar, bar.phase_latest);
    }
    load.clock = {};
}

} // namespace tandem::sim::hopper
