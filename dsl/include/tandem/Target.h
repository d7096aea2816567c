#ifndef TANDEM_TARGET_H
#define TANDEM_TARGET_H

/** \file
 * Targets are descriptions with parameters. "zpu", "hopper" (the Hopper machine model and CUDA)
 * and "ascend" (the vector path: elementwise and normalisation kernels on the Ascend machine
 * model; the cube path is rejected with a clear error until it exists) are implemented.
 *
 *     Target t = Target::parse("zpu");                 // public defaults (NPU-FACTS.md)
 *     Target t = Target::parse("zpu:dma_channels=4");  // parameters as key=value, comma separated
 *     Target t = Target::parse("hopper:sms=132");
 */

#include "sim/Ascend.h"
#include "sim/Hopper.h"
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
    sim::hopper::HopperParams hopper;
    sim::ascend::AscendParams ascend;

    /** Processing units the tile loop is spread over: ZPU cores, or Hopper SMs (persistent). */
    int units() const { return arch == Arch::Hopper ? hopper.sms : arch == Arch::Ascend ? ascend.cores : zpu.cores; }

    /** The on-chip memory a vector kernel's tiles live in: ZPU RSRAM per core, Hopper shared
     * memory per CTA, Ascend UB per AI core. */
    int64_t vector_memory_bytes() const {
        return arch == Arch::Hopper ? hopper.smem_bytes : arch == Arch::Ascend ? ascend.ub_bytes : zpu.rsram_bytes;
    }

    static Target parse(const std::string &text);
    std::string name() const;
};

} // namespace tandem

#endif
