#ifndef TANDEM_SIM_COMMON_H
#define TANDEM_SIM_COMMON_H

/** \file
 * What the machine models (Zpu.h, Hopper.h, Ascend.h) and their shared internals (Hazards.h,
 * Numerics.h, Trace.h) have in common: cycles, element types, boxes of elements and the accesses
 * of an op, races, the report of a run and the errors a model throws. How a params struct is read
 * from a machine description, the element types and SimError come from tandem/params/Params.h (the
 * machine descriptions' side, which the compiler reads without the models). No model's machine is
 * here.
 */

#include "tandem/params/Params.h" // ParamLookup, params_from, DType, SimError, ceil_div

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tandem::sim {

using Cycles = int64_t;

int bytes_of(DType t);
const char *dtype_name(DType t);

/** bf16 <-> f32, round to nearest even (what Halide does). */
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float f);
/** IEEE half <-> f32, round to nearest even, overflow to inf (Halide's float16_t). */
float f16_to_float(uint16_t bits);
uint16_t float_to_f16(float f);
/** A 16-bit type's bits (BF16 or F16) as f32, and an f32 rounded to them. */
float half_to_float(DType t, uint16_t bits);
uint16_t float_to_half(DType t, float f);
/** f32 rounded to the nearest FP8 value of `t` (E4M3 or E5M2; ties to even), saturating at the
 * largest finite value (CUDA's satfinite conversion); fp8_value reads it back. */
uint8_t float_to_fp8(DType t, float f);

/** An affine box of elements: offset + sum_d i_d * dims[d].stride, 0 <= i_d < dims[d].extent. */
struct Dim {
    int64_t extent = 1;
    int64_t stride = 1;
};
struct Box {
    int64_t offset = 0;
    std::vector<Dim> dims;
    int64_t elements() const;
    std::string str() const;
};

/** What an op touches. buffer is a Machine buffer id. */
struct Access {
    int buffer = -1;
    Box box;
    bool write = false;
};

struct Race {
    std::string first, second; // "op label (engine, core c)" of the two unordered accesses
    std::string buffer;
    std::string reason; // empty: the two accesses are unordered; else what is wrong
    std::string str() const;
};

/** Thrown when the control stream of a core can never proceed; message says what it waits for. */
struct DeadlockError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct EngineBusy {
    std::string engine; // "tensor", "vector", "dma" (all channels summed), "control_stall"
    Cycles busy = 0;    // summed over cores
};

struct Report {
    Cycles cycles = 0;       // max over cores of the time its last op ends
    Cycles bound_cycles = 0; // max over cores of max(tensor busy, vector busy,
                             // ceil(dma busy / channels), longest single DMA)
    std::vector<EngineBusy> busy;
    std::vector<Cycles> core_cycles;
    std::vector<Race> races; // the first 100 distinct races (op pair + buffer), in order found
    int64_t race_count = 0;  // every distinct race, also those beyond the stored 100
    bool deadlock = false;
    std::string deadlock_message;
    double efficiency() const { return cycles ? double(bound_cycles) / double(cycles) : 0.0; }
};

} // namespace tandem::sim

#endif
