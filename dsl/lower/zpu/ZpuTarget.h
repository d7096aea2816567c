#ifndef TANDEM_LOWER_ZPU_TARGET_H
#define TANDEM_LOWER_ZPU_TARGET_H

/** \file
 * The ZPU's lowering (Targets.h): one control stream per core, a DMA engine, an asynchronous
 * tensor core and vector core. The software pipeline issues copies ahead of their use; EngineSync
 * keeps the tensor and vector cores apart.
 */

#include "lower/Targets.h"

namespace tandem::lower {

TargetLowering zpu_target();

} // namespace tandem::lower

#endif
