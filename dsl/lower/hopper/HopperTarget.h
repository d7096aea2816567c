#ifndef TANDEM_LOWER_HOPPER_TARGET_H
#define TANDEM_LOWER_HOPPER_TARGET_H

/** \file
 * Hopper's lowering (Targets.h): a CTA per tile or a persistent grid, TMA copies signalling
 * mbarriers, warp-specialised producer and consumer warpgroups, wgmma kept in flight, clusters
 * sharing operands by TMA multicast.
 */

#include "lower/Targets.h"

namespace tandem::lower {

TargetLowering hopper_target();

} // namespace tandem::lower

#endif
