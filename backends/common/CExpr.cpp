#include "CExpr.h"

#include "tandem/AsyncIR.h"

#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

namespace tandem {

using namespace Halide::Internal;

std::string c_name(const std::string &name) {
    std::string r;
    for (char c : name)
        r += std::isalnum((unsigned char)c) ? c : '_';
    return r;
}

std::string CExpr::strip_parentheses(const std::string &s) {
    if (s.size() < 2 || s.front() != '(' || s.back() != ')')
        return s;
    int depth = 0;
    for (size_t i = 0; i + 1 < s.size(); i++) {
        depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
        if (depth == 0)
            return s; // the first parenthesis closes before the end
    }
    return s.substr(1, s.size() - 2);
}

std::string CExpr::halide_text(const Halide::Expr &e) {
    std::ostringstream s;
    s << e;
    return s.str();
}

std::string CExpr::print(const Halide::Expr &e) {
    const Halide::Type &t = e.type();
    switch (e->node_type) {
    case IRNodeType::IntImm:
        return std::to_string(e.as<IntImm>()->value);
    case IRNodeType::UIntImm:
        return uint_literal(e.as<UIntImm>()->value);
    case IRNodeType::FloatImm:
        return float_literal(e.as<FloatImm>()->value, t);
    case IRNodeType::Variable:
        return name(e.as<Variable>()->name);
    case IRNodeType::Add:
        return binary(t, e.as<Add>()->a, e.as<Add>()->b, "+");
    case IRNodeType::Sub:
        return binary(t, e.as<Sub>()->a, e.as<Sub>()->b, "-");
    case IRNodeType::Mul:
        return binary(t, e.as<Mul>()->a, e.as<Mul>()->b, "*");
    case IRNodeType::Div:
        return div(e.as<Div>());
    case IRNodeType::Mod:
        return mod(e.as<Mod>());
    case IRNodeType::Min:
        return helper(Helper::Min) + "<" + type_name(t) + ">(" + argument(e.as<Min>()->a) + ", " +
               argument(e.as<Min>()->b) + ")";
    case IRNodeType::Max:
        return helper(Helper::Max) + "<" + type_name(t) + ">(" + argument(e.as<Max>()->a) + ", " +
               argument(e.as<Max>()->b) + ")";
    case IRNodeType::EQ:
        return binary(t, e.as<EQ>()->a, e.as<EQ>()->b, "==");
    case IRNodeType::NE:
        return binary(t, e.as<NE>()->a, e.as<NE>()->b, "!=");
    case IRNodeType::LT:
        return binary(t, e.as<LT>()->a, e.as<LT>()->b, "<");
    case IRNodeType::LE:
        return binary(t, e.as<LE>()->a, e.as<LE>()->b, "<=");
    case IRNodeType::GT:
        return binary(t, e.as<GT>()->a, e.as<GT>()->b, ">");
    case IRNodeType::GE:
        return binary(t, e.as<GE>()->a, e.as<GE>()->b, ">=");
    case IRNodeType::And:
        return binary(t, e.as<And>()->a, e.as<And>()->b, "&&");
    case IRNodeType::Or:
        return binary(t, e.as<Or>()->a, e.as<Or>()->b, "||");
    case IRNodeType::Not:
        return "(!" + print(e.as<Not>()->a) + ")";
    case IRNodeType::Select: {
        const Select *s = e.as<Select>();
        return "(" + print(s->condition) + " ? " + print(s->true_value) + " : " +
               print(s->false_value) + ")";
    }
    case IRNodeType::Cast:
        return cast(e.as<Cast>());
    case IRNodeType::Load:
        return load(e.as<Load>());
    case IRNodeType::Call:
        return call(e.as<Call>());
    default:
        return unsupported(e);
    }
}

std::string CExpr::type_name(const Halide::Type &t) const {
    if (t.is_bool())
        return "bool";
    if (t.is_int() || t.is_uint())
        return "int64_t";
    if (t.is_float() && t.bits() == 64)
        return "double";
    return "float"; // f32, and bf16 and f16 values held exactly in a float
}

std::string CExpr::helper(Helper h) const {
    switch (h) {
    case Helper::FloorDiv:
        return "floor_div";
    case Helper::FloorMod:
        return "floor_mod";
    case Helper::Min:
        return "std::min";
    case Helper::Max:
        return "std::max";
    }
    return "?";
}

std::string CExpr::uint_literal(uint64_t value) const {
    return std::to_string(value);
}

std::string CExpr::float_literal(double value, const Halide::Type &t) const {
    std::string v;
    if (std::isinf(value)) { // a max's identity: Float(32).min() is -infinity
        v = value > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
    } else if (std::isnan(value)) {
        v = "__builtin_nanf(\"\")";
    } else {
        std::ostringstream s;
        s << std::setprecision(9) << float(value);
        v = s.str();
        if (v.find_first_of(".e") == std::string::npos)
            v += ".0";
        v += "f";
    }
    return t.is_float() && t.bits() == 16 ? rounded(t, v) : v; // bf16 and f16
}

std::string CExpr::binary(const Halide::Type &t, const Halide::Expr &a, const Halide::Expr &b,
                          const char *op) {
    return rounded(t, "(" + print(a) + " " + op + " " + print(b) + ")");
}

std::string CExpr::div(const Div *d) {
    if (!d->type.is_int() && !d->type.is_uint())
        return binary(d->type, d->a, d->b, "/");
    return helper(Helper::FloorDiv) + "(" + argument(d->a) + ", " + argument(d->b) + ")";
}

std::string CExpr::mod(const Mod *m) {
    internal_assert(m->type.is_int() || m->type.is_uint())
        << target() << " emitter: float modulo\n";
    return helper(Helper::FloorMod) + "(" + argument(m->a) + ", " + argument(m->b) + ")";
}

std::string CExpr::cast(const Cast *c) {
    return rounded(c->type, "(" + type_name(c->type) + ")(" + print(c->value) + ")");
}

std::string CExpr::call(const Call *c) {
    Expr owns, tile, first;
    if (ir::as_cluster_tile(c, &owns, &tile, &first)) // a tile-less unit runs rank 0's tile
        return "((" + print(owns) + ") ? (" + print(tile) + ") : (" + print(first) + "))";
    if (c->is_intrinsic(Call::likely) || c->is_intrinsic(Call::likely_if_innermost) ||
        c->is_intrinsic(Call::promise_clamped) || c->is_intrinsic(Call::unsafe_promise_clamped)) {
        return print(c->args[0]);
    }
    if (c->is_intrinsic(Call::abs))
        return math("fabs", print(c->args[0]), c->type);
    static const std::map<std::string, std::string> unary = {
        {"sqrt_f32", "sqrt"}, {"exp_f32", "exp"},   {"log_f32", "log"},    {"floor_f32", "floor"},
        {"ceil_f32", "ceil"}, {"tanh_f32", "tanh"}, {"round_f32", "rint"}, {"trunc_f32", "trunc"}};
    auto it = unary.find(c->name);
    if (it != unary.end())
        return math(it->second, print(c->args[0]), c->type);
    return unknown_call(c);
}

std::string CExpr::math(const std::string &function, const std::string &argument,
                        const Halide::Type &t) const {
    if (function == "fabs")
        return rounded(t, "std::fabs(" + argument + ")");
    return "std::" + function + "((float)" + argument + ")";
}

std::string CExpr::unsupported(const Halide::Expr &e) {
    internal_error << target() << " emitter: unsupported expression " << e << "\n";
    return "";
}

} // namespace tandem
