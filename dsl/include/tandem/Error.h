#ifndef TANDEM_ERROR_H
#define TANDEM_ERROR_H

#include <stdexcept>

namespace tandem {

/** A user-facing error: a bad schedule, a bad target, a bad kernel argument. */
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/** A call of a runtime-shape kernel at extents it cannot take (on Hopper: a global stride TMA
 * cannot move), refused before anything runs. */
struct ShapeError : Error {
    using Error::Error;
};

} // namespace tandem

#endif
