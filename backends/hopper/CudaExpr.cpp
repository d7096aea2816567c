#include "CudaExpr.h"

#include "tandem/Fp8.h"

#include "Plan.h"
#include "tandem/AsyncIR.h"

#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

namespace tandem::hopper_backend {

using namespace Halide::Internal;

std::string CudaExpr::type_name(const Halide::Type &t) const {
    if (t.is_bool())
        return "bool";
    if (t.is_int())
        return t.bits() > 32 ? "int64_t" : "int";
    if (t.is_uint())
        return t.bits() > 32 ? "uint64_t" : "uint32_t";
    if (t.is_float() && t.bits() == 64)
        return "double";
    return "float"; // f32, and bf16 and f16 values held in a float
}

std::string CudaExpr::helper(Helper h) const {
    switch (h) {
    case Helper::FloorDiv:
        return "hopper::floor_div";
    case Helper::FloorMod:
        return "hopper::floor_mod";
    case Helper::Min:
        return "hopper::min_of";
    case Helper::Max:
        return "hopper::max_of";
    }
    return "?";
}

std::string CudaExpr::rounded(const Halide::Type &t, const std::string &v) const {
    if (t.is_bfloat())
        return "hopper::round_bf16" + v;
    return t.is_float() && t.bits() == 16 ? "hopper::round_f16" + v : v;
}

std::string CudaExpr::name(const std::string &ir_name) const {
    return c_name(ir_name);
}

std::string CudaExpr::load(const Load *l) {
    internal_error << "hopper emitter: a load outside an element nest: " << Expr(l) << "\n";
    return "";
}

std::string CudaExpr::uint_literal(uint64_t value) const {
    return std::to_string(value) + "u";
}

std::string CudaExpr::float_literal(double value, const Halide::Type &t) const {
    if (std::isinf(value))
        return value > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
    if (std::isnan(value))
        return "__int_as_float(0x7fc00000)";
    std::ostringstream s;
    s << std::setprecision(t.bits() == 64 ? 17 : 9) << value;
    std::string v = s.str();
    if (v.find_first_of(".e") == std::string::npos)
        v += ".0";
    return t.bits() == 64 ? v : v + "f";
}

bool CudaExpr::nonnegative(const Halide::Expr &e) const {
    if (const IntImm *i = e.as<IntImm>())
        return i->value >= 0;
    if (e.as<UIntImm>())
        return true;
    if (const Variable *v = e.as<Variable>())
        return nonnegative_vars.count(v->name) > 0;
    if (const Add *a = e.as<Add>())
        return nonnegative(a->a) && nonnegative(a->b);
    if (const Mul *m = e.as<Mul>())
        return nonnegative(m->a) && nonnegative(m->b);
    if (const Div *d = e.as<Div>())
        return nonnegative(d->a) && nonnegative(d->b);
    if (const Mod *m = e.as<Mod>()) // Halide's modulo takes the divisor's sign
        return nonnegative(m->b);
    if (const Min *m = e.as<Min>())
        return nonnegative(m->a) && nonnegative(m->b);
    if (const Max *m = e.as<Max>())
        return nonnegative(m->a) || nonnegative(m->b);
    if (const Cast *c = e.as<Cast>())
        return c->type.is_int() && c->type.bits() >= c->value.type().bits() &&
               nonnegative(c->value);
    if (const Call *c = e.as<Call>())
        return ir::is_core_id(e) || ir::is_grid_size(e) ||
               (c->is_intrinsic(Call::likely) && nonnegative(c->args[0])) ||
               ((c->is_intrinsic(Call::promise_clamped) ||
                 c->is_intrinsic(Call::unsafe_promise_clamped)) &&
                nonnegative(c->args[1])); // clamped to [args[1], args[2]]
    return false;
}

namespace {

/** A positive constant of a 32-bit int division, or 0. */
int64_t positive_divisor(const Halide::Type &t, const Halide::Expr &b) {
    const IntImm *i = b.as<IntImm>();
    return t.is_int() && t.bits() == 32 && i && i->value > 0 ? i->value : 0;
}

} // namespace

std::string CudaExpr::div(const Div *d) {
    const int64_t b = positive_divisor(d->type, d->b);
    if (b == 0 || !nonnegative(d->a))
        return CExpr::div(d);
    return "int(uint32_t(" + print(d->a) + ") / " + std::to_string(b) + "u)";
}

std::string CudaExpr::mod(const Mod *m) {
    const int64_t divisor = positive_divisor(m->type, m->b);
    if (divisor > 0 && nonnegative(m->a))
        return "int(uint32_t(" + print(m->a) + ") % " + std::to_string(divisor) + "u)";
    if (m->type.is_int() || m->type.is_uint())
        return CExpr::mod(m);
    const std::string a = print(m->a), b = print(m->b);
    return rounded(m->type, "(" + a + " - " + b + " * floorf(" + a + " / " + b + "))");
}

std::string CudaExpr::cast(const Cast *c) {
    if (c->type.is_bfloat())
        return "hopper::round_bf16(" + print(c->value) + ")";
    if (c->type.is_float() && c->type.bits() == 16)
        return "hopper::round_f16(" + print(c->value) + ")";
    return "(" + type_name(c->type) + ")(" + print(c->value) + ")";
}

std::string CudaExpr::call(const Call *c) {
    static const std::map<Call::IntrinsicOp, const char *> bitwise = {{Call::bitwise_and, "&"},
                                                                      {Call::bitwise_or, "|"},
                                                                      {Call::bitwise_xor, "^"},
                                                                      {Call::shift_left, "<<"},
                                                                      {Call::shift_right, ">>"}};
    for (const auto &[op, text] : bitwise) {
        if (c->is_intrinsic(op))
            return "(" + print(c->args[0]) + " " + text + " " + print(c->args[1]) + ")";
    }
    if (c->is_intrinsic(Call::bitwise_not))
        return "(~" + print(c->args[0]) + ")";
    return CExpr::call(c);
}

std::string CudaExpr::math(const std::string &function, const std::string &argument,
                           const Halide::Type &t) const {
    if (function == "fabs")
        return (t.is_float() ? "fabsf(" : "abs(") + argument + ")";
    return function + "f(" + argument + ")";
}

std::string CudaExpr::unknown_call(const Call *c) {
    throw Error("the hopper emitter has no CUDA for the call " + c->name);
}

std::string CudaExpr::unsupported(const Halide::Expr &e) {
    throw Error("the hopper emitter cannot print the expression " + halide_text(e));
}

std::string storage_type(const Halide::Type &t) {
    if (fp8::is_fp8(t))
        return "uint8_t"; // FP8 bits, which only TMA and wgmma touch
    if (t.is_bfloat())
        return "__nv_bfloat16";
    if (t.is_float() && t.bits() == 16)
        return "__half";
    if (t.is_float() && t.bits() == 32)
        return "float";
    if (t.is_int() && t.bits() == 32)
        return "int";
    if (t.is_int() && t.bits() == 8)
        return "int8_t";
    throw Error("hopper: the emitter has no shared-memory storage for " + type_text(t));
}

} // namespace tandem::hopper_backend
