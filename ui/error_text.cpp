#include "ui/error_text.h"

#include "engine/sekv/router_params.h"
#include "engine/session/session.h"
#include "engine/text/text_input.h"
#include "storage/chunk_state.h"
#include "storage/sqlite_db.h"

#include <sqlite3.h>

#include <cerrno>

namespace spanscope::gui {

QString describe_error(const QString& what, const std::exception& e) {
    const QString msg = QString::fromUtf8(e.what());
    QString cause;
    if (const auto* db = dynamic_cast<const DbError*>(&e)) {
        // The store's message (storage/sqlite_db.cpp) already says what happened; what to do is
        // added once, chosen by the code.
        switch (db->code()) {
        case SQLITE_READONLY_DBMOVED:
        case SQLITE_IOERR_VNODE:
            break; // the message says it: nothing more is written to the moved file
        case SQLITE_BUSY_SNAPSHOT:
            cause = QStringLiteral("Open the project again to see what the other program "
                                   "changed; nothing was lost.");
            break;
        default:
            switch (db->code() & 0xff) {
            case SQLITE_FULL:
                cause = db->system_errno() == EFBIG
                            ? QStringLiteral("Raise the limit (or run without it) and try "
                                             "again; nothing that was saved before is lost.")
                            : QStringLiteral("Free some space and try again; nothing that was "
                                             "saved before is lost.");
                break;
            case SQLITE_BUSY:
                cause = QStringLiteral("Wait for it to finish, or close the project there, and "
                                       "try again; nothing was lost.");
                break;
            case SQLITE_LOCKED:
                cause = QStringLiteral("Try again; nothing was lost.");
                break;
            case SQLITE_READONLY:
            case SQLITE_PERM:
                break; // the message names why it cannot be written
            case SQLITE_CANTOPEN:
                cause = QStringLiteral("The project file cannot be opened (permissions, or a "
                                       "folder that is gone).");
                break;
            default:
                cause = QStringLiteral("The project database reported an error.");
            }
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
    if (!cause.isEmpty())
        out += ' ' + cause;
    return out;
}

} // namespace spanscope::gui
