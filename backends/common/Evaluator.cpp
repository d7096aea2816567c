#include "common/Evaluator.h"

#include "tandem/AsyncIR.h"
#include "tandem/Fp8.h"
#include "tandem/Target.h"

#include <cmath>
#include <map>

namespace tandem {

using namespace Halide::Internal;
using Halide::Expr;
using sim::DType;

sim::DType dtype_of(const Halide::Type &t) {
    if (t.is_bfloat() && t.bits() == 16)
        return sim::DType::BF16;
    if (t.is_float() && t.bits() == 16)
        return sim::DType::F16;
    if (t.is_float() && t.bits() == 32)
        return sim::DType::F32;
    if (t.is_int() && t.bits() == 32)
        return sim::DType::I32;
    if (t.is_uint() && t.bits() == 8)
        return sim::DType::U8; // Ascend's compare masks
    if (t.is_int() && t.bits() == 8)
        return sim::DType::I8; // int8 matmul operands
    if (t == fp8::e4m3())
        return sim::DType::E4M3; // FP8 matmul operands (tandem/Fp8.h)
    if (t == fp8::e5m2())
        return sim::DType::E5M2;
    std::ostringstream os;
    os << t;
    throw Error("type " + os.str() +
                " is not supported on the machine models (bf16, float16, float32, int32, int8, "
                "uint8 and FP8 matmul operands are)");
}

namespace {

/** Halide's integer division and modulo round towards negative infinity, and give 0 for a zero
 * divisor (Halide defines x / 0 and x % 0 as 0). */
int64_t floor_div(int64_t a, int64_t b) {
    if (b == 0)
        return 0;
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) {
    if (b == 0)
        return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/** Rounds a value computed in double to what type `t` holds (f32 arithmetic done in double and
 * rounded once is exact for + - * / sqrt). */
double round_to(const Halide::Type &t, double v) {
    if (t.is_bfloat())
        return sim::bf16_to_float(sim::float_to_bf16(float(v)));
    if (t.is_float() && t.bits() == 16)
        return sim::f16_to_float(sim::float_to_f16(float(v)));
    if (t.is_float())
        return t.bits() == 32 ? double(float(v)) : v;
    if (t.is_bool())
        return v != 0;
    if (t.bits() >= 64)
        return v;
    int64_t i = int64_t(v);
    int64_t span = int64_t(1) << t.bits();
    i &= span - 1;
    if (t.is_int() && i >= span / 2)
        i -= span;
    return double(i);
}

class LoadsOf : public IRVisitor {
public:
    explicit LoadsOf(const std::string &b) : buffer(b) {}
    const std::string &buffer;
    std::vector<const Load *> loads;

private:
    using IRVisitor::visit;
    void visit(const Load *op) override {
        if (op->name == buffer)
            loads.push_back(op);
        IRVisitor::visit(op);
    }
};

} // namespace

void Evaluator::elements(const Stmt &s) {
    if (const For *f = s.as<For>()) {
        int64_t min = int64_t(scalar(f->min)), extent = int64_t(scalar(f->extent));
        if (const Store *st = f->body.as<Store>())
            return batch(f->name, min, extent, st);
        for (int64_t i = min; i < min + extent; i++) {
            vars[f->name] = double(i);
            elements(f->body);
        }
    } else if (const Store *st = s.as<Store>()) {
        store_lanes(st, 1);
    } else if (const LetStmt *l = s.as<LetStmt>()) {
        vars[l->name] = scalar(l->value);
        elements(l->body);
    } else if (const Block *b = s.as<Block>()) {
        elements(b->first);
        elements(b->rest);
    } else if (const IfThenElse *i = s.as<IfThenElse>()) {
        if (scalar(i->condition) != 0)
            elements(i->then_case);
        else if (i->else_case.defined())
            elements(i->else_case);
    } else {
        internal_error << "evaluator: unexpected statement in vector code:\n" << s << "\n";
    }
}

Evaluator::StoreKind Evaluator::kind_of(const Store *st, const std::string &var) {
    auto it = store_kinds.find(st);
    if (it != store_kinds.end())
        return it->second;
    StoreKind kind = StoreKind::Sequential;
    Expr v = Variable::make(Halide::Int(32), var);
    Expr step = simplify(substitute(var, v + 1, st->index) - st->index);
    LoadsOf self(st->name);
    st->value.accept(&self);
    bool same_index = true;
    for (const Load *l : self.loads)
        same_index = same_index && equal(l->index, st->index);
    if (is_const(step) && !is_const_zero(step) && same_index) {
        kind = StoreKind::Elementwise;
    } else if (is_const_zero(step)) {
        const Add *add = st->value.as<Add>();
        const Load *l = add ? add->a.as<Load>() : nullptr;
        LoadsOf rest(st->name);
        if (add)
            add->b.accept(&rest);
        if (l && l->name == st->name && equal(l->index, st->index) && rest.loads.empty()) {
            kind = StoreKind::Reduction;
        }
    }
    store_kinds[st] = kind;
    return kind;
}

void Evaluator::batch(const std::string &var, int64_t min, int64_t extent, const Store *st) {
    if (extent <= 0)
        return;
    StoreKind kind = kind_of(st, var);
    if (kind == StoreKind::Sequential) {
        for (int64_t i = min; i < min + extent; i++) {
            vars[var] = double(i);
            store_lanes(st, 1);
        }
        return;
    }
    lane_var = var;
    lane_base = double(min);
    int n = int(extent);
    if (kind == StoreKind::Elementwise) {
        store_lanes(st, n);
    } else {
        std::vector<double> terms(n);
        eval(st->value.as<Add>()->b, terms.data(), n);
        lane_var.clear();
        int64_t index = int64_t(scalar(st->index));
        const BufferRef &b = buffer(st->name);
        double acc = load(b, index);
        for (double t : terms)
            acc = round_to(st->value.type(), acc + t);
        store(b, index, acc);
    }
    lane_var.clear();
}

void Evaluator::store_lanes(const Store *st, int n) {
    std::vector<double> index(n), value(n);
    eval(st->index, index.data(), n);
    eval(st->value, value.data(), n);
    const BufferRef &b = buffer(st->name);
    for (int i = 0; i < n; i++)
        store(b, int64_t(index[i]), value[i]);
}

double Evaluator::load(const BufferRef &b, int64_t i) {
    internal_assert(i >= 0 && i < b.elements) << "evaluator: load out of bounds\n";
    switch (b.type) {
    case DType::BF16:
        return sim::bf16_to_float(static_cast<uint16_t *>(b.data)[i]);
    case DType::F16:
        return sim::f16_to_float(static_cast<uint16_t *>(b.data)[i]);
    case DType::F32:
        return static_cast<float *>(b.data)[i];
    case DType::I32:
        return static_cast<int32_t *>(b.data)[i];
    case DType::U8:
        return static_cast<uint8_t *>(b.data)[i];
    case DType::I8:
        return static_cast<int8_t *>(b.data)[i];
    case DType::E4M3:
    case DType::E5M2:
        return sim::fp8_value(static_cast<uint8_t *>(b.data)[i], b.type == DType::E4M3);
    }
    return 0;
}

void Evaluator::store(const BufferRef &b, int64_t i, double v) {
    internal_assert(i >= 0 && i < b.elements) << "evaluator: store out of bounds\n";
    switch (b.type) {
    case DType::BF16:
        static_cast<uint16_t *>(b.data)[i] = sim::float_to_bf16(float(v));
        break;
    case DType::F16:
        static_cast<uint16_t *>(b.data)[i] = sim::float_to_f16(float(v));
        break;
    case DType::F32:
        static_cast<float *>(b.data)[i] = float(v);
        break;
    case DType::I32:
        static_cast<int32_t *>(b.data)[i] = int32_t(v);
        break;
    case DType::U8:
        static_cast<uint8_t *>(b.data)[i] = uint8_t(v);
        break;
    case DType::I8:
        static_cast<int8_t *>(b.data)[i] = int8_t(v);
        break;
    case DType::E4M3:
    case DType::E5M2:
        static_cast<uint8_t *>(b.data)[i] = sim::float_to_fp8(b.type, float(v));
        break;
    }
}

double Evaluator::scalar(const Expr &e) {
    double r;
    eval(e, &r, 1);
    return r;
}

template <typename F>
void Evaluator::binary(const Expr &a, const Expr &b, const Halide::Type &t, double *out, int n,
                       F f) {
    std::vector<double> y(n);
    eval(a, out, n);
    eval(b, y.data(), n);
    for (int i = 0; i < n; i++)
        out[i] = round_to(t, f(out[i], y[i]));
}

void Evaluator::eval(const Expr &e, double *out, int n) {
    const Halide::Type &t = e.type();
    bool integer = t.is_int() || t.is_uint();
    switch (e->node_type) {
    case IRNodeType::IntImm:
        std::fill(out, out + n, double(e.as<IntImm>()->value));
        return;
    case IRNodeType::UIntImm:
        std::fill(out, out + n, double(e.as<UIntImm>()->value));
        return;
    case IRNodeType::FloatImm:
        std::fill(out, out + n, round_to(t, e.as<FloatImm>()->value));
        return;
    case IRNodeType::Variable: {
        const std::string &name = e.as<Variable>()->name;
        if (name == lane_var) {
            for (int i = 0; i < n; i++)
                out[i] = lane_base + i;
            return;
        }
        auto it = vars.find(name);
        internal_assert(it != vars.end()) << "evaluator: unbound variable " << name << "\n";
        std::fill(out, out + n, it->second);
        return;
    }
    case IRNodeType::Add:
        return binary(e.as<Add>()->a, e.as<Add>()->b, t, out, n, std::plus<double>());
    case IRNodeType::Sub:
        return binary(e.as<Sub>()->a, e.as<Sub>()->b, t, out, n, std::minus<double>());
    case IRNodeType::Mul:
        return binary(e.as<Mul>()->a, e.as<Mul>()->b, t, out, n, std::multiplies<double>());
    case IRNodeType::Div:
        return binary(e.as<Div>()->a, e.as<Div>()->b, t, out, n, [integer](double a, double b) {
            return integer ? double(floor_div(int64_t(a), int64_t(b))) : a / b;
        });
    case IRNodeType::Mod:
        return binary(e.as<Mod>()->a, e.as<Mod>()->b, t, out, n, [integer](double a, double b) {
            return integer ? double(floor_mod(int64_t(a), int64_t(b))) : a - b * std::floor(a / b);
        });
    case IRNodeType::Min:
        return binary(e.as<Min>()->a, e.as<Min>()->b, t, out, n,
                      [](double a, double b) { return std::min(a, b); });
    case IRNodeType::Max:
        return binary(e.as<Max>()->a, e.as<Max>()->b, t, out, n,
                      [](double a, double b) { return std::max(a, b); });
    case IRNodeType::EQ:
        return binary(e.as<EQ>()->a, e.as<EQ>()->b, t, out, n, std::equal_to<double>());
    case IRNodeType::NE:
        return binary(e.as<NE>()->a, e.as<NE>()->b, t, out, n, std::not_equal_to<double>());
    case IRNodeType::LT:
        return binary(e.as<LT>()->a, e.as<LT>()->b, t, out, n, std::less<double>());
    case IRNodeType::LE:
        return binary(e.as<LE>()->a, e.as<LE>()->b, t, out, n, std::less_equal<double>());
    case IRNodeType::GT:
        return binary(e.as<GT>()->a, e.as<GT>()->b, t, out, n, std::greater<double>());
    case IRNodeType::GE:
        return binary(e.as<GE>()->a, e.as<GE>()->b, t, out, n, std::greater_equal<double>());
    case IRNodeType::And:
        return binary(e.as<And>()->a, e.as<And>()->b, t, out, n,
                      [](double a, double b) { return a != 0 && b != 0; });
    case IRNodeType::Or:
        return binary(e.as<Or>()->a, e.as<Or>()->b, t, out, n,
                      [](double a, double b) { return a != 0 || b != 0; });
    case IRNodeType::Not:
        eval(e.as<Not>()->a, out, n);
        for (int i = 0; i < n; i++)
            out[i] = out[i] == 0;
        return;
    case IRNodeType::Select: {
        const Select *s = e.as<Select>();
        std::vector<double> c(n), f(n);
        eval(s->condition, c.data(), n);
        eval(s->true_value, out, n);
        eval(s->false_value, f.data(), n);
        for (int i = 0; i < n; i++)
            out[i] = c[i] != 0 ? out[i] : f[i];
        return;
    }
    case IRNodeType::Cast: {
        const Cast *c = e.as<Cast>();
        eval(c->value, out, n);
        bool from_float = c->value.type().is_float();
        for (int i = 0; i < n; i++)
            out[i] = round_to(t, integer && from_float ? std::trunc(out[i]) : out[i]);
        return;
    }
    case IRNodeType::Load: {
        const Load *l = e.as<Load>();
        eval(l->index, out, n);
        const BufferRef &b = buffer(l->name);
        for (int i = 0; i < n; i++)
            out[i] = load(b, int64_t(out[i]));
        return;
    }
    case IRNodeType::Call:
        return call(e.as<Call>(), out, n);
    default:
        internal_error << "evaluator: unsupported expression " << e << "\n";
    }
}

void Evaluator::call(const Call *c, double *out, int n) {
    double value = 0;
    if (call_hook && call_hook(c, &value)) {
        std::fill(out, out + n, value);
        return;
    }
    Expr owns, tile, first;
    if (ir::as_cluster_tile(c, &owns, &tile, &first)) { // a tile-less unit runs rank 0's tile
        std::fill(out, out + n, scalar(scalar(owns) != 0 ? tile : first));
        return;
    }
    if (c->is_intrinsic(Call::likely) || c->is_intrinsic(Call::likely_if_innermost) ||
        c->is_intrinsic(Call::promise_clamped) || c->is_intrinsic(Call::unsafe_promise_clamped)) {
        return eval(c->args[0], out, n);
    }
    if (c->is_intrinsic(Call::abs)) {
        eval(c->args[0], out, n);
        for (int i = 0; i < n; i++)
            out[i] = round_to(c->type, std::fabs(out[i]));
        return;
    }
    using Fn = double (*)(double);
    static const std::map<std::string, Fn> unary = {
        {"sqrt_f32", [](double x) { return double(std::sqrt(float(x))); }},
        {"exp_f32", [](double x) { return double(std::exp(float(x))); }},
        {"log_f32", [](double x) { return double(std::log(float(x))); }},
        {"floor_f32", [](double x) { return double(std::floor(float(x))); }},
        {"ceil_f32", [](double x) { return double(std::ceil(float(x))); }},
        {"tanh_f32", [](double x) { return double(std::tanh(float(x))); }},
        // Halide's round: to the nearest, ties to even (the default rounding mode's rint).
        {"round_f32", [](double x) { return double(std::nearbyint(float(x))); }},
        {"trunc_f32", [](double x) { return double(std::trunc(float(x))); }},
    };
    auto it = unary.find(c->name);
    if (it != unary.end()) {
        eval(c->args[0], out, n);
        for (int i = 0; i < n; i++)
            out[i] = round_to(c->type, it->second(out[i]));
        return;
    }
    throw Error("the vector core has no instruction for " + c->name);
}

} // namespace tandem
