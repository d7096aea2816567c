// Generated libraries called the way a Halide user calls one: the scale_add generator built at
// build time for the zpu and for ascend (add_tandem_library), linked as static libraries, called
// with Halide::Runtime::Buffer. A bad buffer returns Halide's error code and writes nothing. One
// zpu library is built with the best record of a tuning run made at build time (TUNING_DB).
#include "scale_add_any.h"
#include "scale_add_any_ascend.h"
#include "scale_add_ascend.h"
#include "scale_add_tuned.h"
#include "scale_add_zpu.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <HalideBuffer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace {

std::string last_error;
void remember(const char *message) {
    last_error = message;
}

/** One target's library of the same generator. */
struct Library {
    const char *target;
    int (*call)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
    uint64_t (*last_cycles)(void);
    void (*set_error_handler)(void (*)(const char *));
};
std::ostream &operator<<(std::ostream &os, const Library &l) {
    return os << l.target;
}

class Libraries : public ::testing::TestWithParam<Library> {};

TEST_P(Libraries, MatchLoopAndCountCycles) {
    const Library &lib = GetParam();
    Halide::Runtime::Buffer<float> a(33, 5), b(33, 5), out(33, 5);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 33; x++)
            a(x, y) = float(x) - 0.5f * float(y), b(x, y) = float(x * y % 7);
    ASSERT_EQ(lib.call(a, b, out), 0);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 33; x++)
            ASSERT_EQ(out(x, y), a(x, y) * 2.0f + b(x, y)) << x << "," << y;
    EXPECT_GT(lib.last_cycles(), 0u);
}

TEST_P(Libraries, RejectBadBuffersWithoutWriting) {
    const Library &lib = GetParam();
    lib.set_error_handler(remember);
    Halide::Runtime::Buffer<float> a(33, 5), b(33, 5), out(33, 5), wide(34, 5);
    Halide::Runtime::Buffer<int32_t> ints(33, 5);
    a.fill(1.0f);
    b.fill(1.0f);
    out.fill(-7.0f);
    EXPECT_EQ(lib.call(a, wide, out), halide_error_code_access_out_of_bounds);
    EXPECT_EQ(lib.call(a, ints, out), halide_error_code_bad_type);
    EXPECT_EQ(lib.call(a, b, nullptr), halide_error_code_buffer_argument_is_null);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 33; x++)
            ASSERT_EQ(out(x, y), -7.0f); // untouched
    lib.set_error_handler(nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    ZpuAndAscend, Libraries,
    ::testing::Values(Library{"zpu", scale_add_zpu, scale_add_zpu_last_cycles,
                              scale_add_zpu_set_error_handler},
                      Library{"ascend", scale_add_ascend, scale_add_ascend_last_cycles,
                              scale_add_ascend_set_error_handler},
                      Library{"zpu_tuned", scale_add_tuned, scale_add_tuned_last_cycles,
                              scale_add_tuned_set_error_handler}),
    [](const ::testing::TestParamInfo<Library> &info) { return std::string(info.param.target); });

TEST(Library, ArgvAndMetadataAsHalideWritesThem) {
    Halide::Runtime::Buffer<float> a(33, 5), b(33, 5), out(33, 5);
    a.fill(2.0f);
    b.fill(1.0f);
    void *args[] = {a.raw_buffer(), b.raw_buffer(), out.raw_buffer()};
    ASSERT_EQ(scale_add_zpu_argv(args), 0);
    EXPECT_EQ(out(32, 4), 5.0f);
    const halide_filter_metadata_t *m = scale_add_zpu_metadata();
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->version, 1); // halide_filter_metadata_t::VERSION
    EXPECT_STREQ(m->name, "scale_add_zpu");
    EXPECT_STREQ(m->target, "zpu");
    ASSERT_EQ(m->num_arguments, 3);
    EXPECT_STREQ(m->arguments[0].name, "a");
    EXPECT_EQ(m->arguments[0].kind, halide_argument_kind_input_buffer);
    EXPECT_STREQ(m->arguments[2].name, "out");
    EXPECT_EQ(m->arguments[2].kind, halide_argument_kind_output_buffer);
    EXPECT_EQ(m->arguments[2].dimensions, 2);
    EXPECT_TRUE(m->arguments[2].type == halide_type_of<float>());
    EXPECT_EQ(*m->arguments[2].buffer_estimates[1], 33); // dim 0: min 0, extent 33
    EXPECT_EQ(*m->arguments[2].buffer_estimates[3], 5);
}

TEST(Library, ABadBufferIsAnErrorCodeAndWritesNothing) {
    scale_add_zpu_set_error_handler(remember);
    Halide::Runtime::Buffer<float> a(33, 5), b(33, 5), out(33, 5), wide(34, 5), flat(165);
    Halide::Runtime::Buffer<int32_t> ints(33, 5);
    a.fill(1.0f);
    b.fill(1.0f);
    out.fill(-7.0f);
    EXPECT_EQ(scale_add_zpu(a, wide, out), halide_error_code_access_out_of_bounds);
    EXPECT_NE(last_error.find("buffer b dimension 0 is [0, +34), the kernel takes [0, +33)"),
              std::string::npos)
        << last_error;
    EXPECT_EQ(scale_add_zpu(a, b, flat), halide_error_code_bad_dimensions);
    EXPECT_EQ(scale_add_zpu(a, ints, out), halide_error_code_bad_type);
    EXPECT_EQ(scale_add_zpu(nullptr, b, out), halide_error_code_buffer_argument_is_null);
    Halide::Runtime::Buffer<float> transposed =
        Halide::Runtime::Buffer<float>(5, 33).transposed(0, 1);
    EXPECT_EQ(scale_add_zpu(a, b, transposed), halide_error_code_constraint_violated);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 33; x++)
            ASSERT_EQ(out(x, y), -7.0f); // untouched
    scale_add_zpu_set_error_handler(nullptr);
}

/** A library compiled with runtime shapes takes any extents (1, primes, several tiles, taller than
 * wide), and still refuses what it cannot take without writing: the zpu's and the AscendC one
 * (its extents in the launch's tiling data). */
class RuntimeShapeLibraries : public ::testing::TestWithParam<Library> {};

TEST_P(RuntimeShapeLibraries, TakeAnyExtents) {
    const Library &lib = GetParam();
    for (auto [w, h] : {std::pair{1, 1}, {33, 5}, {100, 7}, {17, 40}, {16, 1}, {1, 9}}) {
        Halide::Runtime::Buffer<float> a(w, h), b(w, h), out(w, h);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                a(x, y) = float(x) - 0.5f * float(y), b(x, y) = float(x * y % 7);
        ASSERT_EQ(lib.call(a, b, out), 0) << w << " x " << h;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                ASSERT_EQ(out(x, y), a(x, y) * 2.0f + b(x, y))
                    << w << " x " << h << ": " << x << "," << y;
    }
    // An input wider than the output is read as Halide reads it (its own row stride).
    Halide::Runtime::Buffer<float> wide(40, 5), b(33, 5), out(33, 5);
    wide.fill(1.0f);
    b.fill(0.5f);
    ASSERT_EQ(lib.call(wide, b, out), 0);
    EXPECT_EQ(out(32, 4), 2.5f);
    // Too small an input (the region the algorithm reads: RequiredRegions.h), an empty one, a
    // non-dense one: error codes, the output untouched.
    lib.set_error_handler(remember);
    Halide::Runtime::Buffer<float> short_a(33, 4), empty(33, 0);
    out.fill(-7.0f);
    EXPECT_EQ(lib.call(short_a, b, out), halide_error_code_constraint_violated);
    EXPECT_NE(last_error.find(
                  "a dimension 1 is read at [0, (out.extent.1 + -1)]; its extent must be at least "
                  "out.extent.1 (here a.extent.1 = 4, out.extent.1 = 5)"),
              std::string::npos)
        << last_error;
    EXPECT_NE(lib.call(empty, b, out), 0);
    Halide::Runtime::Buffer<float> transposed =
        Halide::Runtime::Buffer<float>(5, 33).transposed(0, 1);
    EXPECT_EQ(lib.call(b, b, transposed), halide_error_code_constraint_violated);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 33; x++)
            ASSERT_EQ(out(x, y), -7.0f);
    lib.set_error_handler(nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    ZpuAndAscend, RuntimeShapeLibraries,
    ::testing::Values(Library{"zpu", scale_add_any, scale_add_any_last_cycles,
                              scale_add_any_set_error_handler},
                      Library{"ascend", scale_add_any_ascend, scale_add_any_ascend_last_cycles,
                              scale_add_any_ascend_set_error_handler}),
    [](const ::testing::TestParamInfo<Library> &info) { return std::string(info.param.target); });

/** The tuned library runs the best recorded candidate: its cycles on the model are the record's. */
TEST(Library, TheTunedLibraryIsTheBestRecord) {
    SQLite::Database db(TANDEM_TUNING_DB, SQLite::OPEN_READONLY);
    SQLite::Statement best(db, "SELECT min(cycles), count(*) FROM record WHERE status = 'ok'");
    ASSERT_TRUE(best.executeStep());
    ASSERT_GE(best.getColumn(1).getInt(), 2) << "the build-time tuning recorded too little";
    Halide::Runtime::Buffer<float> a(33, 5), b(33, 5), out(33, 5);
    a.fill(1.0f);
    b.fill(2.0f);
    ASSERT_EQ(scale_add_tuned(a, b, out), 0);
    EXPECT_EQ(double(scale_add_tuned_last_cycles()), best.getColumn(0).getDouble());
}

} // namespace
