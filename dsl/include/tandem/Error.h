#ifndef TANDEM_ERROR_H
#define TANDEM_ERROR_H

#include <stdexcept>
#include <string>

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

/** `message` with the names Halide and Tandem's passes give to Funcs and loops in the user's
 * words: "A_im$5_in_acc$6$0" -> "the staged copy of A for acc", "out$8_stage" -> "the output
 * tile of out", "out$8.s0.x.rebased" -> "out.x", "C$3" -> "C". Every user error of compile()
 * passes through it. */
std::string in_user_words(const std::string &message);

} // namespace tandem

#endif
