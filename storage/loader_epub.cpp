#include "storage/loader_epub.h"

#include "storage/loader_html.h"
#include "storage/xml_tree.h"
#include "storage/zip_container.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace spanscope {

namespace {

constexpr std::string_view kContainer = "urn:oasis:names:tc:opendocument:xmlns:container";
constexpr std::string_view kOpf = "http://www.idpf.org/2007/opf";
constexpr std::string_view kXmlEnc = "http://www.w3.org/2001/04/xmlenc#";
constexpr const char* kWhat = "EPUB book";

/// Percent-decoding of a URL path ("Chapter%201.xhtml"); a malformed escape stays as written.
std::string percent_decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        const auto hex = [](char c) {
            return c >= '0' && c <= '9'   ? c - '0'
                   : c >= 'a' && c <= 'f' ? c - 'a' + 10
                   : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : -1;
        };
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

/// `href` (relative to the folder `base`, "" for the root) as a name in the archive: fragment
/// dropped, percent escapes decoded, "." and ".." resolved (never above the root).
std::string resolve(const std::string& base, std::string href) {
    if (const auto hash = href.find('#'); hash != std::string::npos)
        href.resize(hash);
    href = percent_decode(href);
    std::vector<std::string> parts;
    const std::string joined = href.starts_with("/") ? href.substr(1) : base + href;
    size_t start = 0;
    for (;;) {
        const size_t slash = joined.find('/', start);
        const std::string part = joined.substr(start, slash - start);
        if (part == "..") {
            if (!parts.empty())
                parts.pop_back();
        } else if (!part.empty() && part != ".") {
            parts.push_back(part);
        }
        if (slash == std::string::npos)
            break;
        start = slash + 1;
    }
    std::string out;
    for (const auto& p : parts)
        out += (out.empty() ? "" : "/") + p;
    return out;
}

/// The archive names META-INF/encryption.xml lists with a real cipher (fonts obfuscated by the
/// IDPF or Adobe algorithm are not encrypted text).
std::set<std::string> encrypted_entries(const std::string& path, ZipContainer& zip) {
    std::set<std::string> out;
    const auto bytes = zip.read("META-INF/encryption.xml");
    if (!bytes)
        return out;
    const XmlDocPtr doc = parse_xml(path, "META-INF/encryption.xml", *bytes, kWhat);
    for (const xmlNode* d = xmlDocGetRootElement(doc.get())->children; d; d = d->next) {
        if (!is_element(d, kXmlEnc, "EncryptedData"))
            continue;
        const std::string algorithm =
            attribute(child_element(d, kXmlEnc, "EncryptionMethod"), "", "Algorithm");
        if (algorithm == "http://www.idpf.org/2008/embedding" ||
            algorithm == "http://ns.adobe.com/pdf/enc#RC")
            continue;
        const xmlNode* ref =
            child_element(child_element(d, kXmlEnc, "CipherData"), kXmlEnc, "CipherReference");
        if (ref)
            out.insert(resolve("", attribute(ref, "", "URI")));
    }
    return out;
}

} // namespace

LoadedDocument load_epub(const std::string& path, ZipContainer& zip) {
    const std::string container_xml = zip.read_required("META-INF/container.xml", "an EPUB book");
    const XmlDocPtr container = parse_xml(path, "META-INF/container.xml", container_xml, kWhat);
    const xmlNode* rootfiles =
        child_element(xmlDocGetRootElement(container.get()), kContainer, "rootfiles");
    std::string opf_name;
    for (const xmlNode* r = rootfiles ? rootfiles->children : nullptr; r; r = r->next)
        if (is_element(r, kContainer, "rootfile")) {
            opf_name = resolve("", attribute(r, "", "full-path"));
            break;
        }
    if (opf_name.empty())
        throw DocumentError(path + ": is a damaged EPUB book (META-INF/container.xml names no "
                                   "package document)");
    const std::string opf_xml = zip.read_required(opf_name, "an EPUB book");
    const XmlDocPtr opf = parse_xml(path, opf_name, opf_xml, kWhat);
    const xmlNode* package = xmlDocGetRootElement(opf.get());
    const std::string base = opf_name.substr(0, opf_name.rfind('/') + 1); // "" at the root

    struct Item {
        std::string name, media_type;
    };
    std::map<std::string, Item> manifest; // by id
    if (const xmlNode* m = child_element(package, kOpf, "manifest"))
        for (const xmlNode* c = m->children; c; c = c->next)
            if (is_element(c, kOpf, "item"))
                manifest[attribute(c, "", "id")] = {resolve(base, attribute(c, "", "href")),
                                                    attribute(c, "", "media-type")};
    const xmlNode* spine = child_element(package, kOpf, "spine");
    if (!spine)
        throw DocumentError(path + ": is a damaged EPUB book (" + opf_name + " has no spine)");
    const std::set<std::string> encrypted = encrypted_entries(path, zip);

    LoadedDocument out;
    out.format = DocumentFormat::Epub;
    out.source_encoding = "UTF-8";
    int64_t lines_before = 0, bytes_before = 0;
    int documents = 0;
    // Each document at its first place in the spine only: a spine naming one chapter many
    // times (a few bytes per itemref, compressed to less) would multiply its text.
    std::set<std::string> placed;
    for (const xmlNode* ref = spine->children; ref; ref = ref->next) {
        if (!is_element(ref, kOpf, "itemref"))
            continue;
        const auto it = manifest.find(attribute(ref, "", "idref"));
        if (it == manifest.end())
            continue;
        const Item& item = it->second;
        if (item.media_type != "application/xhtml+xml" && item.media_type != "text/html")
            continue;
        if (!placed.insert(item.name).second)
            continue; // read already (two itemrefs or two manifest items naming it)
        if (encrypted.count(item.name))
            throw DocumentError(path + ": is encrypted (DRM: " + item.name +
                                "); Spanscope reads EPUB books without DRM");
        const auto bytes = zip.read(item.name);
        if (!bytes)
            continue; // a spine entry the archive lacks: the book's other documents stand
        ++documents;
        LoadedDocument part = load_html(path + ": " + item.name, *bytes);
        if (part.text.find_first_not_of(" \t\n") != std::string::npos) {
            if (!out.text.empty())
                out.text += "\n\n";
            const auto shift = static_cast<int64_t>(out.text.size());
            if (part.offset_map.empty() || part.offset_map.front().text_offset != 0)
                part.offset_map.insert(part.offset_map.begin(), SourceAnchor{0, 0, 0, 1});
            for (SourceAnchor a : part.offset_map) {
                a.text_offset += shift;
                a.source_offset += bytes_before;
                a.line =
                    a.line > 0
                        ? static_cast<int32_t>(std::min<int64_t>(a.line + lines_before, INT32_MAX))
                        : 0;
                out.offset_map.push_back(a);
            }
            out.text += part.text;
        }
        lines_before += std::count(bytes->begin(), bytes->end(), '\n') + 1;
        bytes_before += static_cast<int64_t>(bytes->size());
    }
    if (documents == 0)
        throw DocumentError(path + ": is a damaged EPUB book (its spine names no document the "
                                   "archive holds)");
    return out;
}

} // namespace spanscope
