#ifndef TANDEM_FP8_H
#define TANDEM_FP8_H

/** \file
 * FP8 operands. Halide 14 has no 8-bit float type, so a tensor of FP8 values is a uint8 buffer of
 * their bits, and the algorithm says how to read them:
 *
 *     acc(n, m) += tandem::from_e4m3(x(k, m)) * tandem::from_e4m3(w(k, n));
 *
 * from_e4m3 and from_e5m2 are the formats of the OCP 8-bit floating point specification (v1.0)
 * as CUDA's __nv_fp8_e4m3 and __nv_fp8_e5m2 hold them: e4m3 with bias 7, no infinities and NaN
 * at S.1111.111 (largest 448), e5m2 with bias 15 and IEEE infinities and NaNs (largest 57344);
 * both with subnormals. The value is exact in f32. On the CPU (Halide's reference) the decode is
 * a lookup in a table of 256 floats; tile_mma() recognizes a product of decoded staged tiles as
 * an FP8 matmul (hopper's wgmma .e4m3 / .e5m2), and the staged tiles hold the bits as they are.
 */

#include "Halide.h"

#include <string>

namespace tandem {

/** The f32 value of e4m3 bits (any integer Expr; its low 8 bits are read). */
Halide::Expr from_e4m3(const Halide::Expr &bits);
/** The f32 value of e5m2 bits. */
Halide::Expr from_e5m2(const Halide::Expr &bits);

/** A type as messages and listings name it: Halide's name, or e4m3 / e5m2. */
std::string element_type_name(const Halide::Type &t);

namespace fp8 {

/** The types Tandem's IR gives a staged tile of FP8 bits once tile_mma() reads it as FP8 (no
 * Halide code is made for them): e4m3 as an 8-bit float, e5m2 (the wider exponent, as bf16 beside
 * f16) as an 8-bit bfloat. */
Halide::Type e4m3();
Halide::Type e5m2();
bool is_fp8(const Halide::Type &t);
/** The format of a decode table's name (the buffer from_e4m3 / from_e5m2 read), or an undefined
 * Type (bits 0) when `buffer` is none of them. */
Halide::Type format_of_table(const std::string &buffer);
/** "e4m3" or "e5m2". */
const char *name(const Halide::Type &t);
/** The type a buffer of `t` has outside Tandem's IR (the user's, Halide's, a library call's):
 * uint8 for FP8, else `t`. */
Halide::Type storage(const Halide::Type &t);

} // namespace fp8
} // namespace tandem

#endif
