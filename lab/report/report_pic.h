// spanscope-report's position-independent caching results (JSON Lines written by
// `spanscope-lab pic-eval --out`, LinearKV, issue 7): one line per sample and configuration
// (a selector at a recompute ratio, or "cold", the prefill of the whole context that every
// other line is compared with). Aggregated per task, target length and document count into
// accuracy with its 95 % interval, quality recovered (accuracy as a share of the cold
// prefill's on the same samples) and time to first token as a share of the cold prefill's.
#pragma once

#include "lab/evaluation/eval_metrics.h"

#include <optional>
#include <string>
#include <vector>

namespace spanscope::report {

class LineReader;

/// One (sample, configuration) line of pic-eval.
struct PicRow {
    std::string task;
    std::string settings;
    int target_length = 0;
    int documents = 0;
    double depth = 0;
    long long index = 0;
    long long seed = 0;
    std::string selector; ///< "cold", "none", "epic", "cacheblend", "full"
    double ratio = 0;     ///< share of the context recomputed (epic, cacheblend), else 0
    double score = 0;     ///< in [0, 1]
    double score_cold = 0;
    double ttft_ratio = 1;                 ///< time to first token / the cold prefill's
    std::optional<double> recompute_share; ///< |U| / context tokens
    std::optional<double> forwarded_share; ///< tokens entering the recompute pass / context
    std::optional<double> top1_agreement;  ///< with the cold answer's next-token choices
    std::optional<double> kl;              ///< nats, against the cold answer's distributions
    std::string source;                    ///< "FILE:LINE" of the line that was kept
};

/// Parses a pic-eval line (it has "selector"). Throws InputError naming the line.
PicRow parse_pic_row(const LineReader& r);
/// The de-duplication key: task, settings, length, documents, depth, index, seed, selector,
/// ratio.
std::string pic_row_key(const PicRow& row);

/// "cold", "none", "epic@20%", "cacheblend@5%", "full".
std::string pic_label(const std::string& selector, double ratio);

/// One configuration's results in a group (or pooled over groups).
struct PicCell {
    std::string selector;
    double ratio = 0;
    eval::Interval ci; ///< of the accuracy
    int n = 0;
    double accuracy = 0;             ///< mean score
    double accuracy_cold = 0;        ///< mean cold score over the same samples
    std::optional<double> recovered; ///< accuracy / accuracy_cold (none when cold is 0)
    double ttft_ratio = 0;           ///< mean
    std::optional<double> recompute_share, forwarded_share, top1_agreement, kl; ///< means
};

/// One task at one target length and document count.
struct PicGroup {
    std::string task;
    int target_length = 0;
    int documents = 0;
    std::vector<PicCell> cells; ///< cold, none, epic by ratio, cacheblend by ratio, full
};

struct PicReport {
    std::vector<PicGroup> groups; ///< by task, length, documents
    std::vector<PicCell> pooled;  ///< every group pooled, per configuration (same order)
};

/// Aggregates the rows (empty rows give an empty report).
PicReport aggregate_pic(const std::vector<PicRow>& rows);

/// The Markdown section of the report ("" without rows): the pooled table with the issue's
/// target (at ratio 0.2: at least 90 % of the cold prefill's quality at no more than 0.3 of its
/// time to first token), then a table per task.
std::string render_pic_markdown(const PicReport& report);

} // namespace spanscope::report
