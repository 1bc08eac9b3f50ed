#include "ui/chat_export.h"

#include <QStringList>

namespace spanscope::gui {

namespace {
QString escape_headings(const QString& text) {
    QStringList lines = text.split('\n');
    for (auto& l : lines)
        if (l.startsWith('#'))
            l.prepend('\\');
    return lines.join('\n');
}
} // namespace

QString chat_markdown(const QString& title, const QList<MessageRow>& messages) {
    QString md = "# " + QString(title).replace('\n', ' ') + "\n";
    for (const auto& m : messages) {
        if (m.note) {
            md += "\n_" + m.text + "_\n";
            continue;
        }
        md += "\n**" + QString(m.from_user ? "You" : "Spanscope") + ":** " +
              escape_headings(m.text) + "\n";
        if (!m.from_user && !m.citations.isEmpty()) {
            md += "\nSources:\n\n";
            for (int i = 0; i < m.citations.size(); ++i)
                md += QStringLiteral("%1. %2\n")
                          .arg(QString::number(i + 1), citation_text(m.citations[i]));
        }
        if (!m.from_user && !m.details.isEmpty())
            md += "\n_" + m.details + "_\n";
    }
    return md;
}

} // namespace spanscope::gui
