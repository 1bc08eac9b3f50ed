// Fact probes for SEKV's zoom recordings (issue 8): a document with short made-up facts
// inserted between its lines, held as a question prompt holds it, then question turns that ask
// for the facts, each answered (teacher forced) with the fact's sentence. The answers' number
// tokens can only be read from the inserted fact, a few tokens far back in the document: the
// queries of a question about one detail of a long text.
//
// The facts are of their own generator, not the evaluation's needles
// (lab/evaluation/eval_tasks.cpp: "The secret code for the <adjective> <noun> is <5 digits>."): a
// person's <kind> number of six digits, worded "Note: the locker number of Agnes Brennan is
// 482913.", and asked "What is the locker number of Agnes Brennan?". They are drawn from a
// generator seeded by the document's name, so a recording is reproducible.
#pragma once

#include "engine/text/chat_format.h"
#include "engine/text/tokenizer.h"
#include "lab/router/zoom_question_probes.h"
#include "lab/router/zoom_recorder.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace spanscope {

/// One made-up fact: the sentence inserted, the question asking for it, the answer.
struct ZoomFact {
    std::string statement; ///< "Note: the <kind> number of <First Last> is <value>."
    std::string question;  ///< "What is the <kind> number of <First Last>?"
    std::string answer;    ///< "The <kind> number of <First Last> is <value>."
    std::string value;     ///< six digits, 100000–999999
};

/// `n` facts with distinct (kind, person) keys drawn from `rng`.
/// Throws std::invalid_argument for n < 0 or more facts than there are keys.
std::vector<ZoomFact> zoom_facts(std::mt19937_64& rng, int n);

/// The tokens recorded for a document with fact probes (settings.probe_form = Fact,
/// recall_probes = N ≥ 1 facts; an answer may take at most probe_tokens tokens):
///   document_unit_header(name, part 1 of 1) · text (cut) with fact i's tokens
///   (tokenize(statement + "\n")) inserted after the first line end at or after depth
///   (i + ½) / N of the kept text (within 64 tokens; else "\n" + statement + "\n" right there)
///   · document_unit_trailer,
///   then the N questions in an order drawn from the generator, each: [the end of the previous
///   answer's turn, as zoom_question_probes puts it] · question_tokens(question) ·
///   tokenize(answer).
/// The facts and the order come from std::mt19937_64 seeded with the FNV-1a hash of `name`
/// (the order by std::shuffle, whose algorithm is the standard library's: the recordings of
/// run 24 are libstdc++'s, Debian's). A fact's depth is never before the end of the previous
/// fact's insertion point; an inline fact's position is that of its leading "\n".
/// The result's run_starts[i] is the first position of the tokens inserted for the fact asked
/// i-th, answer_starts[i]
/// the first position of its answer. The text is cut (its end) until the whole fits max_tokens.
/// Throws std::invalid_argument for settings out of range, settings without fact probes,
/// invalid UTF-8 in the text or the name, a vocabulary without the turn tokens of `format`
/// (chat_format.h), an answer longer than probe_tokens, or a text of fewer than 2 · N tokens
/// kept (also what cutting the text to fit max_tokens ends in when the facts, questions and
/// answers alone do not fit).
ZoomQuestionProbes zoom_fact_probes(const Tokenizer& tok, ChatFormat format,
                                    const std::string& name, const std::string& text,
                                    const ZoomRecordSettings& settings);

} // namespace spanscope
