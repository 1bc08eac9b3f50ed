// The GoogleTest check that a zoom parameter file is refused with a message naming what is
// wrong (issue 8: test_zoom_params.cpp, test_trained_router.cpp).
#pragma once

#include "engine/sekv/zoom_params.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spanscope::test {

/// Expects f() to throw ZoomParamsError whose message contains every needle.
template <class F> void expect_zoom_params_refused(F f, const std::vector<std::string>& needles) {
    try {
        f();
        ADD_FAILURE() << "not refused (expected: " << needles.front() << ")";
    } catch (const ZoomParamsError& e) {
        const std::string msg = e.what();
        for (const auto& n : needles)
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    }
}

} // namespace spanscope::test
