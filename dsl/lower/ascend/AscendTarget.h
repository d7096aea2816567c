#ifndef TANDEM_LOWER_ASCEND_TARGET_H
#define TANDEM_LOWER_ASCEND_TARGET_H

/** \file
 * Ascend's lowering (Targets.h): AI cores whose pipes (MTE2, MTE1, M, FIX, V, MTE3) overlap by
 * themselves, joined by SetFlag / WaitFlag; a matmul with an epilogue becomes a mix kernel (cube
 * and vector cores meeting in GM workspaces); vector ops become AscendC instructions.
 */

#include "lower/Targets.h"

namespace tandem::lower {

TargetLowering ascend_target();

} // namespace tandem::lower

#endif
