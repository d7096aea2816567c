#include "tandem/Fp8.h"
#include "tandem/params/Params.h" // fp8_value

#include <sstream>

namespace tandem {

namespace fp8 {

Halide::Type e4m3() {
    return Halide::Type(halide_type_float, 8, 1);
}
Halide::Type e5m2() {
    return Halide::Type(halide_type_bfloat, 8, 1);
}

bool is_fp8(const Halide::Type &t) {
    return t == e4m3() || t == e5m2();
}

const char *name(const Halide::Type &t) {
    return t == e4m3() ? "e4m3" : "e5m2";
}

Halide::Type storage(const Halide::Type &t) {
    return is_fp8(t) ? Halide::UInt(8) : t;
}

} // namespace fp8

namespace {

const char *const kE4m3Table = "tandem_fp8_e4m3";
const char *const kE5m2Table = "tandem_fp8_e5m2";

Halide::Buffer<float> table(const Halide::Type &t) {
    Halide::Buffer<float> values(256, t == fp8::e4m3() ? kE4m3Table : kE5m2Table);
    for (int i = 0; i < 256; i++)
        values(i) = sim::fp8_value(uint8_t(i), t == fp8::e4m3());
    return values;
}

Halide::Expr decoded(const Halide::Expr &bits, const Halide::Type &t) {
    // One table per format for the process: Halide names a pipeline's buffers by the Buffer.
    static const Halide::Buffer<float> e4m3_values = table(fp8::e4m3());
    static const Halide::Buffer<float> e5m2_values = table(fp8::e5m2());
    const Halide::Buffer<float> &values = t == fp8::e4m3() ? e4m3_values : e5m2_values;
    const Halide::Expr index = bits.type() == Halide::UInt(8)
                                   ? Halide::cast<int32_t>(bits)
                                   : Halide::cast<int32_t>(Halide::cast<uint8_t>(bits));
    return values(index);
}

} // namespace

Halide::Type fp8::format_of_table(const std::string &buffer) {
    if (buffer == kE4m3Table)
        return e4m3();
    if (buffer == kE5m2Table)
        return e5m2();
    return Halide::Type();
}

std::string element_type_name(const Halide::Type &t) {
    if (fp8::is_fp8(t))
        return fp8::name(t);
    std::ostringstream os;
    os << t;
    return os.str();
}

Halide::Expr from_e4m3(const Halide::Expr &bits) {
    return decoded(bits, fp8::e4m3());
}
Halide::Expr from_e5m2(const Halide::Expr &bits) {
    return decoded(bits, fp8::e5m2());
}

} // namespace tandem
