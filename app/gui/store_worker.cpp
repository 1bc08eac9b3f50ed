#include "store_worker.h"

#include "chat_export.h"
#include "error_text.h"
#include "project.h"

#include <QLocale>
#include <QSaveFile>

#include <nlohmann/json.hpp>

namespace spanscope::gui {

namespace {
QString q(const std::string& s) {
    return QString::fromStdString(s);
}
} // namespace

StoreWorker::StoreWorker() = default;
StoreWorker::~StoreWorker() = default;

void StoreWorker::open_project(const QString& path) {
    project_.reset();
    try {
        project_ = Project::open(path.toStdString(), /*create=*/false);
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Opening %1").arg(path), e));
    }
}

void StoreWorker::close_project() {
    project_.reset();
}

void StoreWorker::load_document_text(qint64 id) {
    if (!project_)
        return;
    try {
        const auto doc = project_->document(id);
        if (!doc)
            return;
        const std::string text = project_->document_text(id);
        const auto map = project_->document_offset_map(id);
        std::string shown;
        shown.reserve(text.size() + map.size() / 8);
        size_t at = 0;
        int32_t page = 0;
        for (const auto& a : map) {
            if (a.page <= page || a.text_offset < 0 ||
                static_cast<size_t>(a.text_offset) > text.size() ||
                static_cast<size_t>(a.text_offset) < at)
                continue;
            shown.append(text, at, static_cast<size_t>(a.text_offset) - at);
            at = static_cast<size_t>(a.text_offset);
            page = a.page;
            if (!shown.empty() && shown.back() != '\n')
                shown += '\n';
            shown += "[page " + std::to_string(page) + "]\n";
        }
        shown.append(text, at, std::string::npos);
        emit document_text(id, q(doc->name), q(shown));
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Showing document %1").arg(id), e));
    }
}

void StoreWorker::list_chats() {
    if (!project_)
        return;
    try {
        QList<ChatRow> rows;
        for (const auto& c : project_->chats())
            rows << ChatRow{c.id, q(c.title), c.messages};
        emit chats_listed(rows);
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Listing the chats"), e));
    }
}

QString message_details(const std::string& stats_json) {
    const auto j = nlohmann::json::parse(stats_json, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
        return {};
    const auto str = [&](const char* k) {
        return j.contains(k) && j[k].is_string() ? q(j[k].get<std::string>()) : QString();
    };
    const auto num = [&](const char* k) {
        return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0;
    };
    const QString reason = str("stop_reason");
    if (reason == "error")
        return QStringLiteral("no answer: %1").arg(str("error"));
    AnswerStats s;
    s.ttft_ms = num("ttft_ms");
    s.decode_tokens_per_s = num("decode_tokens_per_s");
    s.tokens_reused = static_cast<qint64>(num("tokens_reused"));
    s.tokens_computed = static_cast<qint64>(num("tokens_computed"));
    if (!j.contains("ttft_ms"))
        return reason == "stopped" ? QStringLiteral("stopped before the answer began") : QString();
    QString line = stats_text(s);
    if (reason == "stopped")
        line += QStringLiteral(" · stopped");
    return line;
}

namespace {
QList<MessageRow> message_rows(Project& project, qint64 chat_id) {
    QList<MessageRow> rows;
    for (const auto& m : project.messages(chat_id)) {
        MessageRow r;
        r.id = m.id;
        r.from_user = m.role == "user";
        r.text = q(m.text);
        if (!r.from_user)
            r.details = message_details(m.stats_json);
        rows << r;
    }
    return rows;
}
} // namespace

void StoreWorker::load_chat(qint64 chat_id) {
    if (!project_)
        return;
    try {
        emit chat_loaded(chat_id, message_rows(*project_, chat_id));
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Loading the chat"), e));
    }
}

void StoreWorker::rename_chat(qint64 chat_id, const QString& title) {
    if (!project_)
        return;
    try {
        project_->rename_chat(chat_id, title.toStdString());
        list_chats();
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Renaming the chat"), e));
    }
}

void StoreWorker::delete_chat(qint64 chat_id) {
    if (!project_)
        return;
    try {
        project_->delete_chat(chat_id);
        list_chats();
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Deleting the chat"), e));
    }
}

void StoreWorker::export_chat(qint64 chat_id, const QString& path) {
    if (!project_)
        return;
    try {
        QString title;
        for (const auto& c : project_->chats())
            if (c.id == chat_id)
                title = q(c.title);
        QSaveFile f(path);
        const QByteArray md = chat_markdown(title, message_rows(*project_, chat_id)).toUtf8();
        if (!f.open(QIODevice::WriteOnly) || f.write(md) != md.size() || !f.commit()) {
            emit error(QStringLiteral("Exporting the chat to %1 failed: %2. Nothing was written.")
                           .arg(path, f.errorString()));
            return;
        }
        emit chat_exported(chat_id, path);
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Exporting the chat"), e));
    }
}

} // namespace spanscope::gui
