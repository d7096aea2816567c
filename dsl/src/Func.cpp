#include "tandem/Func.h"
#include "tandem/Target.h"

#include <map>
#include <mutex>

namespace tandem {

namespace {

// Directives are keyed by the identity of the Halide Function (two pipelines may both have a
// Func named "acc"). A live tandem::Func keeps its Function alive, so a key is never reused while
// its entry is.
std::mutex registry_mutex;
std::map<const void *, std::weak_ptr<Directives>> &registry() {
    static std::map<const void *, std::weak_ptr<Directives>> r;
    return r;
}

const void *key_of(const Halide::Internal::Function &f) { return f.get_contents().get(); }

std::shared_ptr<Directives> directives_for(const Halide::Func &f) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto &slot = registry()[key_of(f.function())];
    if (auto d = slot.lock()) return d;
    auto d = std::make_shared<Directives>();
    slot = d;
    return d;
}

std::string var_name(const VarOrRVar &v) { return v.name(); }

} // namespace

Directives directives_of(const Halide::Internal::Function &f) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = registry().find(key_of(f));
    if (it == registry().end()) return {};
    if (auto d = it->second.lock()) return *d;
    return {};
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
    d_->tile_mma = true;
    return *this;
}

Func::Func() : f_(), d_(directives_for(f_)) {}
Func::Func(const std::string &name) : f_(name), d_(directives_for(f_)) {}
Func::Func(const Halide::Func &f) : f_(f), d_(directives_for(f_)) {}

Func &Func::split(const VarOrRVar &old, const VarOrRVar &outer, const VarOrRVar &inner, const Expr &factor,
                  TailStrategy tail) {
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
    if (var.is_rvar) f_.compute_at(f.f_, var.rvar);
    else f_.compute_at(f.f_, var.var);
    return *this;
}

Func &Func::store_at(const Func &f, const VarOrRVar &var) {
    if (var.is_rvar) f_.store_at(f.f_, var.rvar);
    else f_.store_at(f.f_, var.var);
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
    d_->vectorized = true;
    return *this;
}

Func &Func::unroll(const VarOrRVar &var) {
    f_.unroll(var);
    return *this;
}

Func Func::in(const Func &consumer) { return Func(f_.in(consumer.f_)); }
Func Func::in() { return Func(f_.in()); }

Func Func::staged(const ImageParam &input, const Func &consumer) {
    ImageParam p = input;
    return Func(p.in(consumer.f_));
}
Func Func::staged(const ImageParam &input) {
    ImageParam p = input;
    return Func(p.in());
}

Stage Func::update(int idx) { return Stage(f_.update(idx), d_); }

Func &Func::async_copy() {
    d_->async_copy = true;
    return *this;
}

Func &Func::multi_buffer(int n) {
    if (n < 1) {
        throw Error("Func '" + name() + "', directive multi_buffer(" + std::to_string(n) +
                    "): the number of buffers must be at least 1 (1 = no overlap, 2 = double "
                    "buffering, ...)");
    }
    d_->multi_buffer = n;
    return *this;
}

Func &Func::warp_specialize() {
    d_->warp_specialize = true;
    return *this;
}

Func &Func::ping_pong() {
    d_->ping_pong = true;
    return *this;
}

Func &Func::map_to_cores(const VarOrRVar &var) {
    d_->cores_var = var_name(var);
    return *this;
}

} // namespace tandem
