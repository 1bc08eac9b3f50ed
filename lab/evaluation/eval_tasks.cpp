#include "lab/evaluation/eval_tasks.h"

#include "lab/evaluation/eval_needles.h"
#include "lab/evaluation/eval_qa.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace spanscope::eval {

namespace {

const std::vector<std::string>& needle_variants() {
    static const std::vector<std::string> kVariants = {"niah_single_number", "niah_single_uuid",
                                                       "niah_multikey", "niah_multivalue",
                                                       "niah_multiquery"};
    return kVariants;
}

// What a task hides and asks, before it is placed in a haystack.
struct Plan {
    std::vector<Needle> needles;
    std::string question;
    std::string answer_prefix;
    std::vector<std::string> expected;
    int max_tokens = 16;
    nlohmann::json meta = nlohmann::json::object();
};

// The first needle at `depth`; the others at random depths.
std::vector<double> spread_depths(std::mt19937_64& rng, double depth, size_t n) {
    std::vector<double> d{depth};
    while (d.size() < n)
        d.push_back(uniform01(rng));
    return d;
}

Plan plan_needles(const std::string& variant, double depth, std::mt19937_64& rng) {
    Plan p;
    if (variant == "niah_single_number" || variant == "niah_single_uuid") {
        const std::string key = random_keys(rng, 1)[0];
        const bool uuid = variant == "niah_single_uuid";
        const std::string value = uuid ? random_uuid(rng) : random_numbers(rng, 1)[0];
        p.needles = {{secret_code_needle(key, value), depth}};
        p.question = "What is the secret code for the " + key + "?";
        p.expected = {value};
        p.max_tokens = uuid ? 40 : 16;
        p.meta["keys"] = {key};
        p.meta["values"] = {value};
    } else if (variant == "niah_multikey" || variant == "niah_multiquery") {
        const auto keys = random_keys(rng, 4);
        const auto values = random_numbers(rng, 4);
        const auto depths = spread_depths(rng, depth, 4);
        for (size_t i = 0; i < 4; ++i)
            p.needles.push_back({secret_code_needle(keys[i], values[i]), depths[i]});
        // The first needle (at `depth`) is always asked; multiquery asks one more.
        std::vector<size_t> asked{0};
        if (variant == "niah_multikey") {
            p.question = "What is the secret code for the " + keys[0] + "?";
        } else {
            asked.push_back(1 + static_cast<size_t>(rng() % 3));
            p.question = "What are the secret codes for the " + keys[asked[0]] + " and the " +
                         keys[asked[1]] + "?";
        }
        for (const size_t a : asked)
            p.expected.push_back(values[a]);
        p.max_tokens = variant == "niah_multikey" ? 16 : 32;
        p.meta["keys"] = keys;
        p.meta["values"] = values;
        p.meta["asked"] = asked;
    } else { // niah_multivalue
        const std::string key = random_keys(rng, 1)[0];
        const auto values = random_numbers(rng, 3);
        const auto depths = spread_depths(rng, depth, 3);
        for (size_t i = 0; i < 3; ++i)
            p.needles.push_back({secret_code_needle(key, values[i]), depths[i]});
        p.question = "What are all the secret codes for the " + key + "?";
        p.expected = values;
        p.max_tokens = 48;
        p.meta["keys"] = {key};
        p.meta["values"] = values;
    }
    return p;
}

// Variable tracking (RULER §3, their variable_tracking.py): "VAR X0 = VALUE." then
// "VAR Xi = VAR Xi-1." for i = 1..hops, at increasing depths from `depth`, asked as RULER asks
// it: every variable assigned VALUE, through the chain, with RULER's answer prefix (which gives
// the count). The prefix ends in "VAR" so that the model lists names in the form the text uses;
// without it Gemma 3 270M lists numbers. string_match_all gives partial credit per name found.
Plan plan_variable_tracking(double depth, std::mt19937_64& rng) {
    Plan p;
    const int hops = 2 + static_cast<int>(rng() % 3);
    const auto vars = random_variable_names(rng, hops + 1);
    const std::string value = random_numbers(rng, 1)[0];
    std::vector<double> depths;
    for (int i = 0; i < hops; ++i)
        depths.push_back(depth + (1 - depth) * uniform01(rng));
    std::sort(depths.begin(), depths.end());
    depths.insert(depths.begin(), depth);
    p.needles.push_back({"VAR " + vars[0] + " = " + value + ".", depths[0]});
    for (int i = 1; i <= hops; ++i)
        p.needles.push_back({"VAR " + vars[static_cast<size_t>(i)] + " = VAR " +
                                 vars[static_cast<size_t>(i) - 1] + ".",
                             depths[static_cast<size_t>(i)]});
    p.question = "Memorize and track the chain(s) of variable assignment hidden in the text "
                 "above. Find all variables that are assigned the value " +
                 value + " in the text above.";
    p.answer_prefix = "According to the chain(s) of variable assignment in the text above, " +
                      std::to_string(hops + 1) + " variables are assigned the value " + value +
                      ", they are: VAR";
    p.expected = vars;
    p.max_tokens = 48;
    p.meta["hops"] = hops;
    p.meta["variables"] = vars;
    p.meta["values"] = {value};
    return p;
}

void validate(const TaskRequest& r) {
    const auto names = task_names();
    if (std::find(names.begin(), names.end(), r.task) == names.end())
        throw std::invalid_argument("unknown task '" + r.task + "'");
    if (r.haystack != "prose" && r.haystack != "noise")
        throw std::invalid_argument(r.task + ": unknown haystack '" + r.haystack +
                                    "' (prose, noise)");
    if (r.target_length < 256 || r.target_length > 131072)
        throw std::invalid_argument(r.task + ": target_length " + std::to_string(r.target_length) +
                                    " is outside [256, 131072] tokens");
    if (!(r.depth >= 0 && r.depth <= 1))
        throw std::invalid_argument(r.task + ": depth " + std::to_string(r.depth) +
                                    " is outside [0, 1]");
}

} // namespace

std::vector<std::string> task_names() {
    auto names = needle_variants();
    names.insert(names.end(), {"niah", "vt", "qa"});
    return names;
}

uint64_t sample_seed(const TaskRequest& r) {
    // FNV-1a's scheme and prime, with the offset basis missing its last digit (the standard one
    // is 14695981039346656037): kept, as every recorded sample's seed derives from it.
    uint64_t h = 1469598103934665603ull;
    auto bytes = [&](const void* data, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            h ^= static_cast<const unsigned char*>(data)[i];
            h *= 1099511628211ull;
        }
    };
    auto u64 = [&](uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            const unsigned char b = static_cast<unsigned char>(v >> (8 * i));
            bytes(&b, 1);
        }
    };
    u64(r.task.size());
    bytes(r.task.data(), r.task.size());
    u64(r.haystack.size());
    bytes(r.haystack.data(), r.haystack.size());
    u64(static_cast<uint64_t>(r.target_length));
    u64(std::bit_cast<uint64_t>(r.depth == 0 ? 0.0 : r.depth)); // -0.0 and 0.0 alike
    u64(r.seed);
    u64(static_cast<uint64_t>(r.index));
    // splitmix64's finaliser, so that neighbouring requests get unrelated generators.
    h += 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

EvalSample sample_for(const TaskRequest& r) {
    EvalSample s;
    s.task = r.task;
    s.haystack = r.haystack;
    s.target_length = r.target_length;
    s.depth = r.depth;
    s.index = r.index;
    return s;
}

EvalSample make_sample(const Tokenizer& tok, const TaskRequest& r, const Corpus& corpus) {
    validate(r);
    const TokenCounter counter(tok, corpus);
    std::mt19937_64 rng(sample_seed(r));
    if (r.task == "qa")
        return make_qa_sample(counter, r, corpus, rng);

    EvalSample s = sample_for(r);
    std::string variant = r.task;
    if (r.task == "niah")
        variant = needle_variants()[static_cast<size_t>(((r.index % 5) + 5) % 5)];
    Plan p = variant == "vt" ? plan_variable_tracking(r.depth, rng)
                             : plan_needles(variant, r.depth, rng);
    const Placement placed =
        place_needles(counter, corpus, r.haystack, r.target_length, p.needles, rng);
    s.context = placed.context;
    s.question = p.question;
    s.answer_prefix = p.answer_prefix;
    s.expected = p.expected;
    s.metric = "string_match_all";
    s.max_tokens = p.max_tokens;
    s.meta = std::move(p.meta);
    if (r.task == "niah")
        s.meta["variant"] = variant;
    std::vector<std::string> needles;
    for (const auto& n : p.needles)
        needles.push_back(n.text);
    s.meta["needles"] = needles;
    s.meta["needle_depths"] = placed.depths;
    s.meta["needle_offsets"] = placed.offsets;
    s.meta["needle_chars"] = placed.chars;
    s.meta["context_tokens"] = placed.tokens;
    return s;
}

} // namespace spanscope::eval
