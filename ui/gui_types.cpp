#include "ui/gui_types.h"

#include "answering/policy_settings.h"
#include "ui/zoom_data.h"

#include <QLocale>

namespace spanscope::gui {

QString status_text(const DocumentRow& row) {
    using S = DocumentRow::Status;
    switch (row.status) {
    case S::Queued:
        return QStringLiteral("queued");
    case S::Extracting:
        if (row.ocr_page_count > 0)
            return QStringLiteral("reading page %1 of %2 by OCR (no text layer)")
                .arg(row.ocr_page)
                .arg(row.ocr_page_count);
        return QStringLiteral("extracting text");
    case S::Prefilling:
        return QStringLiteral("prefilling %1/%2 chunks").arg(row.chunks_stored).arg(row.chunks);
    case S::Ready:
        return QStringLiteral("ready · %1 tokens").arg(QLocale().toString(row.tokens));
    case S::Partial:
        return QStringLiteral("%1/%2 chunks stored (the rest when a question needs them, or add it "
                              "again)")
            .arg(row.chunks_stored)
            .arg(row.chunks);
    case S::Unprefilled:
        return QStringLiteral("not prefilled for this model (it is when asked about)");
    case S::NoModel:
        return QStringLiteral("in the project (no model is loaded)");
    case S::Cancelled:
        return QStringLiteral("cancelled");
    case S::Failed:
        return QStringLiteral("failed: %1").arg(row.error);
    }
    return {};
}

QString stop_reason_text(const QString& stop_reason, qint64 generated_tokens) {
    if (stop_reason == QLatin1String("stopped"))
        return QStringLiteral(" · stopped");
    if (stop_reason == QLatin1String("max_tokens"))
        return QStringLiteral(" · cut at the longest answer, %1 tokens")
            .arg(QLocale().toString(generated_tokens));
    if (stop_reason == QLatin1String("context_full"))
        return QStringLiteral(" · the context window is full");
    return {};
}

bool shows_token_citations(const MessageRow& m) {
    return m.selected_token >= 0 && m.selected_token < m.token_citations.size() &&
           !m.token_citations[m.selected_token].isEmpty();
}

const QList<Citation>& shown_citations(const MessageRow& m) {
    return shows_token_citations(m) ? m.token_citations[m.selected_token] : m.citations;
}

QString history_note_text(const QString& before, const QString& after) {
    return QStringLiteral("Continued with %1: none of the turns above is sent to it as history "
                          "(the last were answered by %2).")
        .arg(after, before);
}

QString stats_text(const AnswerStats& s) {
    const QLocale l;
    QString text =
        QStringLiteral("first token %1 ms · %2 tokens/s · %3 tokens reused / %4 computed")
            .arg(l.toString(qRound64(s.ttft_ms)))
            .arg(l.toString(s.decode_tokens_per_s, 'f', 1))
            .arg(l.toString(s.tokens_reused))
            .arg(l.toString(s.tokens_computed));
    if (s.policy == QLatin1String("sekv")) {
        // Which layers SEKV served, their fast tier against full, and the whole cache's (on a
        // stack of only global layers SEKV serves the later half; the rest hold every row).
        const int n = static_cast<int>(s.sekv_layers.size());
        if (n > 0)
            text +=
                QStringLiteral(" · sekv on %1 %2: fast tier %3 % of full there")
                    .arg(l.toString(n), n == 1 ? QStringLiteral("layer") : QStringLiteral("layers"),
                         l.toString(100 * s.fast_tier_fraction, 'f', 0));
        else
            text += QStringLiteral(" · sekv: fast tier %1 % of full")
                        .arg(l.toString(100 * s.fast_tier_fraction, 'f', 0));
        if (s.cache_fraction > 0)
            text += QStringLiteral(", whole cache (both tiers) %1 % of full")
                        .arg(l.toString(100 * s.cache_fraction, 'f', 0));
        text +=
            QStringLiteral(", %1 spans expanded per token").arg(l.toString(s.expansions, 'f', 1));
        if (!s.router.isEmpty())
            text += QStringLiteral(", %1 router").arg(s.router);
        if (s.rerank > 0)
            text += QStringLiteral(", two-stage routing (%1 candidates per expanded span)")
                        .arg(s.rerank);
    } else if (s.policy == QLatin1String("full"))
        text += QStringLiteral(" · full memory");
    if (!s.selector.isEmpty() && s.selector != QLatin1String("none")) {
        const auto share = [&](const AnswerStats::LayerRows& k) {
            const qint64 all = k.recomputed + k.reused;
            return all > 0 ? l.toString(100.0 * k.recomputed / all, 'f', 0) : QStringLiteral("0");
        };
        text += QStringLiteral(" · %1 recomputed %2 (global layers %3 % of rows, sliding %4 %)")
                    .arg(s.selector, count_text(s.recompute_set, QStringLiteral("token"),
                                                QStringLiteral("tokens")))
                    .arg(share(s.global_rows), share(s.sliding_rows));
    }
    if (s.sections_left_out > 0) {
        text += QStringLiteral(" · %1 of %2 sections used")
                    .arg(l.toString(s.sections_used.size()))
                    .arg(l.toString(s.sections_used.size() + s.sections_left_out));
        if (!s.ranking.isEmpty())
            text += QStringLiteral(" (%1)").arg(s.ranking);
    }
    if (!s.state_init.isEmpty())
        text += QStringLiteral(" · recurrent state: %1").arg(s.state_init);
    return text;
}

QString trimmed_number(double value, int decimals) {
    const QLocale l;
    QString text = l.toString(value, 'f', decimals);
    const QString point = l.decimalPoint();
    if (decimals > 0 && text.contains(point)) {
        while (text.endsWith(QLatin1Char('0')))
            text.chop(1);
        if (text.endsWith(point))
            text.chop(point.size());
    }
    return text;
}

QString count_text(qint64 n, const QString& one, const QString& many) {
    return QStringLiteral("%1 %2").arg(QLocale().toString(n), n == 1 ? one : many);
}

bool MemorySettings::two_stage_applies(const QString& backend) const {
    return two_stage_routing_applies(policy.toStdString(), tau_per_query, backend.toStdString());
}

bool MemorySettings::takes_router_params_file() const {
    return router != QLatin1String(kRouterTrainingFree);
}

QString MemorySettings::router_params_file_in_effect() const {
    return takes_router_params_file() ? router_params_file : QString();
}

spanscope::PolicySettings MemorySettings::policy_settings(const QString& backend) const {
    spanscope::PolicySettings s;
    s.policy = sekv() ? "sekv" : "full"; // not policy_given: sekv gives way on a model without
                                         // a layer for it (the answering service's note)
    s.budget = budget;
    if (!sekv()) {
        s.tau_per_query = false; // none of SEKV's routing under full
        s.rerank = 0;
        return s;
    }
    s.expand_rate = expand_rate;
    // Given where they differ from the defaults: a default gives way where it cannot apply (a
    // model SEKV cannot serve answers with full, answering/policy_settings.h).
    s.tau_per_query = tau_per_query;
    s.tau_per_query_given = tau_per_query != spanscope::PolicySettings{}.tau_per_query;
    s.rerank = rerank_in_effect(backend);
    s.rerank_given = rerank != spanscope::PolicySettings{}.rerank;
    s.router = router.toStdString();
    s.router_params_file = router_params_file_in_effect().toStdString();
    return s;
}

QString MemorySettings::spans_key() const {
    if (!sekv())
        return {};
    QString key = QStringLiteral("sekv:%1").arg(budget, 0, 'g', 6);
    if (!router.isEmpty() || !router_params_file.isEmpty())
        key += QStringLiteral(":%1:%2").arg(router, router_params_file);
    return key;
}

void register_gui_types() {
    qRegisterMetaType<DocumentRow>();
    qRegisterMetaType<ChatRow>();
    qRegisterMetaType<MessageRow>();
    qRegisterMetaType<AnswerStats>();
    qRegisterMetaType<GenerationSettings>();
    qRegisterMetaType<MemorySettings>();
    qRegisterMetaType<ReuseSettings>();
    qRegisterMetaType<IngestStatus>();
    qRegisterMetaType<QList<DocumentRow>>();
    qRegisterMetaType<QList<ChatRow>>();
    qRegisterMetaType<QList<MessageRow>>();
    register_zoom_types();
}

} // namespace spanscope::gui
