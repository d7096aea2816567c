#ifndef TANDEM_ZPU_BACKEND_H
#define TANDEM_ZPU_BACKEND_H

#include "common/Backend.h"

namespace tandem::zpu_backend {

/** The ZPU target plug-in. */
TargetBackend backend();

} // namespace tandem::zpu_backend

#endif
