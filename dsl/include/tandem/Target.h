#ifndef TANDEM_TARGET_H
#define TANDEM_TARGET_H

/** \file
 * Targets are descriptions with parameters. "zpu" is implemented; "hopper" and "ascend" are named
 * and rejected with a clear error until their backends exist.
 *
 *     Target t = Target::parse("zpu");                 // public defaults (NPU-FACTS.md)
 *     Target t = Target::parse("zpu:dma_channels=4");  // parameters as key=value, comma separated
 */

#include "sim/Zpu.h"

#include <stdexcept>
#include <string>

namespace tandem {

/** A user-facing error: a bad schedule, a bad target, a bad kernel argument. */
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Target {
    enum class Arch { ZPU, Hopper, Ascend };
    Arch arch = Arch::ZPU;
    sim::ZpuParams zpu;

    static Target parse(const std::string &text);
    std::string name() const;
};

} // namespace tandem

#endif
