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
 * signed byte (int8 matmul operands), E4M3 and E5M2 the OCP 8-bit floats (FP8 matmul operands,
 * fp8_value). */
enum class DType : uint8_t { BF16, F32, I32, U8, F16, I8, E4M3, E5M2 };

/** Thrown on a malformed request (box outside a buffer, SRAM over capacity, shape mismatch). */
struct SimError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

namespace detail {

inline int64_t ceil_div(int64_t a, int64_t b) { // b > 0, any sign of a
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

} // namespace detail

/** The value of FP8 bits (OCP 8-bit floating point v1.0, as CUDA's __nv_fp8_e4m3 and
 * __nv_fp8_e5m2 hold them): e4m3 has bias 7, subnormals, no infinities and NaN at S.1111.111;
 * e5m2 has bias 15 and IEEE subnormals, infinities and NaNs. Exact in f32. */
inline float fp8_value(uint8_t bits, bool e4m3) {
    const int mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, top = e4m3 ? 15 : 31;
    const int exponent = (bits & 0x7f) >> mantissa_bits;
    const int mantissa = bits & ((1 << mantissa_bits) - 1);
    const float sign = (bits & 0x80) != 0 ? -1.0f : 1.0f;
    if (exponent == top && (!e4m3 || mantissa == (1 << mantissa_bits) - 1)) {
        if (mantissa == 0) // e5m2 only
            return sign * __builtin_huge_valf();
        return __builtin_nanf("");
    }
    // subnormals (exponent 0) are m * 2^(1 - bias - mantissa_bits)
    const int significand = exponent == 0 ? mantissa : (1 << mantissa_bits) + mantissa;
    const int scale = (exponent == 0 ? 1 : exponent) - bias - mantissa_bits;
    float value = float(significand);
    for (int i = 0; i < scale; i++)
        value *= 2.0f;
    for (int i = 0; i > scale; i--)
        value *= 0.5f;
    return sign * value;
}

} // namespace tandem::sim

#endif
