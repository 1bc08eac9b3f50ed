// The main window's sources (docs/desktop-app.md, "Sources"): a citation under an answer,
// clicked, shows its document with the passage highlighted and scrolled into view.
#include "ui/main_window.h"

#include "ui/document_view.h"

#include <QListView>

namespace spanscope::gui {

void MainWindow::show_citation(qint64 message_id, int citation) {
    const int row = chat_.row_of_message(message_id);
    if (row < 0 || citation < 0 || citation >= shown_citations(chat_.messages()[row]).size())
        return;
    const Citation c = shown_citations(chat_.messages()[row])[citation];
    if (documents_.row_of_id(c.document_id) < 0) {
        const QString name =
            c.removed ? tr("document %1").arg(QString::number(c.document_id)) : c.document;
        // Short: the status bar shares its width with the model's and memory's fields.
        show_status(tr("The cited document, %1, was removed from the project.").arg(name), 10000);
        return;
    }
    cited_ = {message_id, citation, c.document_id, c.start_char, c.end_char};
    chat_.select_citation(message_id, citation);
    conversation_->scrollTo(chat_.index(row));
    if (shown_document_ == c.document_id && document_view_->document_id() == c.document_id)
        draw_citation();
    else
        show_document(c.document_id); // on_document_text draws it
}

void MainWindow::draw_citation() {
    if (cited_.message_id == 0 || document_view_->document_id() != cited_.document_id)
        return;
    if (!document_view_->show_citation(cited_.begin, cited_.end)) {
        show_status(tr("The cited passage (bytes %1 to %2) is not in the document's text as "
                       "stored now.")
                        .arg(cited_.begin)
                        .arg(cited_.end),
                    10000);
        return;
    }
    emit citation_shown(cited_.message_id, cited_.citation);
}

void MainWindow::clear_citation() {
    if (cited_.message_id == 0)
        return;
    cited_ = {};
    chat_.select_citation(0, -1);
    document_view_->clear_citation();
}

} // namespace spanscope::gui
