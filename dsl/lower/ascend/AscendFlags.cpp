#include "AscendFlags.h"

#include "AscendMix.h"
#include "tandem/params/Ascend.h"

#include "tandem/AsyncIR.h"
#include "tandem/Nest.h"

#include <algorithm>
#include <map>
#include <set>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

class Flags {
public:
    Flags(CompileContext &ctx, const std::vector<SramBuffer> &buffers) : ctx(ctx) {
        for (const SramBuffer &b : buffers)
            memory[b.name] = b.ascend_mem;
    }

    Stmt run(const Stmt &body) {
        count_copies(body, false);
        Stmt result = transform(body);
        // Pre-arm every reverse flag at the start (the copy-in rings; the store's only when it is
        // asynchronous, since then the tile waits before it is rewritten) and drain the rings'.
        std::vector<Stmt> start, end;
        for (const Ring &r : rings) {
            for (int s = 0; s < r.versions && r.reused; s++) {
                start.push_back(ir::make_set_flag({r.consumer, r.producer, r.free_base + s}));
                end.push_back(ir::make_wait_flag({r.consumer, r.producer, r.free_base + s}));
            }
        }
        if (ctx.of(ctx.output).async_copy) {
            for (const auto &[source, base] : store_free) {
                auto [writer, pipe] = store_pipes(source);
                for (int s = 0; s < store_versions[source]; s++)
                    start.push_back(ir::make_set_flag({pipe, writer, base + s}));
            }
        }
        std::vector<Stmt> all = start;
        all.push_back(drop_implied_flags(result));
        all.insert(all.end(), end.begin(), end.end());
        Stmt s = block(all);
        for (const Ring &r : rings)
            s = LetStmt::make(r.name + ".ring", 0, s);
        return s;
    }

private:
    /** A forward pair: SetFlag<A_B>(e) right before WaitFlag<A_B>(e). Its wait matches that set
     * (each (A, B, e) belongs to one ring whose sets are all followed by their wait). */
    static bool forward_pair(const std::vector<Stmt> &list, size_t i, ir::FlagOp *flag) {
        ir::FlagOp wait;
        return i + 1 < list.size() && ir::as_set_flag(list[i], flag) &&
               ir::as_wait_flag(list[i + 1], &wait) && wait.src == flag->src &&
               wait.dst == flag->dst && equal(wait.event, flag->event);
    }

    /** The buffers a group of copies writes, and those it reads. */
    struct Copied {
        std::vector<std::string> written, read;
        /** True if `s` touches what the copies wrote or writes what they read. */
        bool conflicts(const Stmt &s) const {
            return std::any_of(written.begin(), written.end(),
                               [&](const std::string &b) { return ir::touches(s, b); }) ||
                   std::any_of(read.begin(), read.end(),
                               [&](const std::string &b) { return ir::writes(s, b); });
        }
    };

    /** True if every op of `s` that conflicts with the copies is preceded, in the same iteration,
     * by the wait of a forward pair of `flag`'s pipes; those waits go to `cover`. */
    static bool covered(const Stmt &s, const ir::FlagOp &flag, const Copied &copied,
                        std::vector<const IRNode *> &cover) {
        if (!copied.conflicts(s))
            return true;
        std::vector<Stmt> list = flatten(s);
        if (list.size() > 1 || list[0].as<Block>()) {
            for (size_t i = 0; i < list.size(); i++) {
                ir::FlagOp pair;
                if (forward_pair(list, i, &pair) && pair.src == flag.src && pair.dst == flag.dst) {
                    cover.push_back(list[i + 1].get());
                    return true;
                }
                if (!covered(list[i], flag, copied, cover))
                    return false;
            }
            return true;
        }
        ir::VectorOp v;
        Stmt body;
        if (const For *f = s.as<For>())
            return covered(f->body, flag, copied, cover);
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>())
            return covered(pc->body, flag, copied, cover);
        if (const LetStmt *l = s.as<LetStmt>(); l && !ir::as_vector_op(s, &v, &body)) {
            return covered(l->body, flag, copied, cover);
        }
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            return covered(i->then_case, flag, copied, cover) &&
                   (!i->else_case.defined() || covered(i->else_case, flag, copied, cover));
        }
        return false; // an op that reads the buffers with no wait before it
    }

    /** A statement list being walked: where the walk is, and whether the list is a loop body
     * (after its end comes its start again). */
    struct Frame {
        std::vector<Stmt> list;
        size_t index = 0;
        bool loop_body = false;
    };
    struct Implied {
        std::set<const IRNode *> drop, pinned;
    };

    /** Scans list[from, to) for what follows a forward pair of `flag`: 1 when a forward pair of
     * the same pipes or the next copy into the buffers ends the scan, -1 at an op that conflicts
     * with the copies before any such wait, 0 when the range ends first. */
    static int scan(const std::vector<Stmt> &list, size_t from, size_t to, const ir::FlagOp &flag,
                    const Copied &copied, std::vector<const IRNode *> &cover) {
        for (size_t k = from; k < to; k++) {
            ir::FlagOp pair;
            ir::CopyOp copy;
            if (forward_pair(list, k, &pair) && pair.src == flag.src && pair.dst == flag.dst) {
                cover.push_back(list[k + 1].get());
                return 1;
            }
            if (ir::as_copy(list[k], &copy) &&
                std::count(copied.written.begin(), copied.written.end(), copy.dst)) {
                return 1;
            }
            if (!covered(list[k], flag, copied, cover))
                return -1;
        }
        return 0;
    }

    /** Whether the forward pair at list[i] of the innermost frame is implied: every op after it
     * (in the same iteration, the next iterations of each enclosing loop, and after the loops)
     * that conflicts with the copies before it first waits for a later forward pair of the same
     * pipes, or comes after the next copy into the buffers. */
    static bool implied(const std::vector<Frame> &frames, size_t i, const ir::FlagOp &flag,
                        std::vector<const IRNode *> &cover) {
        const std::vector<Stmt> &list = frames.back().list;
        Copied copied;
        ir::CopyOp copy;
        for (size_t j = i; j > 0 && ir::as_copy(list[j - 1], &copy); j--) {
            copied.written.push_back(copy.dst);
            copied.read.push_back(copy.src);
        }
        if (copied.written.empty())
            return false;
        size_t from = i + 2;
        for (size_t f = frames.size(); f-- > 0;) {
            const Frame &frame = frames[f];
            int r = scan(frame.list, from, frame.list.size(), flag, copied, cover);
            if (r)
                return r > 0;
            // The next iteration, up to this point again, and (below) what follows the loop.
            if (frame.loop_body &&
                scan(frame.list, 0, frame.index + (f + 1 == frames.size() ? 0 : 1), flag, copied,
                     cover) < 0) {
                return false;
            }
            if (f > 0)
                from = frames[f - 1].index + 1;
        }
        return true;
    }

    /** Finds, in text order, the forward pairs after a copy that no run needs (see implied(), as
     * attention's resident Q tile before the streamed K tiles). A pair that some dropped pair
     * relies on is kept. */
    static void find_implied(const Stmt &s, bool loop_body, std::vector<Frame> &frames,
                             Implied &found) {
        frames.push_back({flatten(s), 0, loop_body});
        for (size_t i = 0; i < frames.back().list.size(); i++) {
            frames.back().index = i;
            const std::vector<Stmt> &list = frames.back().list;
            ir::FlagOp flag;
            std::vector<const IRNode *> cover;
            if (forward_pair(list, i, &flag)) {
                if (!found.pinned.count(list[i + 1].get()) && implied(frames, i, flag, cover)) {
                    found.drop.insert(list[i].get());
                    found.drop.insert(list[i + 1].get());
                    found.pinned.insert(cover.begin(), cover.end());
                }
                i++;
                continue;
            }
            const Stmt t = list[i];
            ir::VectorOp v;
            Stmt body;
            if (const For *f = t.as<For>())
                find_implied(f->body, true, frames, found);
            if (const ProducerConsumer *pc = t.as<ProducerConsumer>())
                find_implied(pc->body, false, frames, found);
            if (const LetStmt *l = t.as<LetStmt>(); l && !ir::as_vector_op(t, &v, &body)) {
                find_implied(l->body, false, frames, found);
            }
            if (const IfThenElse *c = t.as<IfThenElse>()) {
                find_implied(c->then_case, false, frames, found);
                if (c->else_case.defined())
                    find_implied(c->else_case, false, frames, found);
            }
        }
        frames.pop_back();
    }

    Stmt drop_implied_flags(const Stmt &s) {
        std::vector<Frame> frames;
        Implied found;
        find_implied(s, false, frames, found);
        const std::set<const IRNode *> &drop = found.drop;
        struct Dropper : IRMutator {
            const std::set<const IRNode *> &drop;
            explicit Dropper(const std::set<const IRNode *> &drop) : drop(drop) {}
            using IRMutator::visit;
            Stmt visit(const Block *b) override {
                std::vector<Stmt> kept;
                for (const Stmt &part : flatten(b)) {
                    if (!drop.count(part.get()))
                        kept.push_back(mutate(part));
                }
                return block(kept);
            }
        } dropper(drop);
        if (!drop.empty()) {
            ctx.notes.push_back(
                "ascend: " + std::to_string(drop.size() / 2) +
                " forward flag pair(s) implied by a later pair of the same pipes, not emitted");
        }
        return dropper.mutate(s);
    }

    struct Ring {
        std::string name, producer, consumer;
        int versions = 1;
        int ready_base = 0, free_base = 0;
        bool reused = true; // false: filled once per kernel, so nothing waits for it to be free
    };
    std::map<std::string, std::pair<int, bool>>
        copies; // func -> (copies in the text, one in a loop)

    void count_copies(const Stmt &s, bool in_loop) {
        std::string f;
        if (is_copy_produce(s, &f)) {
            auto &c = copies[f];
            c.first++;
            c.second = c.second || in_loop;
        }
        if (const For *l = s.as<For>())
            return count_copies(l->body, true);
        if (const Block *b = s.as<Block>())
            return count_copies(b->first, in_loop), count_copies(b->rest, in_loop);
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>())
            return count_copies(pc->body, in_loop);
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            count_copies(i->then_case, in_loop);
            if (i->else_case.defined())
                count_copies(i->else_case, in_loop);
            return;
        }
        if (const LetStmt *l = s.as<LetStmt>())
            return count_copies(l->body, in_loop);
    }
    CompileContext &ctx;
    std::vector<Ring> rings;
    std::map<std::string, int> store_ready, store_free, store_versions;
    std::map<std::string, int> next_event; // per pipe pair
    std::map<std::string, sim::ascend::Mem> memory;

    sim::ascend::Mem mem_of(const std::string &buffer) const {
        auto it = memory.find(buffer);
        return it == memory.end() ? sim::ascend::Mem::GM : it->second;
    }

    std::string copy_pipe(const ir::CopyOp &c) const {
        return sim::ascend::pipe_name(sim::ascend::AscendParams::from(ctx.target.lookup())
                                          .pipe_for(mem_of(c.src), mem_of(c.dst)));
    }

    int allocate(const std::string &src, const std::string &dst, int count) {
        int &next = next_event[src + "_" + dst];
        int base = next;
        next += count;
        if (next > ctx.target.machine.integer("event_ids")) {
            throw Error("target ascend: the pipe pair " + src + "_" + dst + " needs " +
                        std::to_string(next) + " live events but has " +
                        std::to_string(ctx.target.machine.integer("event_ids")) +
                        " (ids 0..7); use fewer versions (multi_buffer) or fewer staged inputs");
        }
        return base;
    }

    bool is_copy_produce(const Stmt &s, std::string *func) const {
        const ProducerConsumer *pc = s.as<ProducerConsumer>();
        if (!pc || !pc->is_producer || pc->name == ctx.output)
            return false;
        const Block *b = pc->body.as<Block>();
        ir::CopyOp c;
        if (!b || !ir::as_copy(b->first, &c))
            return false;
        *func = pc->name;
        return true;
    }

    std::string pipe_of(const Stmt &s) const {
        ir::CopyOp c;
        ir::VectorOp v;
        Stmt body;
        ir::MmaOp m;
        if (ir::as_copy(s, &c))
            return copy_pipe(c);
        if (ir::as_mma(s, &m))
            return "M";
        if (ir::as_vector_op(s, &v, &body))
            return "V";
        if (const Block *b = s.as<Block>())
            return pipe_of(b->first);
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>())
            return pipe_of(pc->body);
        if (const For *f = s.as<For>())
            return pipe_of(f->body);
        if (const IfThenElse *i = s.as<IfThenElse>())
            return pipe_of(i->then_case);
        if (const LetStmt *l = s.as<LetStmt>())
            return pipe_of(l->body);
        return "V";
    }

    /** The pipe of the first op in `s` (program order) that reads one of `funcs`. */
    bool first_reader(const Stmt &s, const std::vector<std::string> &funcs,
                      std::string *pipe) const {
        bool reads = false;
        for (const std::string &f : funcs)
            reads = reads || ir::touches(s, f);
        if (!reads)
            return false;
        ir::VectorOp v;
        Stmt body;
        if (const Block *b = s.as<Block>()) {
            return first_reader(b->first, funcs, pipe) || first_reader(b->rest, funcs, pipe);
        }
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>())
            return first_reader(pc->body, funcs, pipe);
        if (const For *f = s.as<For>())
            return first_reader(f->body, funcs, pipe);
        if (const IfThenElse *i = s.as<IfThenElse>())
            return first_reader(i->then_case, funcs, pipe);
        if (const LetStmt *l = s.as<LetStmt>(); l && !ir::as_vector_op(s, &v, &body)) {
            return first_reader(l->body, funcs, pipe);
        }
        *pipe = pipe_of(s);
        return true;
    }

    Ring &ring_for(const std::vector<std::string> &funcs, const std::string &producer,
                   const std::string &consumer) {
        for (Ring &r : rings) {
            if (r.name == funcs[0] && r.consumer == consumer)
                return r;
        }
        Ring r;
        r.name = funcs[0];
        r.producer = producer;
        r.consumer = consumer;
        r.versions = std::max(1, ctx.of(funcs[0]).multi_buffer);
        for (const std::string &f : funcs) {
            if (std::max(1, ctx.of(f).multi_buffer) != r.versions) {
                throw Error("Func '" + f + "', directive multi_buffer(" +
                            std::to_string(ctx.of(f).multi_buffer) +
                            "): on Ascend the Funcs copied together (" + funcs[0] + ", " + f +
                            ") share one pair of flags per version, so they need the same "
                            "multi_buffer count");
            }
        }
        r.reused = false;
        for (const std::string &f : funcs) {
            auto c = copies[f];
            r.reused = r.reused || c.first > 1 || c.second;
        }
        r.ready_base = allocate(r.producer, r.consumer, r.versions);
        r.free_base = r.reused ? allocate(r.consumer, r.producer, r.versions) : 0;
        rings.push_back(r);
        return rings.back();
    }

    /** Groups may overlap (the L1 ring is released after LoadData, while the L0 ring it filled
     * lives on until the Mmad), so each group's release is placed after its last use in one scan.
     */
    Stmt transform(const Stmt &s) {
        std::vector<Stmt> list = flatten(s);
        if (list.size() == 1 && !list[0].as<Block>())
            return transform_one(list[0]);
        struct Active {
            Ring ring;
            std::vector<std::string> funcs;
            size_t last;
        };
        std::vector<Active> active;
        std::vector<Stmt> out;
        auto slot_of = [](const Ring &r) { return int_var(r.name + ".ring") % r.versions; };
        auto release = [&](const Ring &r) {
            if (r.reused)
                out.push_back(
                    ir::make_set_flag({r.consumer, r.producer, r.free_base + slot_of(r)}));
            out.push_back(ir::make_advance(r.name + ".ring"));
        };
        for (size_t i = 0; i < list.size(); i++) {
            std::string f;
            if (is_copy_produce(list[i], &f)) {
                std::vector<Stmt> produces;
                std::vector<std::string> funcs;
                size_t k = i;
                while (k < list.size() && is_copy_produce(list[k], &f)) {
                    produces.push_back(list[k]);
                    funcs.push_back(f);
                    k++;
                }
                // Uses: up to the last statement that reads the group, before its next copy.
                size_t last = k;
                for (size_t j = k; j < list.size(); j++) {
                    std::string next;
                    if (is_copy_produce(list[j], &next) &&
                        std::find(funcs.begin(), funcs.end(), next) != funcs.end())
                        break;
                    for (const std::string &func : funcs) {
                        if (ir::touches(list[j], func))
                            last = j + 1;
                    }
                }
                std::string consumer = "V";
                for (size_t j = k; j < last && !first_reader(list[j], funcs, &consumer); j++) {
                }
                const Ring r =
                    ring_for(funcs, pipe_of(produces[0]), consumer); // a copy: `rings` grows
                Expr slot = slot_of(r);
                if (r.reused)
                    out.push_back(ir::make_wait_flag({r.consumer, r.producer, r.free_base + slot}));
                for (const Stmt &p : produces) {
                    Stmt copy = p.as<ProducerConsumer>()->body.as<Block>()->first;
                    for (const std::string &func : funcs)
                        copy = substitute(ir::stage_var(func), slot, copy);
                    out.push_back(copy);
                }
                // An operand loaded once (AscendCube) is ordered by the ready flag of the B
                // operand its readers load after it.
                if (std::any_of(funcs.begin(), funcs.end(),
                                [&](const std::string &f) { return !ctx.of(f).loaded_once; })) {
                    out.push_back(ir::make_set_flag({r.producer, r.consumer, r.ready_base + slot}));
                    out.push_back(
                        ir::make_wait_flag({r.producer, r.consumer, r.ready_base + slot}));
                }
                if (last == k)
                    release(r);
                else
                    active.push_back({r, funcs, last - 1});
                i = k - 1;
                continue;
            }
            Stmt stmt = transform_one(list[i]);
            for (const Active &a : active) {
                for (const std::string &func : a.funcs)
                    stmt = substitute(ir::stage_var(func), slot_of(a.ring), stmt);
            }
            out.push_back(stmt);
            for (size_t a = 0; a < active.size();) {
                if (active[a].last == i) {
                    release(active[a].ring);
                    active.erase(active.begin() + a);
                } else {
                    a++;
                }
            }
        }
        internal_assert(active.empty()) << "ascend flags: a group outlives its block\n";
        return block(out);
    }

    Stmt transform_one(const Stmt &s) {
        if (const For *f = s.as<For>()) {
            return For::make(f->name, f->min, f->extent, f->for_type, f->device_api,
                             transform(f->body));
        }
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            return IfThenElse::make(i->condition, transform(i->then_case),
                                    i->else_case.defined() ? transform(i->else_case) : Stmt());
        }
        ir::VectorOp v;
        Stmt body;
        if (const LetStmt *l = s.as<LetStmt>(); l && !ir::as_vector_op(s, &v, &body)) {
            return LetStmt::make(l->name, l->value, transform(l->body));
        }
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) {
            return ProducerConsumer::make(pc->name, pc->is_producer, transform(pc->body));
        }
        ir::CopyOp c;
        ir::WaitOp w;
        if (ir::as_copy(s, &c) && is_store_target(ctx, c.dst)) {
            // The store: the writer (V, or the cube for an L0C accumulator) hands the tile to the
            // store pipe (MTE3, or FIX), which hands the version back once it has read it.
            auto [writer, pipe] = store_pipes(c.src);
            int ready = store_event(store_ready, c.src, writer, pipe),
                free = store_event(store_free, c.src, pipe, writer);
            return block({ir::make_set_flag({writer, pipe, ready + c.slot}),
                          ir::make_wait_flag({writer, pipe, ready + c.slot}), s,
                          ir::make_set_flag({pipe, writer, free + c.slot})});
        }
        if (ir::as_wait(s, &w)) {
            // Waits left are on a store source's empty barrier: its version is free again.
            std::string source = w.barrier.substr(0, w.barrier.size() - 6);
            auto [writer, pipe] = store_pipes(source);
            return ir::make_wait_flag(
                {pipe, writer, store_event(store_free, source, pipe, writer) + w.slot});
        }
        return s;
    }

    std::pair<std::string, std::string> store_pipes(const std::string &source) const {
        if (mem_of(source) == sim::ascend::Mem::L0C)
            return {"M", "FIX"};
        return {"V", "MTE3"};
    }

    int store_event(std::map<std::string, int> &events, const std::string &source,
                    const std::string &src, const std::string &dst) {
        auto it = events.find(source);
        if (it != events.end())
            return it->second;
        int versions = 1;
        auto slots = ctx.slots.find(source);
        if (slots != ctx.slots.end())
            versions = slots->second;
        store_versions[source] = versions;
        return events[source] = allocate(src, dst, versions);
    }
};

/** The V pipe's instructions are not ordered with each other (its pipeline overlaps them): a
 * PipeBarrier<PIPE_V> before each vector op orders it after every earlier one, whatever they
 * touch (4 cycles each; a dependence test could drop the ones between independent ops). */
class VectorBarriers : public IRMutator {
    using IRMutator::visit;
    Stmt visit(const LetStmt *op) override {
        ir::VectorOp v;
        Stmt body;
        if (ir::as_vector_op(Stmt(op), &v, &body))
            return Block::make(ir::make_pipe_barrier("V"), Stmt(op));
        return IRMutator::visit(op);
    }
};

} // namespace

Stmt insert_flags(const Stmt &s, CompileContext &ctx, const std::vector<SramBuffer> &buffers) {
    Flags flags(ctx, buffers);
    Stmt result = VectorBarriers().mutate(flags.run(s));
    ctx.notes.push_back(
        "ascend: every op on its pipe, joined by SetFlag/WaitFlag (pre-armed reverse flags); "
        "PipeBarrier<PIPE_V> before each vector op");
    return result;
}

} // namespace tandem::lower
