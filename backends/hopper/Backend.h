#ifndef TANDEM_HOPPER_BACKEND_H
#define TANDEM_HOPPER_BACKEND_H

#include "common/Backend.h"

namespace tandem::hopper_backend {

/** The Hopper target plug-in. */
TargetBackend backend();

} // namespace tandem::hopper_backend

#endif
