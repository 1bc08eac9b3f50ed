#include "ui/error_text.h"

#include "engine/sekv/router_params.h"
#include "engine/session/session.h"
#include "engine/text/text_input.h"
#include "storage/chunk_state.h"
#include "storage/sqlite_db.h"

#include <sqlite3.h>

namespace spanscope::gui {

QString describe_error(const QString& what, const std::exception& e) {
    const QString msg = QString::fromUtf8(e.what());
    QString cause;
    if (const auto* db = dynamic_cast<const DbError*>(&e)) {
        switch (db->code() & 0xff) {
        case SQLITE_FULL:
            cause = QStringLiteral("The disk is full: free some space and try again. Nothing "
                                   "that was saved before is lost.");
            break;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
            cause = QStringLiteral("The project file is locked by another program (or another "
                                   "Spanscope window). Close it and try again; nothing was lost.");
            break;
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_CANTOPEN:
            cause = QStringLiteral("The project file cannot be written (permissions or a "
                                   "read-only disk).");
            break;
        default:
            cause = QStringLiteral("The project database reported an error.");
        }
    } else if (dynamic_cast<const DocumentError*>(&e)) {
        cause = QStringLiteral("The file cannot be read as a document.");
    } else if (dynamic_cast<const ContextOverflow*>(&e)) {
        cause = QStringLiteral("It does not fit the model's context window.");
    } else if (dynamic_cast<const StateError*>(&e)) {
        cause = QStringLiteral("A stored state is damaged; it will be recomputed.");
    } else if (dynamic_cast<const RouterParamsError*>(&e)) {
        cause = QStringLiteral("Choose another SEKV parameter file, or the automatic or "
                               "training-free router, in Settings.");
    }
    QString out = what + ": " + msg;
    if (!out.endsWith('.'))
        out += '.';
    // The store's message already says it (storage/sqlite_db.cpp): what to do, once.
    if (msg.contains(QLatin1String("disk is full")))
        cause = QStringLiteral("Free some space and try again.");
    else if (msg.contains(QLatin1String("read-only")) ||
             msg.contains(QLatin1String("moved or removed")))
        cause.clear();
    if (!cause.isEmpty())
        out += ' ' + cause;
    return out;
}

} // namespace spanscope::gui
