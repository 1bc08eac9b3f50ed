// The GoogleTest check that a zoom parameter file is refused with a message naming what is
// wrong (issue 8: test_router_params.cpp, test_trained_router.cpp).
#pragma once

#include "engine/sekv/router_params.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spanscope::test {

/// Expects f() to throw RouterParamsError whose message contains every needle.
template <class F> void expect_router_params_refused(F f, const std::vector<std::string>& needles) {
    try {
        f();
        ADD_FAILURE() << "not refused (expected: " << needles.front() << ")";
    } catch (const RouterParamsError& e) {
        const std::string msg = e.what();
        for (const auto& n : needles)
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    }
}

} // namespace spanscope::test
