#include "ui/answer_stats_json.h"

namespace spanscope::gui {

namespace {
double number(const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}
QString text(const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string()
               ? QString::fromStdString(j[key].get<std::string>())
               : QString();
}
const nlohmann::json& member(const nlohmann::json& j, const char* key) {
    static const nlohmann::json none;
    return j.is_object() && j.contains(key) && j[key].is_object() ? j[key] : none;
}
} // namespace

AnswerStats answer_stats_from_json(const nlohmann::json& stats) {
    AnswerStats s;
    s.ttft_ms = number(stats, "ttft_ms");
    s.decode_tokens_per_s = number(stats, "decode_tokens_per_s");
    s.prefill_tokens_per_s = number(stats, "prefill_tokens_per_s");
    s.tokens_reused = static_cast<qint64>(number(stats, "tokens_reused"));
    s.tokens_computed = static_cast<qint64>(number(stats, "tokens_computed"));
    s.generated_tokens = static_cast<qint64>(number(stats, "generated_tokens"));
    s.policy = text(stats, "policy");
    s.router = text(stats, "router");
    s.rerank = static_cast<int>(number(stats, "rerank"));
    s.fast_tier_fraction = number(stats, "fast_tier_fraction");
    s.cache_fraction = number(stats, "cache_fraction");
    if (stats.is_object() && stats.contains("memory_per_layer") &&
        stats["memory_per_layer"].is_array())
        for (const auto& m : stats["memory_per_layer"])
            if (m.is_object() && m.contains("layer") && m["layer"].is_number_integer())
                s.sekv_layers << m["layer"].get<int>();
    s.expansions = number(stats, "expansions");
    s.spans = static_cast<qint64>(number(stats, "spans"));
    s.full_kv_bytes = static_cast<qint64>(number(member(stats, "memory"), "full_kv_bytes"));
    s.selector = text(stats, "selector");
    s.recompute_set = static_cast<qint64>(number(stats, "recompute_set"));
    const auto& rows = member(stats, "layer_rows");
    for (const auto& [key, kind] :
         {std::pair{"global", &s.global_rows}, std::pair{"sliding", &s.sliding_rows}}) {
        const auto& k = member(rows, key);
        kind->layers = static_cast<int>(number(k, "layers"));
        kind->recomputed = static_cast<qint64>(number(k, "rows_recomputed"));
        kind->reused = static_cast<qint64>(number(k, "rows_reused"));
    }
    s.sections_left_out = static_cast<int>(number(stats, "units_left_out"));
    s.ranking = text(stats, "ranking");
    s.state_init = text(stats, "state_init");
    if (stats.is_object() && stats.contains("units_used") && stats["units_used"].is_array())
        for (const auto& u : stats["units_used"]) {
            AnswerStats::Section sec;
            sec.document_id = static_cast<qint64>(number(u, "document_id"));
            sec.unit = static_cast<int>(number(u, "unit"));
            sec.tokens = static_cast<qint64>(number(u, "tokens"));
            s.sections_used << sec;
        }
    return s;
}

} // namespace spanscope::gui
