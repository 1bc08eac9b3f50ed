#include "ui/store_worker.h"

#include "answering/chat_history.h"
#include "answering/document_list.h"
#include "storage/project.h"
#include "storage/sqlite_db.h"
#include "ui/answer_citations.h"
#include "ui/answer_stats_json.h"
#include "ui/chat_export.h"
#include "ui/error_text.h"

#include <QFile>
#include <QLocale>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace spanscope::gui {

namespace {
QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// Write `bytes` to `path` whole or not at all: into a new file beside it (created with mode
// 0666 less the umask, or the mode of the file it replaces), every write() checked (a short
// write is an error: QSaveFile took a write cut short by a full disk or a file size limit for
// success and renamed the truncated file into place), synced, renamed over the target and the
// folder synced. A symbolic link is followed: its target is replaced and the link kept. On
// failure the temporary file is removed and `why` says what happened.
bool write_file_whole(const QString& path, const QByteArray& bytes, QString* why) {
    QByteArray target = QFile::encodeName(path);
    struct stat link {};
    if (::lstat(target.constData(), &link) == 0 && S_ISLNK(link.st_mode)) {
        char* real = ::realpath(target.constData(), nullptr);
        if (!real) {
            *why = QStringLiteral("the link's target cannot be found (%1)")
                       .arg(QString::fromLocal8Bit(std::strerror(errno)));
            return false;
        }
        target = real;
        std::free(real);
    }
    const qsizetype slash = target.lastIndexOf('/');
    const QByteArray folder =
        slash < 0 ? QByteArray(".") : target.left(std::max<qsizetype>(slash, 1));
    struct stat st {};
    const bool replaces = ::stat(target.constData(), &st) == 0;
    QByteArray tmp;
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
        tmp = target + '.' + QByteArray::number(::getpid()) + '.' + QByteArray::number(attempt);
        fd = ::open(tmp.constData(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        *why = QString::fromLocal8Bit(std::strerror(errno));
        return false;
    }
    int err = 0;
    if (replaces && ::fchmod(fd, st.st_mode & 07777) != 0)
        err = errno;
    const char* p = bytes.constData();
    qint64 left = bytes.size();
    while (left > 0 && err == 0) {
        const ssize_t n = ::write(fd, p, static_cast<size_t>(left));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        p += n;
        left -= n;
    }
    if (err == 0 && ::fsync(fd) != 0)
        err = errno;
    if (::close(fd) != 0 && err == 0)
        err = errno;
    if (err == 0 && ::rename(tmp.constData(), target.constData()) != 0)
        err = errno;
    if (err == 0) {
        // The rename itself is kept only once the folder is synced. The file is whole and in
        // place either way; some file systems cannot sync a folder (EINVAL), so a failure here
        // is no failed export.
        const int dir = ::open(folder.constData(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir >= 0) {
            ::fsync(dir);
            ::close(dir);
        }
        return true;
    }
    ::unlink(tmp.constData());
    if (err == ENOSPC || err == EDQUOT || err == EFBIG)
        *why = q(no_room_text(err, "the file"));
    else
        *why = QString::fromLocal8Bit(std::strerror(err));
    return false;
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
        std::vector<std::pair<int64_t, int>> pages;
        for (const auto& a : project_->document_offset_map(id))
            pages.emplace_back(a.text_offset, a.page);
        auto shown = shown_text(project_->document_text(id), pages, doc->ocr_pages);
        emit document_text(id, q(doc->name), shown.text,
                           std::make_shared<const TextPositions>(std::move(shown.positions)));
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Showing document %1").arg(id), e));
    }
}

void StoreWorker::load_zoom_trace(qint64 message_id) {
    if (!project_)
        return;
    try {
        const auto blob = project_->zoom_trace(message_id);
        if (!blob) {
            emit zoom_trace_loaded(message_id, nullptr,
                                   QStringLiteral("This answer has no zoom trace: it was answered "
                                                  "with the full memory policy (choose sekv in "
                                                  "Settings to see where answers zoom in)."));
            return;
        }
        emit zoom_trace_loaded(
            message_id, std::make_shared<const AnswerZoom>(message_id, decode_zoom_trace(*blob)),
            QString());
    } catch (const std::exception& e) {
        emit zoom_trace_loaded(
            message_id, nullptr,
            QStringLiteral("The zoom trace of this answer cannot be shown: %1. The answer itself "
                           "is kept.")
                .arg(q(e.what())));
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
    const QString reason = str("stop_reason");
    if (reason == "error")
        return QStringLiteral("no answer: %1").arg(str("error"));
    if (!j.contains("ttft_ms"))
        return reason == "stopped" ? QStringLiteral("stopped before the answer began") : QString();
    const AnswerStats s = answer_stats_from_json(j);
    return stats_text(s) + stop_reason_text(reason, s.generated_tokens);
}

QString message_policy(const std::string& stats_json, qint64* full_kv_bytes) {
    const auto j = nlohmann::json::parse(stats_json, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("policy") || !j["policy"].is_string())
        return {};
    if (full_kv_bytes && j.contains("memory") && j["memory"].is_object() &&
        j["memory"].contains("full_kv_bytes") && j["memory"]["full_kv_bytes"].is_number())
        *full_kv_bytes = j["memory"]["full_kv_bytes"].get<qint64>();
    return q(j["policy"].get<std::string>());
}

namespace {
// The chat's messages, with a note line before each question where its history started afresh
// under another model (history_restarts).
QList<MessageRow> message_rows(Project& project, qint64 chat_id) {
    QList<MessageRow> rows;
    const auto messages = project.messages(chat_id);
    const auto restarts = history_restarts(messages);
    const auto documents = project.documents(); // the sources' names and formats
    size_t next = 0;
    for (size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        for (; next < restarts.size() && restarts[next].message == i; ++next) {
            MessageRow n;
            n.note = true;
            n.text = history_note_text(q(restarts[next].before.shown()),
                                       q(restarts[next].after.shown()));
            rows << n;
        }
        MessageRow r;
        r.id = m.id;
        r.from_user = m.role == "user";
        r.text = q(m.text);
        if (!r.from_user) {
            r.details = message_details(m.stats_json);
            r.sekv = message_policy(m.stats_json, &r.full_kv_bytes) == QLatin1String("sekv");
            const auto model = answer_model(m.stats_json);
            r.model_id = q(model.id);
            r.model_shown = q(model.shown());
            r.citations = citations_of(m.sources, documents);
            r.token_citations = token_citations_of(m.token_sources, documents);
        }
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
        const QByteArray md = chat_markdown(title, message_rows(*project_, chat_id)).toUtf8();
        QString why;
        if (!write_file_whole(path, md, &why)) {
            emit error(QStringLiteral("Exporting the chat to %1 failed: %2. Nothing was written.")
                           .arg(path, why));
            return;
        }
        emit chat_exported(chat_id, path);
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Exporting the chat"), e));
    }
}

void StoreWorker::save_document_list(const QList<qint64>& order, const QList<qint64>& excluded) {
    if (!project_)
        return;
    try {
        DocumentListState state;
        state.order.assign(order.begin(), order.end());
        state.excluded.assign(excluded.begin(), excluded.end());
        set_project_document_list(*project_, state);
    } catch (const std::exception& e) {
        emit error(describe_error(QStringLiteral("Keeping the document order"), e));
    }
}

} // namespace spanscope::gui
