#include "tandem/Error.h"

#include <regex>

namespace tandem {

std::string in_user_words(const std::string &message) {
    // Most specific first: the names Halide and Tandem's passes give the Funcs they make.
    static const std::vector<std::pair<std::regex, std::string>> rules = {
        // An accumulator's copy an Ascend mix kernel hands to the vector cores: acc$8.ub.
        {std::regex(R"(([A-Za-z_][A-Za-z0-9_$]*?)\.ub\b)"), "the vector cores' copy of $1"},
        // A copy made by Func::staged(A, F) or A.in(F): A_im$5_in_F$6$0.
        {std::regex(R"(([A-Za-z_][A-Za-z0-9_]*?)_im\$\d+_in_([A-Za-z_][A-Za-z0-9_]*?)(\$\d+)+)"),
         "the staged copy of $1 for $2"},
        // Func::staged(A): A_im$5_global_wrapper$0.
        {std::regex(R"(([A-Za-z_][A-Za-z0-9_]*?)_im\$\d+_global_wrapper(\$\d+)*)"),
         "the staged copy of $1"},
        // The on-chip tile an async_copy() output is computed in before its store: F$25_stage.
        {std::regex(R"(([A-Za-z_][A-Za-z0-9_]*?)(\$\d+)+_stage\b)"), "the output tile of $1"},
        // A loop: F$25.s0.x (.rebased, .l0 ...).
        {std::regex(
             R"(([A-Za-z_][A-Za-z0-9_]*?)(\$\d+)*\.s\d+\.([A-Za-z_][A-Za-z0-9_$]*?)(\$\d+)*(\.[A-Za-z0-9_.]+)?\b)"),
         "$1.$3"},
        // An input's Func: A_im$5.
        {std::regex(R"(([A-Za-z_][A-Za-z0-9_]*?)_im(\$\d+)+)"), "$1"},
        // Any other unique name: F$25 -> F.
        {std::regex(R"(([A-Za-z_][A-Za-z0-9_]*?)(\$\d+)+)"), "$1"},
    };
    std::string out = message;
    for (const auto &[pattern, words] : rules)
        out = std::regex_replace(out, pattern, words);
    return out;
}

} // namespace tandem
