// The project database's schema, its migrations, and the checks a file passes before SQLite
// is allowed to write to it.
#pragma once

#include "storage/sqlite_db.h"

#include <string>

namespace spanscope {

/// The schema version this build writes (and the newest it reads).
constexpr int kSchemaVersion = 4;

/// Check an existing file before opening it for writing: a regular file, not empty, an SQLite
/// database header, a page size SQLite allows, and not shorter than the header says.
/// Throws ProjectError (project.h) naming the file; never writes.
void check_project_file(const std::string& path);

/// The schema version recorded in `db`: 0 for a database without any table (new), -1 for an
/// SQLite database that is not a Spanscope project. Throws DbError when the file cannot be read.
int read_schema_version(Db& db);

/// True when the SQLite library has the FTS5 module (schema version 2 needs it). Debian 12's
/// libsqlite3 is built with it; a build without it is refused with a clear message.
bool sqlite_has_fts5(Db& db);

/// Throws ProjectError naming the file and the SQLite version when sqlite_has_fts5() is false.
void require_fts5(Db& db);

/// Bring `db` from `from` up to kSchemaVersion, one migration per transaction.
/// Throws ProjectError when `from` is newer than this build or SQLite lacks FTS5.
void migrate(Db& db, int from);

} // namespace spanscope
