#include "tandem/Func.h"
#include "tandem/Target.h"

namespace tandem {

namespace {

const std::string tag_prefix = "tandem:";

void record(Halide::Func &f, const std::string &directive, const std::string &value) {
    f.add_trace_tag(tag_prefix + directive + "=" + value);
}

} // namespace

void record_row_statistics(Halide::Func &f, int columns) {
    record(f, "row_statistics", std::to_string(columns));
}

void record_masked_block_max(Halide::Func &f, const std::string &block_loop) {
    record(f, "masked_block_max", block_loop);
}

void record_running_max(Halide::Func &f, const std::string &buffer, const std::string &block_loop) {
    record(f, "running_max", buffer);
    record(f, "running_max_loop", block_loop);
}

Directives directives_of(const Halide::Internal::Function &f) {
    Directives d;
    for (const std::string &tag : f.get_trace_tags()) {
        if (tag.rfind(tag_prefix, 0) != 0)
            continue;
        auto eq = tag.find('=');
        std::string key = tag.substr(tag_prefix.size(), eq - tag_prefix.size()),
                    value = tag.substr(eq + 1);
        if (key == "async_copy")
            d.async_copy = true;
        else if (key == "multi_buffer")
            d.multi_buffer = std::stoi(value);
        else if (key == "warp_specialize")
            d.warp_specialize = true;
        else if (key == "ping_pong")
            d.ping_pong = true;
        else if (key == "cooperative")
            d.cooperative = true;
        else if (key == "persistent")
            d.persistent = std::stoi(value);
        else if (key == "cluster")
            d.cluster = std::stoi(value);
        else if (key == "tile_mma")
            d.tile_mma = true;
        else if (key == "map_to_cores")
            d.cores_var = value;
        else if (key == "vectorize")
            d.vectorized = true;
        else if (key == "row_statistics")
            d.row_statistics = std::stoi(value);
        else if (key == "masked_block_max")
            d.masked_block_max = value;
        else if (key == "running_max")
            d.running_max = value;
        else if (key == "running_max_loop")
            d.running_max_loop = value;
    }
    return d;
}

Stage &Stage::split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner,
                    const Expr &factor, TailStrategy tail) {
    stage_.split(old, outer, inner, factor, tail);
    return *this;
}

Stage &Stage::reorder(const std::vector<VarOrRVar> &vars) {
    stage_.reorder(vars);
    return *this;
}

Stage &Stage::tile_mma() {
    record(f_, "tile_mma", "1");
    return *this;
}

Func Stage::rfactor(const RVar &r, const Var &v) {
    try {
        return Func(stage_.rfactor(r, v));
    } catch (const Halide::CompileError &e) {
        throw Error("Func '" + f_.name() + "', rfactor(" + r.name() + ", " + v.name() +
                    "): Halide refused it: " + e.what());
    }
}

Func::Func() : f_() {}
Func::Func(const std::string &name) : f_(name) {}
Func::Func(const Halide::Func &f) : f_(f) {}

Func &Func::split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner,
                  const Expr &factor, TailStrategy tail) {
    f_.split(old, outer, inner, factor, tail);
    return *this;
}

Func &Func::tile(const VarOrRVar &x, const VarOrRVar &y, const VarOrRVar &xo, const VarOrRVar &yo,
                 const VarOrRVar &xi, const VarOrRVar &yi, const Expr &xfactor, const Expr &yfactor,
                 TailStrategy tail) {
    f_.tile(x, y, xo, yo, xi, yi, xfactor, yfactor, tail);
    return *this;
}

Func &Func::fuse(const VarOrRVar &inner, const VarOrRVar &outer, const VarOrRVar &fused) {
    f_.fuse(inner, outer, fused);
    return *this;
}

Func &Func::reorder(const std::vector<VarOrRVar> &vars) {
    f_.reorder(vars);
    return *this;
}

Func &Func::compute_at(const Func &f, const VarOrRVar &var) {
    if (var.is_rvar)
        f_.compute_at(f.f_, var.rvar);
    else
        f_.compute_at(f.f_, var.var);
    return *this;
}

Func &Func::store_at(const Func &f, const VarOrRVar &var) {
    if (var.is_rvar)
        f_.store_at(f.f_, var.rvar);
    else
        f_.store_at(f.f_, var.var);
    return *this;
}

Func &Func::compute_root() {
    f_.compute_root();
    return *this;
}

Func &Func::compute_inline() {
    f_.compute_inline();
    return *this;
}

Func &Func::bound(const Var &var, const Expr &min, const Expr &extent) {
    f_.bound(var, min, extent);
    return *this;
}

Func &Func::vectorize(const VarOrRVar &var, const Expr &factor) {
    f_.vectorize(var, factor);
    record(f_, "vectorize", var.name());
    return *this;
}

Func &Func::unroll(const VarOrRVar &var) {
    f_.unroll(var);
    return *this;
}

Func Func::in(const Func &consumer) {
    return Func(f_.in(consumer.f_));
}
Func Func::in() {
    return Func(f_.in());
}

Func Func::staged(const ImageParam &input, const Func &consumer) {
    ImageParam p = input;
    return Func(p.in(consumer.f_));
}
Func Func::staged(const ImageParam &input) {
    ImageParam p = input;
    return Func(p.in());
}

Stage Func::update(int idx) {
    return Stage(f_.update(idx), f_);
}

Func &Func::async_copy() {
    record(f_, "async_copy", "1");
    return *this;
}

Func &Func::multi_buffer(int n) {
    if (n < 1) {
        throw Error("Func '" + name() + "', directive multi_buffer(" + std::to_string(n) +
                    "): the number of buffers must be at least 1 (1 = no overlap, 2 = double "
                    "buffering, ...)");
    }
    record(f_, "multi_buffer", std::to_string(n));
    return *this;
}

Func &Func::warp_specialize() {
    record(f_, "warp_specialize", "1");
    return *this;
}

Func &Func::ping_pong() {
    record(f_, "ping_pong", "1");
    return *this;
}

Func &Func::cooperative() {
    record(f_, "cooperative", "1");
    return *this;
}

Func &Func::persistent(int ctas_per_sm) {
    if (ctas_per_sm < 1 || ctas_per_sm > 32) {
        throw Error("Func '" + f_.name() + "', directive persistent(" +
                    std::to_string(ctas_per_sm) +
                    "): CTAs per SM must be 1..32 (an SM runs at most 32 CTAs)");
    }
    record(f_, "persistent", std::to_string(ctas_per_sm));
    return *this;
}

Func &Func::cluster(int ctas) {
    if (ctas < 1 || ctas > 8) {
        throw Error("Func '" + f_.name() + "', directive cluster(" + std::to_string(ctas) +
                    "): a cluster has 1 to 8 CTAs (the portable cluster size on sm_90)");
    }
    record(f_, "cluster", std::to_string(ctas));
    return *this;
}

Func &Func::map_to_cores(const VarOrRVar &var) {
    record(f_, "map_to_cores", var.name());
    return *this;
}

} // namespace tandem
