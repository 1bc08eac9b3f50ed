#!/usr/bin/env bash
# Writes the seed corpora of the document-loader fuzz targets (text, html, gzip, zip, pdf) with
# tools independent of the loaders: iconv (encodings), gzip(1), pandoc (DOCX, ODT, EPUB from a
# small Markdown file), Python's zipfile (damaged containers, a ZIP bomb) and PDFs written
# object by object in Python (valid, damaged, encrypted-looking).
#
#   bash tests/fuzz/make_loader_seeds.sh [CORPUS_DIR]     (default: tests/fuzz/corpus)
#
# Every seed stays under 16 KiB. gzip is run with -n (no name, no time stamp) so that the
# output repeats byte for byte; pandoc's containers carry a date and differ from run to run,
# so the committed ones are one such run. Files already in the target folders (saved findings)
# are left alone. The project target's seeds are project files: make_project_seeds.sh.
set -euo pipefail
out=${1:-"$(dirname "$0")/corpus"}
for tool in iconv gzip pandoc python3; do
    command -v "$tool" >/dev/null || { echo "make_loader_seeds.sh: needs $tool" >&2; exit 1; }
done
mkdir -p "$out/text" "$out/html" "$out/gzip" "$out/zip"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- text ---------------------------------------------------------------------------------
t="$out/text"
printf 'Spanscope reads long documents.\nSecond line, caf\xc3\xa9 and na\xc3\xafve \xe2\x80\x94 done.\n\n\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80\n' >"$tmp/utf8.txt"
cp "$tmp/utf8.txt" "$t/utf8.txt"
printf '\xef\xbb\xbf' | cat - "$tmp/utf8.txt" >"$t/utf8_bom.txt"
printf 'line one\r\nline two\r\n\r\nline four\r\n' >"$t/crlf.txt"
for enc in UTF-16LE UTF-16BE UTF-32LE UTF-32BE; do
    lc=$(echo "$enc" | tr 'A-Z-' 'a-z_')
    iconv -f UTF-8 -t "$enc" "$tmp/utf8.txt" >"$tmp/body"
    case $enc in
    UTF-16LE) bom='\xff\xfe' ;;
    UTF-16BE) bom='\xfe\xff' ;;
    UTF-32LE) bom='\xff\xfe\x00\x00' ;;
    UTF-32BE) bom='\x00\x00\xfe\xff' ;;
    esac
    { printf "$bom"; cat "$tmp/body"; } >"$t/${lc}_bom.txt"
    case $enc in UTF-16*) cp "$tmp/body" "$t/${lc}_no_bom.txt" ;; esac
done
printf 'Na\xefve r\xe9sum\xe9 of the caf\xe9 \xe0 la carte, \xbd price.\nSecond line \xfc\xf6\xe4.\n' >"$t/latin1.txt"
printf '\x93Smart quotes\x94 and \x96 dashes \x80 in Windows-1252 text.\nMore \x85 here.\n' >"$t/cp1252.txt"
printf '日本語のテキストです。\nこれは二行目です。文書を読みます。\n' | iconv -f UTF-8 -t SHIFT_JIS >"$t/shift_jis.txt"
printf 'Русский текст для проверки кодировки.\nВторая строка.\n' | iconv -f UTF-8 -t KOI8-R >"$t/koi8r.txt"
printf 'text with a NUL\x00 byte inside\n' >"$t/nul_inside.txt"
printf 'valid start \xc3\x28 invalid \xed\xa0\x80 surrogate \xf4\x90\x80\x80 too big\n' >"$t/invalid_utf8.txt"
# A converted line longer than 4 KiB (one anchor per 4 KiB of it).
python3 -c 'import sys; sys.stdout.buffer.write(("Caf\xe9 " * 1200 + "\n").encode("latin-1"))' >"$t/latin1_long_line.txt"
printf '\x01\x02\x03\x04\x05\x06\x07\x08binary\x0e\x0f\x10\x11\x12\x13\x14' >"$t/control_bytes.txt"
printf '   \n\t\n' >"$t/whitespace_only.txt"

# --- html ---------------------------------------------------------------------------------
h="$out/html"
cat >"$h/page.html" <<'EOF'
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>A page</title>
<style>p { color: red }</style><script>var x = "<p>not text</p>";</script></head>
<body><h1>Heading</h1><p>First   paragraph with <b>bold</b>, <i>italic</i> and a
<a href="https://example.org">link</a>.</p><div>Line<br>break</div>
<pre>  kept   as
   written</pre><textarea>area  text</textarea><noscript>hidden</noscript>
<template><p>hidden</p></template></body></html>
EOF
cat >"$h/table.html" <<'EOF'
<html><body><table><caption>Numbers</caption>
<thead><tr><th>Name</th><th>Value</th></tr></thead>
<tbody><tr><td>alpha</td><td>1</td></tr><tr><td>beta<td>2<tr><td colspan=2>gamma</table>
<p>After the table.</p></body></html>
EOF
cat >"$h/lists.html" <<'EOF'
<html><body><ul><li>bullet one<li>bullet two<ul><li>nested</li></ul></li></ul>
<ol start="3"><li>three</li><li value="10">ten</li><li>eleven</li></ol>
<ol type="a"><li>a item</li><li>b item</li></ol><ol type="I" start="3998"><li>x</li><li>y</li><li>z</li></ol>
<ol type="i"><li></li><li>second</li></ol><dl><dt>term</dt><dd>definition</dd></dl></body></html>
EOF
cat >"$h/footnotes.html" <<'EOF'
<html xmlns:epub="http://www.idpf.org/2007/ops"><body>
<p>Text with a note<a epub:type="noteref" href="#n1">1</a> and another<a role="doc-noteref" href="#n2">2</a>,
a dangling one<a epub:type="noteref" href="#missing">3</a>.</p>
<aside epub:type="footnote" id="n1"><p>The first note. <a role="doc-backlink" href="#r1">&#8617;</a></p></aside>
<section role="doc-endnotes"><ol><li role="doc-endnote" id="n2"><p>The second note.</p></li></ol></section>
<div epub:type="rearnote" id="n3">Unreferenced note stays.</div></body></html>
EOF
cat >"$h/entities.html" <<'EOF'
<html><body><p>&lt;tag&gt; &amp; &quot;quoted&quot; &nbsp;&nbsp;spaced &copy; &eacute; &#233; &#x1F600; &#0; &#xD800; &#1114112; &bogus; &amp &lt</p></body></html>
EOF
printf '<html><body><p>unclosed <b>bold <i>both</p></b> text</i><div><span>open\n<table><tr><td>cell<p>para in cell</table></div><!-- comment --><![CDATA[cdata]]><?pi x?></html trailing' >"$h/broken.html"
printf '<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252"></head><body><p>\x93Quoted\x94 \x96 caf\xe9</p></body></html>' >"$h/meta_cp1252.html"
printf '<p>Undeclared caf\xe9 na\xefve r\xe9sum\xe9 in Latin-1, no head at all.</p>' >"$h/latin1_undeclared.html"
printf '<html><body><p>UTF-16 page \xc3\xa9</p></body></html>' | iconv -f UTF-8 -t UTF-16LE >"$tmp/body"
{ printf '\xff\xfe'; cat "$tmp/body"; } >"$h/utf16le_bom.html"
printf '<html><body><p>first</p></body></html>\x00<p>after NUL</p>' >"$h/nul.html"
python3 -c 'print("<div>" * 1200 + "deep" + "</div>" * 1200)' >"$h/deep_nesting.html"

# --- gzip ---------------------------------------------------------------------------------
g="$out/gzip"
gzip -9 -n -c "$t/utf8.txt" >"$g/utf8_text.gz"
gzip -9 -n -c "$t/latin1.txt" >"$g/latin1_text.gz"
gzip -9 -n -c "$h/footnotes.html" >"$g/footnotes_html.gz"
gzip -9 -n -c "$t/utf_16le_bom.txt" >"$g/utf16le_text.gz"
cat "$g/utf8_text.gz" "$g/latin1_text.gz" >"$g/two_members.gz"
{ cat "$g/utf8_text.gz"; printf 'trailing junk'; } >"$g/trailing_bytes.gz"
{ cat "$g/utf8_text.gz"; printf '\0\0\0\0'; } >"$g/trailing_zeros.gz"
head -c 30 "$g/footnotes_html.gz" >"$g/truncated.gz"
printf '' | gzip -n -c >"$g/empty_inside.gz"
# Decompression bombs: past the targets' 1 MiB limit in one member, and in many.
head -c $((4 << 20)) /dev/zero | tr '\0' 'a' | gzip -9 -n -c >"$g/bomb_4mib.gz"
head -c $((256 << 10)) /dev/zero | tr '\0' 'b' | gzip -9 -n -c >"$tmp/member.gz"
for _ in 1 2 3 4 5; do cat "$tmp/member.gz"; done >"$g/bomb_members.gz"
python3 - "$g/corrupt_crc.gz" "$g/utf8_text.gz" <<'EOF'
import sys
b = bytearray(open(sys.argv[2], "rb").read())
b[-8] ^= 0xFF  # CRC-32 of the member
open(sys.argv[1], "wb").write(bytes(b))
EOF

# --- zip (DOCX, ODT, EPUB) ----------------------------------------------------------------
z="$out/zip"
cat >"$tmp/doc.md" <<'EOF'
---
title: A small document
---

# Chapter one

Spanscope reads *long* documents.[^1] A list:

1. first
2. second
   - nested

| Name  | Value |
|-------|-------|
| alpha | 1     |

# Chapter two

Café text and a second note.[^2]

[^1]: The first footnote.
[^2]: The second footnote.
EOF
(cd "$tmp" && pandoc doc.md -o doc.docx && pandoc doc.md -o doc.odt && pandoc doc.md -o doc.epub)
cp "$tmp/doc.docx" "$z/pandoc.docx"
cp "$tmp/doc.odt" "$z/pandoc.odt"
cp "$tmp/doc.epub" "$z/pandoc.epub"
head -c 3000 "$tmp/doc.docx" >"$z/truncated.docx"
python3 - "$z" <<'EOF'
import sys, zipfile
z = sys.argv[1]
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
def write(name, entries, method=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(f"{z}/{name}", "w", method) as f:
        for n, data in entries:
            f.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), data, compress_type=method)
doc = f'<?xml version="1.0"?><w:document {W}><w:body><w:p><w:r><w:t>Hello</w:t></w:r></w:p></w:body></w:document>'
write("minimal.docx", [("word/document.xml", doc)])
# One entry inflating to 9 MiB (the target allows 8 MiB): refused as a ZIP bomb.
big = f'<?xml version="1.0"?><w:document {W}><w:body><w:p><w:r><w:t>' + "a" * (9 << 20) + "</w:t></w:r></w:p></w:body></w:document>"
write("bomb.docx", [("word/document.xml", big)])
odt = ('<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
       'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
       '<text:p>ODT without a mimetype</text:p></office:text></office:body></office:document-content>')
write("no_mimetype.odt", [("content.xml", odt)])
write("spreadsheet.ods", [("mimetype", "application/vnd.oasis.opendocument.spreadsheet"), ("content.xml", odt)], zipfile.ZIP_STORED)
container = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
             '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
opf = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>'
       '<item id="c1" href="ch%201.xhtml" media-type="application/xhtml+xml"/><item id="c2" href="../escape.xhtml" media-type="application/xhtml+xml"/>'
       '</manifest><spine><itemref idref="c1"/><itemref idref="c2"/><itemref idref="missing"/></spine></package>')
ch = '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Chapter text.</p></body></html>'
write("handmade.epub", [("mimetype", "application/epub+zip"), ("META-INF/container.xml", container),
                        ("OEBPS/content.opf", opf), ("OEBPS/ch 1.xhtml", ch)])
write("xlsx_like.docx", [("xl/workbook.xml", "<workbook/>")])
write("plain_archive.zip", [("readme.txt", "just a file")])
with open(f"{z}/empty_archive.zip", "wb") as f:
    f.write(b"PK\x05\x06" + b"\0" * 18)
EOF
ls -la "$out/text" "$out/html" "$out/gzip" "$out/zip" | awk '$5 > 16384 { print "too large:", $0; bad = 1 } END { exit bad }'

# --- pdf ----------------------------------------------------------------------------------
# Written object by object with Python (no PDF library): the byte offsets in each xref table
# are computed, so that the valid files are valid and the damaged ones damaged on purpose.
mkdir -p "$out/pdf"
python3 - "$out/pdf" <<'EOF'
import sys, zlib
d = sys.argv[1]

def pdf(objects, trailer_extra=b"", version=b"1.4", xref=True, tail=b""):
    """objects: the bodies of objects 1..n (bytes); object 1 is the catalog."""
    out = bytearray(b"%PDF-" + version + b"\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    start = len(out)
    if xref:
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
        for o in offsets:
            out += b"%010d 00000 n \n" % o
    out += b"trailer\n<< /Size %d /Root 1 0 R " % (len(objects) + 1) + trailer_extra + b">>\n"
    out += b"startxref\n%d\n%%%%EOF\n" % start + tail
    return bytes(out)

def stream(data, extra=b""):
    return b"<< /Length %d " % len(data) + extra + b">>\nstream\n" + data + b"\nendstream"

FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"

def text_ops(lines, size=12):
    ops = b"BT /F1 %d Tf 72 720 Td %d TL\n" % (size, size + 2)
    for l in lines:
        ops += b"(" + l + b") Tj T*\n"
    return ops + b"ET"

def document(pages, **kw):
    """pages: a list of content streams (None: a page without content)."""
    n = len(pages)
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", None, FONT]
    kids = []
    for content in pages:
        page_no = len(objs) + 1
        kids.append(b"%d 0 R" % page_no)
        page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
        if content is None:
            objs.append(page + b" >>")
        else:
            objs.append(page + b" /Contents %d 0 R >>" % (page_no + 1))
            objs.append(content)
    objs[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % n
    return pdf(objs, **kw)

def write(name, data):
    open(f"{d}/{name}", "wb").write(data)

one = stream(text_ops([b"Spanscope reads long documents.", b"Caf\xe9 na\xefve \x93quoted\x94 \x96 done."]))
two = stream(text_ops([b"The second page.", b"(Parentheses \\( escaped \\)) and \\\\ a backslash."]))
write("one_page.pdf", document([one]))
write("two_pages.pdf", document([one, two]))
write("empty_page_between.pdf", document([one, None, two]))
write("only_empty_page.pdf", document([None]))
write("no_pages.pdf", pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]))
write("flate_content.pdf", document([stream(zlib.compress(text_ops([b"Compressed content stream."] * 20)), b"/Filter /FlateDecode ")]))
full = document([one, two])
write("truncated.pdf", full[: len(full) * 2 // 3])
write("no_xref.pdf", document([one], xref=False))
# Every xref offset shifted: poppler rebuilds the table by scanning for "n 0 obj".
damaged = bytearray(full)
i = damaged.index(b"xref\n")
for k in range(i, len(damaged) - 1):
    if damaged[k:k + 2] == b"00" and damaged[k - 1:k] == b"\n":
        damaged[k + 9] = ord("7")
write("xref_damaged.pdf", bytes(damaged))
write("startxref_wrong.pdf", full.replace(b"startxref\n", b"startxref\n9").replace(b"%%EOF", b"%%EOF"))
# A Standard security handler dictionary (RC4, 40-bit) whose keys are not those of any password.
enc = b"/Encrypt << /Filter /Standard /V 1 /R 2 /O <" + b"28BF4E5E4E758A41" * 4 + b"> /U <" + b"00" * 32 + b"> /P -44 >> /ID [<0123456789abcdef0123456789abcdef> <0123456789abcdef0123456789abcdef>] "
write("encrypted_looking.pdf", document([one], trailer_extra=enc))
# A font whose ToUnicode CMap maps one byte to three characters, and text in hex strings.
cmap = (b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /T def "
        b"1 begincodespacerange <00> <FF> endcodespacerange 2 beginbfchar <41> <00660066> <42> <00e9> endbfchar "
        b"1 beginbfrange <61> <7a> <0061> endbfrange endcmap CMapName currentdict /CMap defineresource pop end end")
objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        stream(b"BT /F1 12 Tf 72 720 Td <41426869> Tj (ABabc) Tj ET"), stream(cmap)]
write("tounicode.pdf", pdf(objs))
# Rotated page, an annotation, an outline and an info dictionary.
objs = [b"<< /Type /Catalog /Pages 2 0 R /Outlines 6 0 R >>", b"<< /Type /Pages /Kids [4 0 R] /Count 1 /Rotate 90 >>", FONT,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R /Annots [<< /Type /Annot /Subtype /Text /Rect [0 0 10 10] /Contents (note) >>] >>",
        one, b"<< /Type /Outlines /Count 0 >>", b"<< /Title (A title) /Author (Someone) >>"]
write("rotated_annotated.pdf", pdf(objs, trailer_extra=b"/Info 7 0 R "))
# Two revisions: an incremental update that replaces the page's content.
base = document([one])
new_content = stream(text_ops([b"Updated in a second revision."]))
prev = base.rindex(b"startxref\n") + len(b"startxref\n")
prev_off = int(base[prev:base.index(b"\n", prev)])
off = len(base)
upd = base + b"5 0 obj\n" + new_content + b"\nendobj\n"
x = len(upd)
upd += b"xref\n0 1\n0000000000 65535 f \n5 1\n%010d 00000 n \ntrailer\n<< /Size 6 /Root 1 0 R /Prev %d >>\nstartxref\n%d\n%%%%EOF\n" % (off, prev_off, x)
write("incremental_update.pdf", upd)
# A page tree with a nested Pages node and a kid that loops back to the root.
objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [6 0 R 2 0 R] /Count 2 >>", FONT,
        b"<< /Type /Page /Parent 6 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        one, b"<< /Type /Pages /Parent 2 0 R /Kids [4 0 R] /Count 1 >>"]
write("page_tree_loop.pdf", pdf(objs))
# Junk before the header (poppler accepts up to 1 KiB of it) and a header of another version.
write("junk_before_header.pdf", b"junk line\n" * 10 + document([one], version=b"1.7"))
EOF
ls -la "$out/pdf" | awk '$5 > 16384 { print "too large:", $0; bad = 1 } END { exit bad }'
