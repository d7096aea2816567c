// The Generator API from a user's side: a generator written outside the apps (ScaleAdd.cpp), its
// parameters set from text, built and compiled for every target, run on the target's machine model
// and checked against a plain C++ loop; and the errors a user gets for a bad parameter or output.
#include "tandem/Generator.h"
#include "Run.h"
#include "common/Backend.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tandem;

namespace {

TEST(Generator, ListsItsParametersWithDefaultsRangesAndChoices) {
    std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create("scale_add");
    EXPECT_EQ(g->name(), "scale_add");
    std::vector<GeneratorParamInfo> params = g->params();
    ASSERT_EQ(params.size(), 7u);
    EXPECT_EQ(params[0].name, "W");
    EXPECT_EQ(params[0].kind, "int");
    EXPECT_EQ(params[0].default_value, "300");
    EXPECT_EQ(*params[0].max, 65536);
    EXPECT_EQ(params[4].kind, "float");
    EXPECT_EQ(params[5].choices, (std::vector<std::string>{"double_buffered", "sync"}));
    // What the autotuner tries: TX's listed values, all of pipelining's choices, nothing of W.
    EXPECT_EQ(params[2].tunable, (std::vector<std::string>{"16", "32", "64", "128"}));
    EXPECT_EQ(params[5].tunable, params[5].choices);
    EXPECT_TRUE(params[0].tunable.empty());
    g->set_param("W", "17");
    EXPECT_EQ(g->params()[0].value, "17");
    EXPECT_EQ(g->params()[0].default_value, "300");
}

TEST(Generator, BadParametersAreErrorsNamingTheGeneratorAndTheParameter) {
    std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create("scale_add");
    auto message = [&](const std::string &name, const std::string &value) {
        try {
            g->set_param(name, value);
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message("W", "0").find("generator scale_add: parameter W: 0 is outside [1, 65536]"),
              std::string::npos);
    EXPECT_NE(message("W", "12x").find("'12x' is not a number"), std::string::npos);
    EXPECT_NE(message("TX", "2.5").find("not an integer"), std::string::npos);
    EXPECT_NE(message("pipelining", "triple").find("'triple' is not one of double_buffered, sync"),
              std::string::npos);
    EXPECT_NE(message("depth", "3")
                  .find("has no parameter 'depth' (known: W, H, TX, TY, scale, pipelining, "
                        "runtime_shapes)"),
              std::string::npos);
    EXPECT_THROW(GeneratorRegistry::create("no_such_generator"), Error);
}

/** Runs the generator's kernel on the target's model with random inputs; max |got - want|. */
double max_error(const std::string &target_text, const std::map<std::string, std::string> &params) {
    std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create("scale_add");
    for (const auto &[k, v] : params)
        g->set_param(k, v);
    Target target = Target::parse(target_text);
    Kernel kernel = g->compile(target);
    std::unique_ptr<Model> model = backend_of(target).model(target, true, false);
    std::map<std::string, int> ids = apps::add_arguments(
        kernel, apps::static_extents(kernel),
        [&](const std::string &n, sim::DType t, int64_t e) { return model->add_global(n, t, e); },
        [&](int id) { return model->data(id); }, true, 7);
    model->execute(kernel, ids, {});
    sim::Report report = model->finish();
    EXPECT_EQ(report.race_count, 0) << (report.races.empty() ? "" : report.races[0].str());
    EXPECT_FALSE(report.deadlock) << report.deadlock_message;
    const auto *a = static_cast<const float *>(model->data(ids.at(kernel.args[0].name)));
    const auto *b = static_cast<const float *>(model->data(ids.at(kernel.args[1].name)));
    const auto *out = static_cast<const float *>(model->data(ids.at(kernel.args[2].name)));
    const int W = std::stoi(params.count("W") ? params.at("W") : "300");
    const int H = std::stoi(params.count("H") ? params.at("H") : "70");
    const float scale = float(std::stod(params.count("scale") ? params.at("scale") : "2"));
    double worst = 0;
    for (int i = 0; i < W * H; i++) {
        double want = double(a[i]) * scale + double(b[i]);
        worst = std::isfinite(out[i]) ? std::max(worst, std::fabs(out[i] - want)) : INFINITY;
    }
    return worst;
}

TEST(Generator, RunsOnEveryTargetAndMatchesAPlainLoop) {
    for (const char *target : {"zpu", "ascend", "hopper"}) {
        for (const char *pipelining : {"double_buffered", "sync"}) {
            EXPECT_LE(max_error(target, {{"pipelining", pipelining}, {"scale", "-1.5"}}), 1e-6)
                << target << " " << pipelining;
        }
        EXPECT_LE(max_error(target, {{"W", "1"}, {"H", "13"}, {"TX", "7"}}), 1e-6) << target;
    }
}

class WrongOutput : public Generator<WrongOutput> {
public:
    Input<Buffer<float, 1>> a{"a"};
    Output<Buffer<bfloat16_t, 1>> out{"out"};
    Var x{"x"};
    void generate() override { out(x) = a(x) * 2.0f; } // f32, declared bf16
};
TANDEM_REGISTER_GENERATOR(WrongOutput, wrong_output)

TEST(Generator, AnOutputOfTheWrongTypeIsAnError) {
    std::unique_ptr<GeneratorBase> g = GeneratorRegistry::create("wrong_output");
    try {
        g->build(Target::parse("zpu"));
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(
                      "the output out is declared Buffer<bfloat16, 1> but generate() defines "
                      "it as float32 over 1 dimensions"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(g->build(Target::parse("zpu")), Error); // once per instance
}

/** A tunable value the parameter would refuse. */
class BadTunable : public Generator<BadTunable> {
public:
    GeneratorParam<int> T{"T", 8, 1, 64, Tunable<int>{8, 128}};
    Input<Buffer<float, 1>> a{"a"};
    Output<Buffer<float, 1>> out{"out"};
    void generate() override { out(x) = a(x); }
    Var x{"x"};
};
TANDEM_REGISTER_GENERATOR(BadTunable, bad_tunable)

TEST(Generator, ATunableValueOutOfRangeIsAnError) {
    try {
        GeneratorRegistry::create("bad_tunable");
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(
                      "parameter T: tunable value 128: parameter T: 128 is outside [1, 64]"),
                  std::string::npos)
            << e.what();
    }
}

TEST(Generator, MembersOutsideAGeneratorAreAnError) {
    EXPECT_THROW(GeneratorParam<int>("loose", 1), Error);
}

} // namespace
