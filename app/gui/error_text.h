// What the user reads when the engine or the store fails: the exception's message, with the
// cause put in words (missing or mismatched model, damaged file, disk full, database locked).
#pragma once

#include <QString>

#include <exception>

namespace spanscope::gui {

/// One or two sentences for the user; `what` says what was being done ("Adding a.pdf").
QString describe_error(const QString& what, const std::exception& e);

} // namespace spanscope::gui
