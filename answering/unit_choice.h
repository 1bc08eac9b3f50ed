// Which document units (sections) answer a question when not all of them fit the context:
// ranked by the full-text relevance of their text (Okapi BM25 over SQLite FTS5's index) and,
// where SEKV summaries are stored, by the relevance of their summary keys to the question's
// queries; the rankings are fused by reciprocal rank fusion; the best that fit are
// taken and returned in the order of the user's documents (README.md, §3.5).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace spanscope {

/// A section that may answer a question. Candidates come in the order of the user's documents,
/// the units of a document in text order; that order is kept in the answer.
struct UnitCandidate {
    int64_t document_id = 0;
    int unit = 0;       ///< 0-based unit of the document
    int64_t tokens = 0; ///< the unit's tokens (its positions in the assembled context)
    /// BM25 of the unit's text for the question (Project::search_units): lower (more negative)
    /// is more relevant; none when no word of the question occurs in it.
    std::optional<double> bm25;
    /// SEKV relevance of the unit's summary keys to the question's queries (sekv_relevance.h):
    /// higher is more relevant; none when no SEKV summaries of the unit are stored.
    std::optional<double> sekv;
};

/// A unit chosen to answer, with its place in the ranking.
struct ChosenUnit : UnitCandidate {
    int rank = 0;     ///< 1-based place in the fused ranking; 0 when everything fit (no ranking)
    double fused = 0; ///< reciprocal-rank-fusion score (0 when unranked)
};

/// Units in words, grouped by document in the order given (a document's units are contiguous
/// there), numbered from 1 as users see them: "LABEL (sections 1, 3), LABEL2 (section 2)";
/// `label` names a document by its id.
std::string sections_text(const std::vector<ChosenUnit>& units,
                          const std::function<std::string(int64_t)>& label);

struct UnitChoice {
    std::vector<ChosenUnit> chosen; ///< in candidate order
    int left_out = 0;               ///< candidates not chosen
    bool ranked = false;            ///< false when every candidate fit and none was ranked
};

/// k of reciprocal rank fusion, as in Cormack, Clarke & Büttcher (SIGIR 2009), who found it
/// robust across collections; not tuned here.
constexpr double kRrfK = 60;

/// Every candidate when their tokens fit `budget`. Otherwise rank them: one ranking by bm25
/// (ascending) over the candidates that have one, one by sekv (descending) over those that have
/// one; each candidate's score is Σ 1 / (kRrfK + rank) over the rankings it is in (rank
/// 1-based; ties within a ranking broken by candidate order), except that when some candidate
/// has a sekv score, one without counts its bm25 term twice (its summaries are not stored yet;
/// a 0 there would rank it below every section that has them). Candidates in neither ranking
/// score 0. Going down by score (ties: candidate order), take each candidate whose tokens still
/// fit the budget. The chosen return in candidate order. Throws std::invalid_argument for a
/// negative token count.
UnitChoice choose_units(const std::vector<UnitCandidate>& candidates, int64_t budget);

} // namespace spanscope
