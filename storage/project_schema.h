// The project database's schema, its migrations, and the checks a file passes before SQLite
// is allowed to write to it.
#pragma once

#include "sqlite_db.h"

#include <string>

namespace spanscope {

/// The schema version this build writes (and the newest it reads).
constexpr int kSchemaVersion = 1;

/// Check an existing file before opening it for writing: a regular file, not empty, an SQLite
/// database header, a page size SQLite allows, and not shorter than the header says.
/// Throws ProjectError (project.h) naming the file; never writes.
void check_project_file(const std::string& path);

/// The schema version recorded in `db`: 0 for a database without any table (new), -1 for an
/// SQLite database that is not a Spanscope project. Throws DbError when the file cannot be read.
int read_schema_version(Db& db);

/// Bring `db` from `from` up to kSchemaVersion, one migration per transaction.
/// Throws ProjectError when `from` is newer than this build.
void migrate(Db& db, int from);

} // namespace spanscope
