#ifndef TANDEM_ERROR_H
#define TANDEM_ERROR_H

#include <stdexcept>

namespace tandem {

/** A user-facing error: a bad schedule, a bad target, a bad kernel argument. */
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

} // namespace tandem

#endif
