#include "AscendFlags.h"

#include "Nest.h"
#include "tandem/AsyncIR.h"

#include <algorithm>
#include <map>

namespace tandem::lower {

using namespace Halide::Internal;

namespace {

Expr var(const std::string &name) { return Variable::make(Halide::Int(32), name); }

std::vector<Stmt> flatten(const Stmt &s) {
    std::vector<Stmt> out;
    if (const Block *b = s.as<Block>()) {
        for (const Stmt &part : {b->first, b->rest}) {
            std::vector<Stmt> sub = flatten(part);
            out.insert(out.end(), sub.begin(), sub.end());
        }
    } else if (s.defined() && !is_no_op(s)) {
        out.push_back(s);
    }
    return out;
}

Stmt block(const std::vector<Stmt> &parts) {
    Stmt s;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->defined() && !is_no_op(*it)) s = s.defined() ? Block::make(*it, s) : *it;
    }
    return s.defined() ? s : Evaluate::make(0);
}

class Flags {
public:
    Flags(CompileContext &ctx, const std::vector<SramBuffer> &buffers) : ctx(ctx) {
        for (const SramBuffer &b : buffers) memory[b.name] = b.ascend_mem;
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
                for (int s = 0; s < store_versions[source]; s++) start.push_back(ir::make_set_flag({pipe, writer, base + s}));
            }
        }
        std::vector<Stmt> all = start;
        all.push_back(result);
        all.insert(all.end(), end.begin(), end.end());
        Stmt s = block(all);
        for (const Ring &r : rings) s = LetStmt::make(r.name + ".ring", 0, s);
        return s;
    }

private:
    struct Ring {
        std::string name, producer, consumer;
        int versions = 1;
        int ready_base = 0, free_base = 0;
        bool reused = true; // false: filled once per kernel, so nothing waits for it to be free
    };
    std::map<std::string, std::pair<int, bool>> copies; // func -> (copies in the text, one in a loop)

    void count_copies(const Stmt &s, bool in_loop) {
        std::string f;
        if (is_copy_produce(s, &f)) {
            auto &c = copies[f];
            c.first++;
            c.second = c.second || in_loop;
        }
        if (const For *l = s.as<For>()) return count_copies(l->body, true);
        if (const Block *b = s.as<Block>()) return count_copies(b->first, in_loop), count_copies(b->rest, in_loop);
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) return count_copies(pc->body, in_loop);
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            count_copies(i->then_case, in_loop);
            if (i->else_case.defined()) count_copies(i->else_case, in_loop);
            return;
        }
        if (const LetStmt *l = s.as<LetStmt>()) return count_copies(l->body, in_loop);
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
        return sim::ascend::pipe_name(ctx.target.ascend.pipe_for(mem_of(c.src), mem_of(c.dst)));
    }

    int allocate(const std::string &src, const std::string &dst, int count) {
        int &next = next_event[src + "_" + dst];
        int base = next;
        next += count;
        if (next > ctx.target.ascend.event_ids) {
            throw Error("target ascend: the pipe pair " + src + "_" + dst + " needs " + std::to_string(next) +
                        " live events but has " + std::to_string(ctx.target.ascend.event_ids) +
                        " (ids 0..7); use fewer versions (multi_buffer) or fewer staged inputs");
        }
        return base;
    }

    bool is_copy_produce(const Stmt &s, std::string *func) const {
        const ProducerConsumer *pc = s.as<ProducerConsumer>();
        if (!pc || !pc->is_producer || pc->name == ctx.output) return false;
        const Block *b = pc->body.as<Block>();
        ir::CopyOp c;
        if (!b || !ir::as_copy(b->first, &c)) return false;
        *func = pc->name;
        return true;
    }

    std::string pipe_of(const Stmt &s) const {
        ir::CopyOp c;
        ir::VectorOp v;
        Stmt body;
        ir::MmaOp m;
        if (ir::as_copy(s, &c)) return copy_pipe(c);
        if (ir::as_mma(s, &m)) return "M";
        if (ir::as_vector_op(s, &v, &body)) return "V";
        if (const Block *b = s.as<Block>()) return pipe_of(b->first);
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) return pipe_of(pc->body);
        if (const For *f = s.as<For>()) return pipe_of(f->body);
        if (const IfThenElse *i = s.as<IfThenElse>()) return pipe_of(i->then_case);
        if (const LetStmt *l = s.as<LetStmt>()) return pipe_of(l->body);
        return "V";
    }

    /** The pipe of the first op in `s` (program order) that reads one of `funcs`. */
    bool first_reader(const Stmt &s, const std::vector<std::string> &funcs, std::string *pipe) const {
        bool reads = false;
        for (const std::string &f : funcs) reads = reads || ir::touches(s, f);
        if (!reads) return false;
        ir::VectorOp v;
        Stmt body;
        if (const Block *b = s.as<Block>()) {
            return first_reader(b->first, funcs, pipe) || first_reader(b->rest, funcs, pipe);
        }
        if (const ProducerConsumer *pc = s.as<ProducerConsumer>()) return first_reader(pc->body, funcs, pipe);
        if (const For *f = s.as<For>()) return first_reader(f->body, funcs, pipe);
        if (const IfThenElse *i = s.as<IfThenElse>()) return first_reader(i->then_case, funcs, pipe);
        if (const LetStmt *l = s.as<LetStmt>(); l && !ir::as_vector_op(s, &v, &body)) {
            return first_reader(l->body, funcs, pipe);
        }
        *pipe = pipe_of(s);
        return true;
    }

    Ring &ring_for(const std::vector<std::string> &funcs, const std::string &producer, const std::string &consumer) {
        for (Ring &r : rings) {
            if (r.name == funcs[0] && r.consumer == consumer) return r;
        }
        Ring r;
        r.name = funcs[0];
        r.producer = producer;
        r.consumer = consumer;
        r.versions = std::max(1, ctx.of(funcs[0]).multi_buffer);
        for (const std::string &f : funcs) {
            if (std::max(1, ctx.of(f).multi_buffer) != r.versions) {
                throw Error("Func '" + f + "', directive multi_buffer(" + std::to_string(ctx.of(f).multi_buffer) +
                            "): on Ascend the Funcs copied together (" + funcs[0] + ", " + f +
                            ") share one pair of flags per version, so they need the same multi_buffer count");
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
     * lives on until the Mmad), so each group's release is placed after its last use in one scan. */
    Stmt transform(const Stmt &s) {
        std::vector<Stmt> list = flatten(s);
        if (list.size() == 1 && !list[0].as<Block>()) return transform_one(list[0]);
        struct Active {
            Ring ring;
            std::vector<std::string> funcs;
            size_t last;
        };
        std::vector<Active> active;
        std::vector<Stmt> out;
        auto slot_of = [](const Ring &r) { return var(r.name + ".ring") % r.versions; };
        auto release = [&](const Ring &r) {
            if (r.reused) out.push_back(ir::make_set_flag({r.consumer, r.producer, r.free_base + slot_of(r)}));
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
                    if (is_copy_produce(list[j], &next) && std::find(funcs.begin(), funcs.end(), next) != funcs.end()) break;
                    for (const std::string &func : funcs) {
                        if (ir::touches(list[j], func)) last = j + 1;
                    }
                }
                std::string consumer = "V";
                for (size_t j = k; j < last && !first_reader(list[j], funcs, &consumer); j++) {
                }
                const Ring r = ring_for(funcs, pipe_of(produces[0]), consumer); // a copy: `rings` grows
                Expr slot = slot_of(r);
                if (r.reused) out.push_back(ir::make_wait_flag({r.consumer, r.producer, r.free_base + slot}));
                for (const Stmt &p : produces) {
                    Stmt copy = p.as<ProducerConsumer>()->body.as<Block>()->first;
                    for (const std::string &func : funcs) copy = substitute(ir::stage_var(func), slot, copy);
                    out.push_back(copy);
                }
                out.push_back(ir::make_set_flag({r.producer, r.consumer, r.ready_base + slot}));
                out.push_back(ir::make_wait_flag({r.producer, r.consumer, r.ready_base + slot}));
                if (last == k) release(r);
                else active.push_back({r, funcs, last - 1});
                i = k - 1;
                continue;
            }
            Stmt stmt = transform_one(list[i]);
            for (const Active &a : active) {
                for (const std::string &func : a.funcs) stmt = substitute(ir::stage_var(func), slot_of(a.ring), stmt);
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
            return For::make(f->name, f->min, f->extent, f->for_type, f->device_api, transform(f->body));
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
        if (ir::as_copy(s, &c) && c.dst == ctx.output) {
            // The store: the writer (V, or the cube for an L0C accumulator) hands the tile to the store
            // pipe (MTE3, or FIX), which hands the version back once it has read it.
            auto [writer, pipe] = store_pipes(c.src);
            int ready = store_event(store_ready, c.src, writer, pipe), free = store_event(store_free, c.src, pipe, writer);
            return block({ir::make_set_flag({writer, pipe, ready + c.slot}), ir::make_wait_flag({writer, pipe, ready + c.slot}),
                          s, ir::make_set_flag({pipe, writer, free + c.slot})});
        }
        if (ir::as_wait(s, &w)) {
            // Waits left are on a store source's empty barrier: its version is free again.
            std::string source = w.barrier.substr(0, w.barrier.size() - 6);
            auto [writer, pipe] = store_pipes(source);
            return ir::make_wait_flag({pipe, writer, store_event(store_free, source, pipe, writer) + w.slot});
        }
        return s;
    }

    std::pair<std::string, std::string> store_pipes(const std::string &source) const {
        if (mem_of(source) == sim::ascend::Mem::L0C) return {"M", "FIX"};
        return {"V", "MTE3"};
    }

    int store_event(std::map<std::string, int> &events, const std::string &source, const std::string &src,
                    const std::string &dst) {
        auto it = events.find(source);
        if (it != events.end()) return it->second;
        int versions = 1;
        auto slots = ctx.slots.find(source);
        if (slots != ctx.slots.end()) versions = slots->second;
        store_versions[source] = versions;
        return events[source] = allocate(src, dst, versions);
    }
};

} // namespace

Stmt insert_flags(const Stmt &s, CompileContext &ctx, const std::vector<SramBuffer> &buffers) {
    Flags flags(ctx, buffers);
    Stmt result = flags.run(s);
    ctx.notes.push_back("ascend: every op on its pipe, joined by SetFlag/WaitFlag (pre-armed reverse flags)");
    return result;
}

} // namespace tandem::lower
