#ifndef TANDEM_ERROR_H
#define TANDEM_ERROR_H

#include <stdexcept>

namespace tandem {

/** A user-facing error: a bad schedule, a bad target, a bad kernel argument. */
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/** A call of a runtime-shape kernel at extents it cannot take, refused before anything runs:
 * `target_limit`, extents the hardware cannot take (on Hopper: a global stride TMA cannot move);
 * otherwise buffers that disagree with what the algorithm reads. */
struct ShapeError : Error {
    ShapeError(const std::string &message, bool target_limit)
        : Error(message), target_limit(target_limit) {}
    bool target_limit;
};

} // namespace tandem

#endif
