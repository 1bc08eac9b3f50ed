#include "lab/report/report_pic.h"

#include "lab/report/report_line_reader.h"
#include "lab/report/report_markdown.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

namespace spanscope::report {

namespace {

int selector_rank(const std::string& s) {
    static const std::vector<std::string> order = {"cold", "none", "epic", "cacheblend", "full"};
    const auto it = std::find(order.begin(), order.end(), s);
    return static_cast<int>(it - order.begin());
}

bool pic_config_before(const std::pair<std::string, double>& a,
                       const std::pair<std::string, double>& b) {
    return std::make_tuple(selector_rank(a.first), a.first, a.second) <
           std::make_tuple(selector_rank(b.first), b.first, b.second);
}

std::optional<double> mean_of(const std::vector<double>& v) {
    if (v.empty())
        return std::nullopt;
    double s = 0;
    for (const double x : v)
        s += x;
    return s / static_cast<double>(v.size());
}

PicCell cell_of(const std::string& selector, double ratio, const std::vector<const PicRow*>& rows) {
    PicCell c;
    c.selector = selector;
    c.ratio = ratio;
    std::vector<double> scores, cold, ttft, share, forwarded, top1, kl;
    for (const auto* r : rows) {
        scores.push_back(r->score);
        cold.push_back(r->score_cold);
        ttft.push_back(r->ttft_ratio);
        if (r->recompute_share)
            share.push_back(*r->recompute_share);
        if (r->forwarded_share)
            forwarded.push_back(*r->forwarded_share);
        if (r->top1_agreement)
            top1.push_back(*r->top1_agreement);
        if (r->kl)
            kl.push_back(*r->kl);
    }
    const Accuracy a = accuracy_of(scores);
    c.n = a.n;
    c.accuracy = a.mean;
    c.ci = a.ci;
    c.accuracy_cold = mean_of(cold).value_or(0);
    if (c.accuracy_cold > 0)
        c.recovered = c.accuracy / c.accuracy_cold;
    c.ttft_ratio = mean_of(ttft).value_or(0);
    c.recompute_share = mean_of(share);
    c.forwarded_share = mean_of(forwarded);
    c.top1_agreement = mean_of(top1);
    c.kl = mean_of(kl);
    return c;
}

std::vector<PicCell> cells_of(const std::vector<const PicRow*>& rows) {
    std::map<std::pair<std::string, double>, std::vector<const PicRow*>,
             decltype(&pic_config_before)>
        by_config(&pic_config_before);
    for (const auto* r : rows)
        by_config[{r->selector, r->ratio}].push_back(r);
    std::vector<PicCell> cells;
    for (const auto& [config, group] : by_config)
        cells.push_back(cell_of(config.first, config.second, group));
    return cells;
}

std::string fixed(double v, int decimals) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

std::string opt_percent(const std::optional<double>& v) {
    return v ? percent(*v) + " %" : "–";
}

void table(std::ostringstream& md, const std::vector<PicCell>& cells, bool target) {
    md << "| configuration | accuracy | cold prefill | quality recovered | time to first token "
          "(× cold) | recomputed | forwarded | top-1 agreement | KL (nats) |"
       << (target ? " target |" : "") << "\n|---|---|---|---:|---:|---:|---:|---:|---:|"
       << (target ? "---|" : "") << "\n";
    for (const auto& c : cells) {
        Accuracy a;
        a.n = c.n;
        a.mean = c.accuracy;
        a.ci = c.ci;
        md << "| " << pic_label(c.selector, c.ratio) << " | " << accuracy_cell(a) << " | "
           << percent(c.accuracy_cold) << " % | " << opt_percent(c.recovered) << " | "
           << fixed(c.ttft_ratio, 2) << " | " << opt_percent(c.recompute_share) << " | "
           << opt_percent(c.forwarded_share) << " | " << opt_percent(c.top1_agreement) << " | "
           << (c.kl ? fixed(*c.kl, 3) : "–") << " |";
        if (target) {
            std::string verdict = "–";
            if (std::abs(c.ratio - 0.2) < 1e-9 &&
                (c.selector == "epic" || c.selector == "cacheblend")) {
                const bool quality = c.recovered && *c.recovered >= 0.9;
                const bool time = c.ttft_ratio <= 0.3;
                verdict = quality && time
                              ? "met"
                              : std::string("missed (") + (quality ? "" : "quality") +
                                    (!quality && !time ? ", " : "") + (time ? "" : "time") + ")";
            }
            md << " " << verdict << " |";
        }
        md << "\n";
    }
}

} // namespace

PicRow parse_pic_row(const LineReader& r) {
    PicRow row;
    row.task = r.string("task");
    if (r.find("settings"))
        row.settings = r.string("settings");
    const long long length = r.integer("target_length");
    if (length <= 0 || length > 1'000'000'000)
        r.fail("\"target_length\" " + std::to_string(length) + " is not a positive length");
    row.target_length = static_cast<int>(length);
    const long long docs = r.integer("documents");
    if (docs < 1 || docs > 1'000'000)
        r.fail("\"documents\" " + std::to_string(docs) + " is not a document count");
    row.documents = static_cast<int>(docs);
    row.depth = r.number("depth");
    if (row.depth < 0 || row.depth > 1)
        r.fail("\"depth\" " + key_number(row.depth) + " is outside [0, 1]");
    row.index = r.integer("index");
    row.seed = r.integer("seed");
    row.selector = r.string("selector");
    if (row.selector.empty())
        r.fail("\"selector\" is empty");
    row.ratio = r.number("ratio");
    if (row.ratio < 0 || row.ratio > 1)
        r.fail("\"ratio\" " + key_number(row.ratio) + " is outside [0, 1]");
    for (auto [key, out] :
         {std::pair{"score", &row.score}, std::pair{"score_cold", &row.score_cold}}) {
        *out = r.number(key);
        if (*out < 0 || *out > 1)
            r.fail(std::string("\"") + key + "\" " + key_number(*out) + " is outside [0, 1]");
    }
    row.ttft_ratio = r.number("ttft_ratio");
    if (row.ttft_ratio < 0)
        r.fail("\"ttft_ratio\" is negative");
    if (const json* v = r.find("recompute_share"))
        row.recompute_share = r.number_of(*v, "recompute_share");
    if (const json* v = r.find("forwarded_share"))
        row.forwarded_share = r.number_of(*v, "forwarded_share");
    if (const json* f = r.find("fidelity")) {
        if (!f->is_object())
            r.fail("\"fidelity\" is not an object");
        row.top1_agreement = r.optional_number(f, "top1_agreement", "fidelity.top1_agreement");
        row.kl = r.optional_number(f, "kl", "fidelity.kl");
    }
    return row;
}

std::string pic_row_key(const PicRow& r) {
    std::string k;
    for (const std::string* s : {&r.task, &r.settings, &r.selector}) {
        k += std::to_string(s->size());
        k += ':';
        k += *s;
        k += '\x1f';
    }
    k += std::to_string(r.target_length) + '\x1f' + std::to_string(r.documents) + '\x1f' +
         key_number(r.depth) + '\x1f' + std::to_string(r.index) + '\x1f' + std::to_string(r.seed) +
         '\x1f' + key_number(r.ratio);
    return k;
}

std::string pic_label(const std::string& selector, double ratio) {
    if (selector == "epic" || selector == "cacheblend")
        return selector + "@" + budget_percent(ratio) + "%";
    return selector;
}

PicReport aggregate_pic(const std::vector<PicRow>& rows) {
    PicReport report;
    std::map<std::tuple<std::string, int, int>, std::vector<const PicRow*>> groups;
    std::vector<const PicRow*> all;
    for (const auto& r : rows) {
        groups[{r.task, r.target_length, r.documents}].push_back(&r);
        all.push_back(&r);
    }
    for (const auto& [key, group] : groups) {
        PicGroup g;
        std::tie(g.task, g.target_length, g.documents) = key;
        g.cells = cells_of(group);
        report.groups.push_back(std::move(g));
    }
    report.pooled = cells_of(all);
    return report;
}

std::string render_pic_markdown(const PicReport& report) {
    if (report.groups.empty())
        return "";
    std::ostringstream md;
    md << "## Position-independent caching (LinearKV)\n\n"
          "Each sample's context is cut into documents prefilled on their own; `cold` is the "
          "prefill of the whole context (equal to a `full` recompute), which every other "
          "configuration is compared with on the same samples. *Quality recovered* is the "
          "accuracy as a share of the cold prefill's; *time to first token* includes putting "
          "the documents together and the recompute pass, as a multiple of the cold prefill's; "
          "*recomputed* is the recompute set as a share of the context, *forwarded* the tokens "
          "that entered the recompute pass (CacheBlend runs them up to its check layer). "
          "Target (issue 7): at ratio 0.2, at least 90 % of the quality at no more than 0.3 of "
          "the time to first token.\n\n### Every task, length and document count pooled\n\n";
    table(md, report.pooled, /*target=*/true);
    std::string task;
    for (const auto& g : report.groups) {
        if (g.task != task) {
            task = g.task;
            md << "\n### " << task << "\n";
        }
        md << "\n**" << g.target_length << " tokens, " << g.documents << " documents**\n\n";
        table(md, g.cells, /*target=*/true);
    }
    md << "\n";
    return md.str();
}

} // namespace spanscope::report
