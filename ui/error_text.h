// What the user reads when the engine or the store fails: the exception's message (the engine
// and the store word theirs for users), with what it means added where the type says more than
// the message (disk full, database locked, a file that is no document, context overflow).
#pragma once

#include <QString>

#include <exception>

namespace spanscope::gui {

/// One or two sentences for the user; `what` says what was being done ("Adding a.pdf").
QString describe_error(const QString& what, const std::exception& e);

} // namespace spanscope::gui
