#ifndef TANDEM_TARGET_H
#define TANDEM_TARGET_H

/** \file
 * A target is a name and its machine description (Machine.h: machines/<target>.json, every
 * parameter with its unit and public source). "zpu", "hopper" (the Hopper machine model and CUDA)
 * and "ascend" are built in; a program may register more (dsl/lower/Targets.h). Code that
 * chooses by target asks its name or, better, what it can do; there is no closed list.
 *
 *     Target t = Target::parse("zpu");                   // the built-in description
 *     Target t = Target::parse("zpu:dma_channels=4");    // parameters as key=value, comma
 * separated Target t = Target::parse("hopper:sms=132,file=h200.json");  // a file of overrides
 */

#include "tandem/Error.h"
#include "tandem/Machine.h"

#include <functional>
#include <string>
#include <vector>

namespace tandem {

struct Target {
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

    /** "name" or "name:key=value,...,file=overrides.json"; Error for an unknown name. */
    static Target parse(const std::string &text);
    /** Whether the target takes `directive` as written in a schedule ("cluster", "cooperative"),
     * or runtime shapes ("runtime_shapes"); Error for any other name (every target takes the
     * rest). */
    bool takes(const std::string &directive) const;
    /** The registered targets' names, the built-in ones first. */
    static std::vector<std::string> names();
    const std::string &name() const { return machine.target(); }
};

} // namespace tandem

#endif
