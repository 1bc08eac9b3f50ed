// Cancellation of long engine work: a flag set by another thread (a Stop button, Ctrl-C) and
// checked at points where stopping leaves no half-written state behind the caller's back.
#pragma once

#include <stdexcept>

namespace spanscope {

/// Thrown when a cancellation flag was seen.
class Cancelled : public std::runtime_error {
public:
    Cancelled() : std::runtime_error("cancelled") {}
};

} // namespace spanscope
