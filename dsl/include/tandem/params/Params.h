#ifndef TANDEM_PARAMS_PARAMS_H
#define TANDEM_PARAMS_PARAMS_H

/** \file
 * What the machines' parameter structs share (tandem/params/Zpu.h, tandem/params/Ascend.h, and the
 * Hopper model's HopperParams): reading a struct from a machine description by name, the element
 * types their cost formulas take, the error they throw for a request the machine cannot serve, and
 * the integer helper of their formulas. Header only: no Halide, nothing from backends/ (the models
 * include it through backends/sim/Common.h).
 */

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tandem::sim {

/** A machine description's parameter by name (tandem::MachineDescription::number, or a map in a
 * test); it throws for a name the description lacks. The params structs (ZpuParams, HopperParams,
 * AscendParams) are built from one with from(); their defaults are the built-in descriptions'
 * values (machines/<target>.json), which a test pins. */
using ParamLookup = std::function<double(const std::string &)>;

/** A params struct with each field its fields() names set from `get` (the rest: defaults). */
template <class Params> Params params_from(const ParamLookup &get) {
    Params p;
    p.fields(
        [&](const char *name, auto &v) { v = std::remove_reference_t<decltype(v)>(get(name)); });
    return p;
}

/** The element types of the models' memories: F16 is IEEE binary16 (Halide's float16_t), I8 a
 * signed byte (int8 matmul operands). */
enum class DType : uint8_t { BF16, F32, I32, U8, F16, I8 };

/** Thrown on a malformed request (box outside a buffer, SRAM over capacity, shape mismatch). */
struct SimError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

namespace detail {

inline int64_t ceil_div(int64_t a, int64_t b) { // b > 0, any sign of a
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

} // namespace detail

} // namespace tandem::sim

#endif
