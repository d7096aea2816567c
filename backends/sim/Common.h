#ifndef TANDEM_SIM_COMMON_H
#define TANDEM_SIM_COMMON_H

/** \file
 * What the machine models (Zpu.h, Hopper.h, Ascend.h) and their shared internals (Hazards.h,
 * Numerics.h, Trace.h) have in common: cycles, element types, boxes of elements and the accesses
 * of an op, races, the report of a run, the errors a model throws, and how a params struct is
 * read from a machine description. No model's machine is here.
 */

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace tandem::sim {

using Cycles = int64_t;

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

enum class DType : uint8_t { BF16, F32, I32, U8 };

int bytes_of(DType t);
const char *dtype_name(DType t);

/** bf16 <-> f32, round to nearest even (what Halide does). */
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float f);

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
/** Thrown on a malformed request (box outside a buffer, SRAM over capacity, shape mismatch). */
struct SimError : std::runtime_error {
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
