// Which document units (sections) answer a question when not all of them fit the context.
#pragma once

#include "chunking.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace spanscope {

/// A unit of a document chosen to answer a question, in project order.
struct ChosenUnit {
    int64_t document_id = 0;
    int unit = 0;
    int64_t tokens = 0;
};

/// Every unit of `docs` ([document](id, units)) when they fit `budget` tokens; otherwise the
/// units sharing the most words (4+ letters, case-folded) with the question, as many as fit,
/// returned in project order. texts: each document's extracted text (units index into it).
/// *skipped receives how many units were left out.
std::vector<ChosenUnit>
choose_units(const std::vector<std::pair<int64_t, std::vector<DocumentUnit>>>& docs,
             const std::vector<std::string>& texts, const std::string& question, int64_t budget,
             int* skipped);

} // namespace spanscope
