// The project's document list as the user left it: the order documents are put in context
// (LinearKV assembles them in any order, docs/linearkv.md) and which of them are left out. Kept in
// the project's settings table, so that a reopened project asks about the same context.
#pragma once

#include "storage/project.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope {

struct DocumentListState {
    std::vector<int64_t> order;    ///< every document id, first in context first
    std::vector<int64_t> excluded; ///< ids the user left out of the context (a subset of order)
};

/// The stored list reconciled with the project's documents now: ids no longer in the project
/// are dropped, documents the list does not name yet are appended (ascending ids) and included.
/// A project without a stored list gives ascending ids, all included. A damaged setting gives
/// the same and *warning (when given) says so; nothing throws for it.
DocumentListState project_document_list(Project& project, std::string* warning = nullptr);

/// Store the list (replacing the previous one); each id is kept with its document's file path,
/// so that a later document given the same id (SQLite reuses the largest id once that document
/// is removed) is not mistaken for it. Ids no longer in the project are dropped.
/// Throws std::invalid_argument for an id given twice in order, or an excluded id that is not
/// in order; ProjectError (or DbError) when the project cannot be written.
void set_project_document_list(Project& project, const DocumentListState& state);

} // namespace spanscope
