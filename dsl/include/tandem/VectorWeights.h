#ifndef TANDEM_VECTOR_WEIGHTS_H
#define TANDEM_VECTOR_WEIGHTS_H

/** \file
 * What a target's vector unit spends per element, in the units of its vector throughput, from
 * its machine description: one source for the compiler (VectorOps charges each vector op with it)
 * and the tools (a workload's vector work on the roofline, apps/Workload.cpp).
 *
 * Keys (each optional): vector_arith (add, sub, mul, min, max, compare, select, cast; default 1),
 * vector_transcendental (exp, log, tanh; default 1), vector_div_sqrt (float division and square
 * root; default vector_arith), vector_first_load / vector_load / vector_store (the ZPU's public
 * cost model charges the first load of an op, each further load and each store per element;
 * default 0), vector_constant (each distinct constant once per op; default 0), and
 * vector_arith_by_bytes (Ascend: an operation costs its weight times the width in bytes of the
 * elements it works on, a 256-byte repeat holding 64 f32 lanes).
 */

#include "tandem/Target.h"

#include "Halide.h"

#include <string>

namespace tandem {

struct VectorWeights {
    double first_load = 0, load = 0, store = 0, arith = 1, transcendental = 1, constant = 0,
           by_bytes = 0;
    double div_sqrt = -1; // division and square root; the arithmetic weight unless given

    explicit VectorWeights(const Target &t) {
        auto get = [&](const char *key, double *v) {
            if (t.machine.params().count(key))
                *v = t.machine.number(key);
        };
        get("vector_first_load", &first_load);
        get("vector_load", &load);
        get("vector_store", &store);
        get("vector_arith", &arith);
        get("vector_transcendental", &transcendental);
        get("vector_constant", &constant);
        get("vector_arith_by_bytes", &by_bytes);
        get("vector_div_sqrt", &div_sqrt);
        if (div_sqrt < 0)
            div_sqrt = arith;
    }
    /** Halide's calls the weights class as transcendental (exp, log, tanh) and as a division or
     * square root. */
    static bool transcendental_call(const std::string &name) {
        return name == "exp_f32" || name == "log_f32" || name == "tanh_f32";
    }
    static bool div_sqrt_call(const std::string &name) { return name == "sqrt_f32"; }
    /** An operation of `weight` on elements of type t. */
    double of(double weight, const Halide::Type &t) const {
        return weight * (by_bytes != 0 ? t.bytes() : 1);
    }
};

} // namespace tandem

#endif
