// A target registered by a program of its own (ZpuMini.cpp, nothing else edited) runs through
// the same tools as the built-in ones: Target::parse, `run` (checked against Halide's reference),
// `emit` (its pass list, its Stmt, its code), the fuzzer, and the generator main
// (generator_main_on_fourth_target in tests/CMakeLists.txt).
#include "Cli.h"
#include "Fuzz.h"
#include "tandem/Target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace tandem;

namespace {

/** Runs the command line on `args`; its exit status and what it printed. */
std::pair<int, std::string> cli(std::vector<std::string> args) {
    args.insert(args.begin(), "tandem");
    std::vector<char *> argv;
    for (std::string &a : args)
        argv.push_back(a.data());
    testing::internal::CaptureStdout();
    const int status = apps::cli_main(int(argv.size()), argv.data());
    return {status, testing::internal::GetCapturedStdout()};
}

} // namespace

TEST(FourthTarget, IsKnownByNameWithItsOwnMachine) {
    const std::vector<std::string> names = Target::names();
    EXPECT_NE(std::find(names.begin(), names.end(), "zpu_mini"), names.end());
    const Target t = Target::parse("zpu_mini");
    EXPECT_EQ(t.name(), "zpu_mini");
    EXPECT_EQ(t.units(), 4);
    EXPECT_EQ(Target::parse("zpu_mini:cores=2").units(), 2);
    EXPECT_THROW(Target::parse("zpu_maxi"), Error);
}

TEST(FourthTarget, RunsGemmCorrectly) {
    auto [status, out] =
        cli({"run", "gemm", "--target", "zpu_mini", "--param", "M=100", "--param", "N=70",
             "--param", "K=96", "--param", "TM=32", "--param", "TN=32", "--param", "TK=32"});
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("gemm on zpu_mini"), std::string::npos) << out;
    EXPECT_NE(out.find("correct: yes"), std::string::npos) << out;
    EXPECT_NE(out.find("races 0, deadlock no"), std::string::npos) << out;
}

TEST(FourthTarget, EmitsItsPassesStmtAndCode) {
    auto [status, passes] = cli({"emit", "--what", "passes", "--target", "zpu_mini"});
    EXPECT_EQ(status, 0);
    EXPECT_NE(passes.find("map_to_cores\nrecognize_tile_copies"), std::string::npos) << passes;
    EXPECT_NE(passes.find("sync_engines"), std::string::npos) << passes;
    auto [stmt_status, stmt] = cli({"emit", "gemm", "--target", "zpu_mini", "--param", "M=64",
                                    "--param", "N=64", "--param", "K=64", "--what", "stmt"});
    EXPECT_EQ(stmt_status, 0);
    EXPECT_NE(stmt.find("for zpu_mini"), std::string::npos) << stmt;
    auto [code_status, code] = cli({"emit", "gemm", "--target", "zpu_mini", "--param", "M=64",
                                    "--param", "N=64", "--param", "K=64", "--what", "code"});
    EXPECT_EQ(code_status, 0);
    EXPECT_NE(code.find("gemm"), std::string::npos) << code;
}

TEST(FourthTarget, FuzzesWithoutFailures) {
    apps::FuzzOptions o;
    o.seed = 7;
    o.runs = 8;
    o.jobs = 1;
    o.target = "zpu_mini";
    int64_t seen = 0;
    const apps::FuzzSummary summary = apps::fuzz(o, [&](const apps::FuzzResult &) { seen++; });
    EXPECT_EQ(summary.runs, 8);
    EXPECT_EQ(seen, 8);
    EXPECT_EQ(summary.failures, 0) << summary.json(o.seed);
    ASSERT_EQ(summary.by_target.size(), 1u);
    EXPECT_EQ(summary.by_target.begin()->first, "zpu_mini");
}
