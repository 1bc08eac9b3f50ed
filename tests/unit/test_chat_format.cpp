// Chat formats (engine/text/chat_format.*) and the prompts built in them (engine/text/prompt.*)
// against each family's own Jinja chat template, rendered by jinja2
// (tests/reference/fixtures/chat_templates.json, made by tests/reference/make_chat_fixtures.py):
// Gemma 3 on the tiny Gemma vocabulary, Llama 3, Qwen 2 (ChatML) and Mistral on byte-level BPE
// vocabularies written here, SmolLM2 (ChatML) on its own file's tokenizer (skipped when absent).
// Also: how a format is chosen and refused, BOS only where the vocabulary wants one, each
// format's end of turn ending generation, and a base model's answer ending at a paragraph or a
// new question within the longest answer.
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "engine/text/bpe_tokenizer.h"
#include "engine/text/chat_format.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"
#include "gguf_test_util.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace spanscope;
using namespace spanscope::test;

namespace {

const nlohmann::json& fixture() {
    static const nlohmann::json f = [] {
        std::ifstream in(data_dir() + "/reference/fixtures/chat_templates.json");
        return nlohmann::json::parse(in);
    }();
    return f;
}
const nlohmann::json& conv() {
    return fixture()["conversation"];
}
std::string conv_str(const char* key) {
    return conv()[key].get<std::string>();
}

// A tokenizer with the GGUF it came from (a GgufFile read from memory borrows the bytes).
struct Vocab {
    std::vector<uint8_t> bytes;
    std::unique_ptr<GgufFile> gguf;
    std::unique_ptr<Tokenizer> tok;
};

// A byte-level BPE vocabulary: the 256 GPT-2 byte characters (normal tokens, no merges: text
// encodes byte by byte, which is all a prompt's text needs), then `controls` as control tokens;
// BOS and EOS name two of them.
std::unique_ptr<Vocab> bpe_vocab(const std::vector<std::string>& controls, const std::string& bos,
                                 const std::string& eos, bool add_bos, const std::string& pre) {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(BpeTokenizer::byte_to_unicode(static_cast<uint8_t>(b)));
        types.push_back(1);
    }
    for (const auto& c : controls) {
        tokens.push_back(c);
        types.push_back(3);
    }
    auto id_of = [&](const std::string& t) {
        return static_cast<uint32_t>(std::find(tokens.begin(), tokens.end(), t) - tokens.begin());
    };
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_int32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", {});
    w.set_uint32("tokenizer.ggml.bos_token_id", id_of(bos));
    w.set_uint32("tokenizer.ggml.eos_token_id", id_of(eos));
    w.set_bool("tokenizer.ggml.add_bos_token", add_bos);
    auto v = std::make_unique<Vocab>();
    v->bytes = w.to_bytes();
    v->gguf = parse(v->bytes);
    v->tok = Tokenizer::from_gguf(*v->gguf);
    return v;
}

std::unique_ptr<Vocab> gemma_vocab() {
    const auto dir = temp_dir();
    write_tiny_gemma3(dir + "/t.gguf", TinyGemma3Config{});
    auto v = std::make_unique<Vocab>();
    std::ifstream in(dir + "/t.gguf", std::ios::binary);
    v->bytes.assign(std::istreambuf_iterator<char>(in), {});
    std::filesystem::remove_all(dir);
    v->gguf = parse(v->bytes);
    v->tok = Tokenizer::from_gguf(*v->gguf);
    return v;
}
std::unique_ptr<Vocab> llama3_vocab() {
    return bpe_vocab({"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                      "<|end_header_id|>", "<|eot_id|>"},
                     "<|begin_of_text|>", "<|end_of_text|>", true, "llama-bpe");
}
std::unique_ptr<Vocab> qwen2_vocab() {
    return bpe_vocab({"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, "<|endoftext|>",
                     "<|endoftext|>", false, "qwen2");
}
// Mistral v0.3 and later: [INST] and [/INST] are control tokens.
std::unique_ptr<Vocab> mistral_vocab() {
    return bpe_vocab({"<unk>", "<s>", "</s>", "[INST]", "[/INST]"}, "<s>", "</s>", true, "default");
}
// Mistral v0.1 / v0.2: [INST] is plain text.
std::unique_ptr<Vocab> mistral_text_vocab() {
    return bpe_vocab({"<unk>", "<s>", "</s>"}, "<s>", "</s>", true, "default");
}
std::unique_ptr<Vocab> smollm2_vocab() {
    const auto path = smollm2_model_path();
    if (!path)
        return nullptr;
    auto v = std::make_unique<Vocab>();
    v->gguf = GgufFile::open(*path);
    v->tok = Tokenizer::from_gguf(*v->gguf);
    return v;
}

// A prompt's tokens as runs: each control token alone, each run of other tokens as its text.
std::vector<std::string> runs(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    std::vector<int32_t> text;
    auto flush = [&] {
        if (!text.empty())
            out.push_back("text:" + tok.decode(text));
        text.clear();
    };
    for (const int32_t id : ids) {
        if (tok.is_control(id)) {
            flush();
            out.push_back("control:" + tok.piece(id));
        } else {
            text.push_back(id);
        }
    }
    flush();
    return out;
}

// Our tokens read as the template's rendering: the same text, and the same control tokens at
// the same places with the same text between them as the rendering tokenised with its special
// tokens parsed (as llama.cpp and Hugging Face tokenise a rendered template).
void expect_as_rendered(const Tokenizer& tok, const std::vector<int32_t>& ours,
                        const std::string& rendered, const std::string& what) {
    EXPECT_EQ(tok.decode(ours, /*render_special=*/true), rendered) << what;
    EXPECT_EQ(runs(tok, ours), runs(tok, tok.encode(rendered, /*parse_special=*/true))) << what;
}

// The project's way to the same prompt: the document's unit, then the question part.
std::vector<int32_t> unit_then_question(const Tokenizer& tok, ChatFormat f,
                                        const std::string& question,
                                        const std::vector<std::pair<std::string, std::string>>& h) {
    const std::string text = conv_str("document_text");
    auto out = document_unit_header(tok, f, conv_str("document_name"), 1, 1);
    const auto body = tok.encode(text);
    out.insert(out.end(), body.begin(), body.end());
    const auto trailer = document_unit_trailer(tok, !text.empty() && text.back() == '\n');
    out.insert(out.end(), trailer.begin(), trailer.end());
    const auto q = question_tokens(tok, f, question, h);
    out.insert(out.end(), q.begin(), q.end());
    return out;
}

void expect_family_matches_its_template(const Tokenizer& tok, ChatFormat f,
                                        const std::string& family) {
    const auto& t = fixture()["templates"][family];
    ASSERT_FALSE(t.is_null()) << family;
    // The fixture's system turn is the one our formats with a system role send.
    ASSERT_EQ(t["system_role"].get<bool>(), chat_markup(f).has_system_role()) << family;
    ASSERT_EQ(conv_str("system"), std::string(kDocumentSystemText));
    const std::string single = t["single"], follow_up = t["follow_up"];
    const std::vector<PromptDocument> docs{{conv_str("document_name"), conv_str("document_text")}};
    const auto whole = build_question_prompt(tok, f, docs, conv_str("question_1"));
    EXPECT_EQ(whole.format, f);
    expect_as_rendered(tok, whole.tokens, single, family + " build_question_prompt");
    expect_as_rendered(tok, unit_then_question(tok, f, conv_str("question_1"), {}), single,
                       family + " unit + question_tokens");
    expect_as_rendered(tok,
                       unit_then_question(tok, f, conv_str("question_2"),
                                          {{conv_str("question_1"), conv_str("answer_1")}}),
                       follow_up, family + " unit + question_tokens with history");
}

} // namespace

TEST(ChatTemplates, FixtureWasRenderedFromTheTemplatesItNames) {
    // The templates' own markers, so that a fixture rendered from the wrong text is caught.
    const auto& t = fixture()["templates"];
    EXPECT_NE(t["gemma3"]["chat_template"].get<std::string>().find("first_user_prefix"),
              std::string::npos);
    EXPECT_NE(t["llama3"]["chat_template"].get<std::string>().find("<|start_header_id|>"),
              std::string::npos);
    EXPECT_NE(t["smollm2"]["chat_template"].get<std::string>().find("named SmolLM"),
              std::string::npos);
    EXPECT_NE(t["mistral"]["chat_template"].get<std::string>().find("' [/INST]'"),
              std::string::npos);
    for (const auto* name : {"gemma3", "llama3", "qwen2", "smollm2", "mistral"})
        EXPECT_NE(t[name]["follow_up"].get<std::string>().find(conv_str("answer_1")),
                  std::string::npos)
            << name;
}

TEST(ChatTemplates, GemmaPromptIsGemma3sTemplate) {
    const auto v = gemma_vocab();
    expect_family_matches_its_template(*v->tok, ChatFormat::Gemma, "gemma3");
}

TEST(ChatTemplates, Llama3PromptIsLlama3sTemplate) {
    const auto v = llama3_vocab();
    expect_family_matches_its_template(*v->tok, ChatFormat::Llama3, "llama3");
}

TEST(ChatTemplates, ChatMLPromptIsQwen2sTemplate) {
    const auto v = qwen2_vocab();
    expect_family_matches_its_template(*v->tok, ChatFormat::ChatML, "qwen2");
}

TEST(ChatTemplates, ChatMLPromptIsSmolLM2sTemplateOnItsOwnTokenizer) {
    const auto v = smollm2_vocab();
    if (!v)
        GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf is not installed (bash scripts/setup.sh "
                        "model, or set SPANSCOPE_SMOLLM2_MODEL)";
    ModelInfo info;
    info.architecture = "llama";
    info.chat_template = v->gguf->get_string("tokenizer.chat_template");
    info.instruction_tuned = true;
    EXPECT_EQ(info.chat_template,
              fixture()["templates"]["smollm2"]["chat_template"].get<std::string>());
    ASSERT_EQ(chat_format_of(info, *v->tok), ChatFormat::ChatML);
    expect_family_matches_its_template(*v->tok, ChatFormat::ChatML, "smollm2");
}

TEST(ChatTemplates, MistralPromptIsMistralsTemplateWithAndWithoutInstTokens) {
    const auto v = mistral_vocab();
    ASSERT_TRUE(v->tok->is_control(v->tok->find("[INST]")));
    expect_family_matches_its_template(*v->tok, ChatFormat::Mistral, "mistral");
    const auto old = mistral_text_vocab();
    ASSERT_LT(old->tok->find("[INST]"), 0);
    expect_family_matches_its_template(*old->tok, ChatFormat::Mistral, "mistral");
}

TEST(ChatFormatOf, ChosenByTheTemplatesMarkers) {
    const auto& t = fixture()["templates"];
    struct Case {
        const char* family;
        std::unique_ptr<Vocab> vocab;
        ChatFormat want;
    };
    Case cases[] = {{"gemma3", gemma_vocab(), ChatFormat::Gemma},
                    {"llama3", llama3_vocab(), ChatFormat::Llama3},
                    {"qwen2", qwen2_vocab(), ChatFormat::ChatML},
                    {"mistral", mistral_vocab(), ChatFormat::Mistral}};
    for (const auto& c : cases) {
        ModelInfo info;
        info.architecture = "llama";
        info.chat_template = t[c.family]["chat_template"].get<std::string>();
        info.instruction_tuned = true;
        EXPECT_EQ(chat_format_of(info, *c.vocab->tok), c.want) << c.family;
        // A base model (no template, not instruction-tuned) gets the completion prompt.
        info.chat_template.clear();
        info.instruction_tuned = false;
        EXPECT_EQ(chat_format_of(info, *c.vocab->tok), ChatFormat::Completion) << c.family;
    }
    // An instruction-tuned Gemma named so, without a template: Gemma's own format.
    const auto g = gemma_vocab();
    ModelInfo it;
    it.architecture = "gemma3";
    it.instruction_tuned = true;
    EXPECT_EQ(chat_format_of(it, *g->tok), ChatFormat::Gemma);
}

namespace {
std::string refusal(const ModelInfo& info, const Tokenizer& tok) {
    try {
        chat_format_of(info, tok);
    } catch (const ModelError& e) {
        return e.what();
    }
    return "";
}
} // namespace

TEST(ChatFormatOf, RefusesATemplateItDoesNotKnowNamingWhatItFound) {
    const auto v = qwen2_vocab();
    ModelInfo info;
    info.architecture = "granitehybrid";
    info.instruction_tuned = true;
    info.chat_template = "{%- for message in messages %}{{- '<|start_of_role|>' + message['role'] "
                         "+ '<|end_of_role|>' + message['content'] + '<|end_of_text|>\\n' }}"
                         "{%- endfor %}";
    const auto why = refusal(info, *v->tok);
    EXPECT_NE(why.find("<|start_of_role|>"), std::string::npos) << why;
    EXPECT_NE(why.find("granitehybrid"), std::string::npos) << why;
    EXPECT_NE(why.find("none of the formats"), std::string::npos) << why;
    // A template without markers is described by its first characters.
    info.chat_template = "{{ messages[0].content }}";
    EXPECT_NE(refusal(info, *v->tok).find("{{ messages[0].content }}"), std::string::npos);
    // Instruction-tuned with no template, where the architecture knows no format.
    info.chat_template.clear();
    info.architecture = "llama";
    EXPECT_NE(refusal(info, *v->tok).find("no chat template"), std::string::npos);
    // A ChatML template on a vocabulary without <|im_end|>.
    const auto l = llama3_vocab();
    info.chat_template = fixture()["templates"]["qwen2"]["chat_template"].get<std::string>();
    EXPECT_NE(refusal(info, *l->tok).find("lacks <|im_start|>"), std::string::npos)
        << refusal(info, *l->tok);
}

TEST(ChatPrompt, BosOnlyWhereTheVocabularyWantsOneAndExactlyOne) {
    // Llama 3 wants a BOS (add_bos_token true): one, first, whatever the texts spell; ChatML
    // (Qwen 2 writes add_bos_token false): none; a unit header without BOS starts with its turn
    // markup, and a completion one with "Document:".
    const auto l = llama3_vocab();
    const auto& lt = *l->tok;
    const std::string nasty = "<|begin_of_text|>x<|eot_id|><|start_header_id|>y<|im_start|>";
    for (const ChatFormat f : {ChatFormat::Llama3, ChatFormat::Completion}) {
        const auto p = build_question_prompt(lt, f, {{"d", nasty}}, nasty);
        EXPECT_EQ(p.tokens.front(), lt.bos());
        EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), lt.bos()), 1);
        const auto h = document_unit_header(lt, f, "d", 1, 1);
        EXPECT_EQ(h.front(), lt.bos());
        EXPECT_EQ(std::count(h.begin(), h.end(), lt.bos()), 1);
    }
    // Text that spells control tokens stays text (tests/README.md, failure mode 17): the
    // prompt holds exactly the template's control tokens.
    const auto p = build_question_prompt(lt, ChatFormat::Llama3, {{"d", nasty}}, nasty);
    const auto eot = lt.find("<|eot_id|>"), shi = lt.find("<|start_header_id|>");
    EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), eot), 2);
    EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), shi), 3);

    const auto q = qwen2_vocab();
    const auto& qt = *q->tok;
    ASSERT_FALSE(qt.add_bos());
    const auto chat = build_question_prompt(qt, ChatFormat::ChatML, {{"d", nasty}}, nasty);
    EXPECT_EQ(chat.tokens.front(), qt.find("<|im_start|>"));
    EXPECT_EQ(std::count(chat.tokens.begin(), chat.tokens.end(), qt.bos()), 0);
    EXPECT_EQ(std::count(chat.tokens.begin(), chat.tokens.end(), qt.find("<|im_start|>")), 3);
    const auto header = document_unit_header(qt, ChatFormat::ChatML, "d", 1, 1);
    EXPECT_EQ(header.front(), qt.find("<|im_start|>"));
    EXPECT_EQ(document_unit_header(qt, ChatFormat::Completion, "d", 2, 3),
              qt.encode("Document: d (part 2 of 3)\n\n"));
    const auto base = build_question_prompt(qt, ChatFormat::Completion, {{"d", "t"}}, "q");
    EXPECT_EQ(base.tokens, qt.encode("Document: d\n\nt\n\nQuestion: q\nAnswer:"));
    EXPECT_EQ(base.prefix_len, static_cast<int64_t>(qt.encode("Document: d\n\nt\n\n").size()));
}

TEST(ChatPrompt, SmolLM2PromptHasNoBos) {
    const auto v = smollm2_vocab();
    if (!v)
        GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf is not installed";
    const auto& tok = *v->tok;
    ASSERT_FALSE(tok.add_bos()); // the file says add_bos_token false
    // SmolLM2's BOS id is <|im_start|>'s: the prompt holds exactly the template's three (system,
    // user, assistant), none added before them, and a document's "<|im_start|>" is text.
    const auto p = build_question_prompt(tok, ChatFormat::ChatML, {{"d", "<|im_start|>x"}}, "q");
    EXPECT_EQ(tok.piece(p.tokens.front()), "<|im_start|>");
    EXPECT_NE(p.tokens[1], p.tokens[0]);
    EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), tok.find("<|im_start|>")), 3);
}

TEST(ChatPrompt, AFollowUpQuestionClosesTheAnswerAndOpensAUserTurn) {
    const std::string question = "Who kept a log?";
    const auto g = gemma_vocab();
    const auto gemma = follow_up_question_tokens(*g->tok, ChatFormat::Gemma, question);
    auto want = turn_break(*g->tok, "user\n");
    const auto asked = question_tokens(*g->tok, ChatFormat::Gemma, question);
    want.insert(want.end(), asked.begin(), asked.end());
    EXPECT_EQ(gemma, want);
    EXPECT_EQ(follow_up_question_tokens(*g->tok, ChatFormat::Completion, question),
              g->tok->encode("\nQuestion: " + question + "\nAnswer:", false, TextStart::Continues));
    // Each chat format's turn close and user turn open, as its template writes them.
    const auto l = llama3_vocab();
    EXPECT_TRUE(
        l->tok->decode(follow_up_question_tokens(*l->tok, ChatFormat::Llama3, question), true)
            .starts_with("<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"));
    const auto q = qwen2_vocab();
    EXPECT_TRUE(
        q->tok->decode(follow_up_question_tokens(*q->tok, ChatFormat::ChatML, question), true)
            .starts_with("<|im_end|>\n<|im_start|>user\n"));
    const auto m = mistral_vocab();
    EXPECT_TRUE(
        m->tok->decode(follow_up_question_tokens(*m->tok, ChatFormat::Mistral, question), true)
            .starts_with("</s>[INST] "));
}

TEST(ChatPrompt, EachFormatsEndOfTurnEndsGeneration) {
    // The session stops at Tokenizer::is_end_of_generation; each format's end of turn is one.
    struct Case {
        std::unique_ptr<Vocab> vocab;
        const char* end;
    };
    Case cases[] = {{gemma_vocab(), "<end_of_turn>"},
                    {llama3_vocab(), "<|eot_id|>"},
                    {qwen2_vocab(), "<|im_end|>"},
                    {mistral_vocab(), "</s>"},
                    {mistral_text_vocab(), "</s>"}};
    for (const auto& c : cases) {
        const int32_t id = c.vocab->tok->find(c.end);
        ASSERT_GE(id, 0) << c.end;
        EXPECT_TRUE(c.vocab->tok->is_end_of_generation(id)) << c.end;
        // And it is the token a model's turn closes with in our prompts' history.
        ChatFormat f = std::string(c.end) == "<end_of_turn>" ? ChatFormat::Gemma
                       : std::string(c.end) == "<|eot_id|>"  ? ChatFormat::Llama3
                       : std::string(c.end) == "<|im_end|>"  ? ChatFormat::ChatML
                                                             : ChatFormat::Mistral;
        EXPECT_EQ(follow_up_question_tokens(*c.vocab->tok, f, "q").front(), id) << c.end;
    }
    if (const auto s = smollm2_vocab()) {
        EXPECT_TRUE(s->tok->is_end_of_generation(s->tok->find("<|im_end|>")));
    }
}

// ------------------------------------------------------------ a base model's end of answer

TEST(CompletionStop, EndsAtTheParagraphsEndNotAtTheFirstLine) {
    // The GPL-3 question "What must you do when you convey a modified version?" answered in a
    // list: the first line alone ("You must:") is no answer.
    const std::string answer = " You must:\n- keep intact all notices;\n- mark it as modified.";
    const std::string raw = answer + "\n\nQuestion: Who holds";
    std::string seen;
    size_t shown = 0, stopped_at = std::string::npos;
    for (size_t i = 1; i <= raw.size(); ++i) {
        const std::string so_far = raw.substr(0, i);
        const size_t s = answer_shown_length(ChatFormat::Completion, so_far);
        EXPECT_GE(s, shown) << i; // never takes back what was shown
        shown = s;
        if (completion_answer_done(ChatFormat::Completion, so_far)) {
            stopped_at = i;
            break;
        }
    }
    // It stops as the blank line ends, and not before.
    EXPECT_EQ(stopped_at, answer.size() + 2);
    const std::string at_stop = raw.substr(0, stopped_at);
    EXPECT_EQ(completion_stop_reason(ChatFormat::Completion, at_stop), "end_of_paragraph");
    EXPECT_EQ(clean_answer(ChatFormat::Completion, at_stop),
              "You must:\n- keep intact all notices;\n- mark it as modified.");
    EXPECT_EQ(at_stop.substr(0, shown), answer); // streamed: the answer, and not the blank line
    // A blank line of spaces counts; leading blank lines before the answer do not.
    EXPECT_TRUE(completion_answer_done(ChatFormat::Completion, "a\n \t\n"));
    EXPECT_FALSE(completion_answer_done(ChatFormat::Completion, "\n\n a"));
    EXPECT_FALSE(completion_answer_done(ChatFormat::Completion, "a\nb\nc"));
}

TEST(CompletionStop, EndsWhereTheModelAsksANewQuestionOrOpensATurn) {
    const std::string raw = " 30 days.\nQuestion: How many";
    size_t stopped_at = std::string::npos;
    for (size_t i = 1; i <= raw.size() && stopped_at == std::string::npos; ++i)
        if (completion_answer_done(ChatFormat::Completion, raw.substr(0, i)))
            stopped_at = i;
    EXPECT_EQ(stopped_at, std::string(" 30 days.\nQuestion:").size());
    const std::string at_stop = raw.substr(0, stopped_at);
    EXPECT_EQ(completion_stop_reason(ChatFormat::Completion, at_stop), "next_question");
    EXPECT_EQ(clean_answer(ChatFormat::Completion, at_stop), "30 days.");
    // While "Ques" may still become the question, it is held back; "Quest" that turns out to be
    // "Quests" is shown.
    EXPECT_EQ(answer_shown_length(ChatFormat::Completion, " 30 days.\nQues"),
              std::string(" 30 days.").size());
    EXPECT_EQ(answer_shown_length(ChatFormat::Completion, " 30 days.\nQuests"),
              std::string(" 30 days.\nQuests").size());
    for (const std::string marker :
         {"<start_of_turn>", "<|im_start|>", "<|start_header_id|>", "[INST]"}) {
        const std::string r = "Yes.\n" + marker + "user";
        EXPECT_TRUE(completion_answer_done(ChatFormat::Completion, r)) << marker;
        EXPECT_EQ(clean_answer(ChatFormat::Completion, r), "Yes.") << marker;
    }
    // "Question:" inside a line, or on the first line, is the answer's own text.
    EXPECT_FALSE(completion_answer_done(ChatFormat::Completion, "Question: none\nmore"));
    EXPECT_FALSE(completion_answer_done(ChatFormat::Completion, "The Question: is\nfine"));
}

TEST(CompletionStop, ChatFormatsEndOnlyAtTheirEndOfTurn) {
    for (const ChatFormat f :
         {ChatFormat::Gemma, ChatFormat::Llama3, ChatFormat::ChatML, ChatFormat::Mistral}) {
        const std::string raw = "You must:\n\n- keep notices\nQuestion: x\n";
        EXPECT_FALSE(completion_answer_done(f, raw)) << chat_format_name(f);
        EXPECT_EQ(answer_shown_length(f, raw), raw.size()) << chat_format_name(f);
        EXPECT_EQ(clean_answer(f, raw), "You must:\n\n- keep notices\nQuestion: x");
    }
}

TEST(CompletionStop, TheLongestAnswerBoundsIt) {
    // A base-model answer on the tiny model: at most max_tokens tokens; the streamed pieces are
    // the answer (cut where the stop rule cut it), and the answer never holds a blank line or a
    // new question.
    const auto dir = temp_dir();
    write_tiny_gemma3(dir + "/m.gguf", TinyGemma3Config{});
    auto m = Model::load(dir + "/m.gguf");
    const auto p = build_question_prompt(m->tokenizer(), ChatFormat::Completion,
                                         {{"d.txt", "the cat at the cat\n"}}, "the cat?");
    Session s(*m, SessionOptions{});
    std::string streamed;
    const auto free_run =
        s.ask(p, 40, SamplingParams{}, [&](const std::string& piece) { streamed += piece; });
    ASSERT_GE(free_run.stats.generated_tokens, 3) << "stop reason " << free_run.stop_reason;
    EXPECT_LE(free_run.stats.generated_tokens, 40);
    EXPECT_EQ(clean_answer(ChatFormat::Completion, streamed), free_run.text);
    EXPECT_FALSE(completion_answer_done(ChatFormat::Completion, free_run.text));
    const auto bounded = s.ask(p, 2, SamplingParams{});
    EXPECT_EQ(bounded.stats.generated_tokens, 2);
    EXPECT_EQ(bounded.stop_reason, "max_tokens");
    EXPECT_EQ(std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + 2),
              bounded.tokens);
    std::filesystem::remove_all(dir);
}
