// A chat as Markdown, for "Export chat" and "Copy chat".
#pragma once

#include "ui/gui_types.h"

#include <QList>
#include <QString>

namespace spanscope::gui {

/// "# TITLE", then each question as "**You:** …" and each answer as "**Spanscope:** …", then
/// its sources as "Sources:" and a numbered list, one citation an item ("1. a.txt, line 40
/// (42%): EXCERPT", answer_citations.h), then its statistics in italics; a note line
/// (MessageRow::note) in italics. Markdown characters in the texts are kept as typed, except
/// that a line starting with '#' is escaped so it cannot become a heading.
QString chat_markdown(const QString& title, const QList<MessageRow>& messages);

} // namespace spanscope::gui
