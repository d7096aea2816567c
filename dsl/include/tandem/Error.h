#ifndef TANDEM_ERROR_H
#define TANDEM_ERROR_H

#include <stdexcept>
#include <string>

namespace tandem {

/** `message` with the names Halide and Tandem's passes give to Funcs and loops in the user's
 * words: "A_im$5_in_acc$6$0" -> "the staged copy of A for acc", "out$8_stage" -> "the output
 * tile of out", "out$8.s0.x.rebased" -> "out.x", "C$3" -> "C". Every Error passes through it. */
std::string in_user_words(const std::string &message);

/** A user-facing error: a bad schedule, a bad target, a bad kernel argument. Its message is in the
 * user's words (in_user_words) wherever it is raised: compile(), a pass, a model, an emitter. */
struct Error : std::runtime_error {
    explicit Error(const std::string &message) : std::runtime_error(in_user_words(message)) {}
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
