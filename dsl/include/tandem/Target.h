#ifndef TANDEM_TARGET_H
#define TANDEM_TARGET_H

/** \file
 * Targets are machine descriptions (Machine.h: machines/<target>.json, every parameter with its
 * unit and public source). "zpu", "hopper" (the Hopper machine model and CUDA) and "ascend" are
 * implemented.
 *
 *     Target t = Target::parse("zpu");                   // the built-in description
 *     Target t = Target::parse("zpu:dma_channels=4");    // parameters as key=value, comma
 * separated Target t = Target::parse("hopper:sms=132,file=h200.json");  // a file of overrides
 */

#include "tandem/Error.h"
#include "tandem/Machine.h"

#include <functional>
#include <string>

namespace tandem {

struct Target {
    enum class Arch { ZPU, Hopper, Ascend };
    Arch arch = Arch::ZPU;
    MachineDescription machine = MachineDescription::builtin("zpu");

    /** Processing units the tile loop is spread over: ZPU cores, Hopper SMs, Ascend AI cores. */
    int units() const;
    /** The units a kernel without a tile MMA runs on: Ascend's vector cores (AIV); units()
     * where the machine has no separate vector cores. */
    int vector_units() const;

    /** The on-chip memory a vector kernel's tiles live in: ZPU RSRAM per core, Hopper shared
     * memory per CTA, Ascend UB per AI core. */
    int64_t vector_memory_bytes() const;

    /** The description's parameters by name, for the machine models' params (sim::*::from). */
    std::function<double(const std::string &)> lookup() const;

    static Target parse(const std::string &text);
    std::string name() const;
};

} // namespace tandem

#endif
