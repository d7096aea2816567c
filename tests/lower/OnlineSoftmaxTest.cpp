// Stage::online_softmax (tandem/Func.h): the rewrite computes what the textbook softmax-weighted
// sum computes (both realized by Halide on the CPU), and refuses, naming what differs, a
// reduction that is not one.
#include "tandem/Error.h"
#include "tandem/Func.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem {
namespace {

/** out(n, s) = sum_j softmax_j(X(j, s)) v(n, j) as the textbook writes it, over `keys` keys: X
 * the scores x given as an input, -inf past the diagonal where `causal`. `broken` spoils one
 * part of the pattern. */
struct Textbook {
    ImageParam x{Halide::Float(32), 2, "x"}, v{Halide::Float(32), 2, "v"};
    Var n{"n"}, s{"s"}, jj{"jj"};
    RDom j;
    Func row_max{"row_max"}, e{"e"}, row_sum{"row_sum"}, p{"p"}, acc{"acc"}, out{"out"};

    explicit Textbook(int keys, bool causal = false, const std::string &broken = "")
        : j(0, keys, "j") {
        auto X = [&](const Expr &key) {
            return causal ? Halide::select(key <= s, x(key, s), Halide::Float(32).min())
                          : x(key, s);
        };
        row_max(s) = broken == "max_from_zero" ? Expr(0.0f) : Halide::Float(32).min();
        row_max(s) = Halide::max(row_max(s), X(j));
        e(jj, s) = Halide::exp(X(jj) - row_max(s));
        row_sum(s) = 0.0f;
        row_sum(s) += broken == "sum_of_scores" ? X(j) : e(j, s);
        p(jj, s) = e(jj, s) / row_sum(s);
        acc(n, s) = 0.0f;
        acc(n, s) += p(j, s) * v(n, j);
        out(n, s) = acc(n, s);
    }
};

Halide::Buffer<float> realize(Textbook &t, int D, int S, int L) {
    Halide::Buffer<float> x(L, S), v(D, L);
    for (int s = 0; s < S; s++)
        for (int j = 0; j < L; j++)
            x(j, s) = 3 * std::sin(0.7f * j + 1.3f * s);
    for (int j = 0; j < L; j++)
        for (int n = 0; n < D; n++)
            v(n, j) = std::cos(0.3f * n - 1.1f * j);
    t.x.set(x);
    t.v.set(v);
    return t.out.halide().realize({D, S});
}

TEST(OnlineSoftmax, ComputesWhatTheTextbookComputes) {
    for (bool causal : {false, true}) {
        for (int block : {1, 4, 7, 16, 40}) {
            const int D = 5, S = 23, L = 23; // a last block that overlaps the one before
            Textbook plain(L, causal), fused(L, causal);
            OnlineSoftmax fa = fused.acc.update().online_softmax(fused.j.x, block, fused.out);
            // The running max and sum are the same along acc's first Var, n (one per row s).
            EXPECT_EQ(directives_of(fa.state.halide().function()).row_statistics, 1);
            Halide::Buffer<float> want = realize(plain, D, S, L), got = realize(fused, D, S, L);
            for (int s = 0; s < S; s++)
                for (int n = 0; n < D; n++)
                    ASSERT_NEAR(got(n, s), want(n, s), 1e-5)
                        << "block " << block << (causal ? " causal" : "") << " at " << n << ", "
                        << s;
        }
    }
}

/** Expects online_softmax on `t` to throw a tandem::Error holding `fragment`. */
void expect_refusal(Textbook &t, const std::string &fragment) {
    try {
        t.acc.update().online_softmax(t.j.x, 4, t.out);
        FAIL() << "expected an error mentioning '" << fragment << "'";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        // In the user's words: the Func's own name, not Halide's unique one.
        EXPECT_NE(std::string(e.what()).find("Func 'acc', directive online_softmax()"),
                  std::string::npos)
            << e.what();
    }
}

TEST(OnlineSoftmax, RefusesWhatIsNotASoftmax) {
    Textbook from_zero(16, false, "max_from_zero");
    expect_refusal(from_zero, "is not the max of X(j) over the same keys from -inf");
    Textbook wrong_sum(16, false, "sum_of_scores");
    expect_refusal(wrong_sum, "is not the sum of");
    // A matmul whose operands are inputs: no softmax to rewrite.
    ImageParam a(Halide::Float(32), 2, "a"), b(Halide::Float(32), 2, "b");
    Var n("n"), m("m");
    RDom k(0, 8, "k");
    Func acc("acc"), out("out");
    acc(n, m) = 0.0f;
    acc(n, m) += a(k, m) * b(n, k);
    out(n, m) = acc(n, m);
    try {
        acc.update().online_softmax(k.x, 4, out);
        FAIL() << "a plain matmul was rewritten";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("neither factor of the product calls a Func"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
} // namespace tandem
