#!/usr/bin/env bash
# Spanscope against llama.cpp, side by side in one run, on the same GGUF file, the same prompts
# (the model's BOS where its vocabulary asks for one, then the GPL-3 text of Debian's base-files,
# repeated to the length) and the same threads. SPANSCOPE_MODEL=PATH measures another model
# (default: Gemma 3 270M); its table goes between markers named after the file.
#
#   bash bench/compare_llama_cpp.sh [--runs N] [--lengths 512,2048,8192] [--threads 2]
#                                   [--decode N] [--kernel-level L] [--write]
#
# 1. Builds llama-cpp-python 0.3.36 from its source package (PyPI sdist) into a virtual
#    environment ($SPANSCOPE_BENCH_VENV, default ~/.local/share/spanscope/bench-venv), with the
#    instruction sets this CPU has (from /proc/cpuinfo): AVX2/FMA/F16C, AVX-VNNI, AVX-512 with
#    VNNI and BF16. AMX stays off: llama.cpp's AMX kernels fault unless the process first asks the
#    kernel for the tile state, which it does not do on every build. Done once (~10 min on 2 cores).
# 2. Runs, for each of N rounds, llama.cpp (bench/llama_cpp_speed.py), `spanscope-cli bench`
#    (plain prefill, prefill with every token's surprisal, decode, and the machine's read
#    bandwidth), and the same bench with OPENBLAS_CORETYPE=Prescott (OpenBLAS's generic kernels:
#    the engine's speed must not rest on OpenBLAS knowing the CPU), alternating so all see the
#    same machine state.
# 3. Prints one Markdown table of the medians and their ratios, with the CPU model and flags;
#    --write also puts it into docs/benchmarks.md between the "compare:" markers.
# --kernel-level L runs Spanscope's benches at kernel level L (avx2: the kernels an AVX2-only CPU
# gets) against llama.cpp built for the same instruction sets (avx2: AVX2/FMA/F16C; avxvnni: and
# AVX-VNNI; in a virtual environment of its own, "<venv>-L"), skips the document ingest (which
# runs at the best level), and writes between "compare-L:" markers.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=3 LENGTHS=512,2048,8192 THREADS=2 WRITE=0 DECODE=32 LEVEL=best
while (($#)); do
    case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --lengths) LENGTHS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --decode) DECODE=$2; shift 2 ;;
    --kernel-level) LEVEL=$2; shift 2 ;;
    --write) WRITE=1; shift ;;
    *) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
DATA="${XDG_DATA_HOME:-$HOME/.local/share}/spanscope"
VENV="${SPANSCOPE_BENCH_VENV:-$DATA/bench-venv}"
MODEL="${SPANSCOPE_MODEL:-$DATA/models/gemma-3-270m-q4_k_m.gguf}"
CLI="${SPANSCOPE_CLI:-$ROOT/build/app/cli/spanscope-cli}"
[[ -x "$CLI" ]] || { echo "no $CLI: run bash scripts/setup.sh build first" >&2; exit 1; }
[[ -s "$MODEL" ]] || { echo "no model at $MODEL: run bash scripts/setup.sh model first" >&2; exit 1; }

has() { grep -qw "$1" /proc/cpuinfo; }
case "$LEVEL" in # instruction sets above the level's are off in llama.cpp's build too
avx2) has() { [[ "$1" =~ ^(avx|avx2|fma|f16c)$ ]] && grep -qw "$1" /proc/cpuinfo; } ;;
avxvnni) has() { [[ "$1" =~ ^(avx|avx2|fma|f16c|avx_vnni)$ ]] && grep -qw "$1" /proc/cpuinfo; } ;;
esac
[[ "$LEVEL" == avx2 || "$LEVEL" == avxvnni ]] && VENV="$VENV-$LEVEL"
onoff() { if has "$1"; then echo ON; else echo OFF; fi; }
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=$(onoff avx) -DGGML_AVX2=$(onoff avx2) -DGGML_FMA=$(onoff fma)"
FLAGS+=" -DGGML_F16C=$(onoff f16c) -DGGML_AVX_VNNI=$(onoff avx_vnni)"
FLAGS+=" -DGGML_AVX512=$(onoff avx512f) -DGGML_AVX512_VNNI=$(onoff avx512_vnni)"
FLAGS+=" -DGGML_AVX512_BF16=$(onoff avx512_bf16) -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF"
FLAGS+=" -DGGML_AMX_BF16=OFF -DGGML_OPENMP=ON -DGGML_BLAS=OFF"
if [[ ! -f "$VENV/.built" || "$(cat "$VENV/.built")" != "$FLAGS" ]]; then
    echo "== building llama-cpp-python 0.3.36 from source with: $FLAGS" >&2
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/pip" install -q \
        --force-reinstall --no-cache-dir --no-binary llama-cpp-python llama-cpp-python==0.3.36 numpy
    echo "$FLAGS" >"$VENV/.built"
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
IFS=, read -r -a LENS <<<"$LENGTHS"
for ((r = 1; r <= RUNS; ++r)); do
    echo "== round $r of $RUNS" >&2
    OMP_NUM_THREADS=$THREADS "$VENV/bin/python" "$ROOT/bench/llama_cpp_speed.py" --model "$MODEL" \
        --lengths "$LENGTHS" --decode "$DECODE" --threads "$THREADS" --json >"$OUT/llama.$r.json"
    # Full attention, as llama.cpp computes it (sekv, the default policy, is another cache).
    "$CLI" bench --model "$MODEL" --policy full --lengths "${LENS[@]}" --decode-tokens "$DECODE" \
        --threads "$THREADS" --kernel-level "$LEVEL" --ingest --bandwidth --json \
        >"$OUT/spanscope.$r.json"
    # Reading a real document into a new project (GPL-3: 7 570 tokens), the rate ingest reports.
    if [[ "$LEVEL" == best ]]; then
        rm -rf "$OUT/project.spanscope"*
        "$CLI" ingest --model "$MODEL" --threads "$THREADS" --project "$OUT/project.spanscope" \
            /usr/share/common-licenses/GPL-3 2>&1 | grep -o '[0-9.]* tokens/s' | tail -1 |
            cut -d' ' -f1 >"$OUT/ingest.$r.txt"
    fi
    OPENBLAS_CORETYPE=Prescott "$CLI" bench --model "$MODEL" --policy full --lengths "${LENS[@]}" \
        --decode-tokens "$DECODE" --threads "$THREADS" --kernel-level "$LEVEL" --ingest --json \
        >"$OUT/prescott.$r.json"
done

python3 - "$OUT" "$RUNS" "$ROOT/docs/benchmarks.md" "$WRITE" "$(nproc)" "$LEVEL" "$(cat "$VENV/.built")" "$(basename "$MODEL")" <<'PY'
import json, statistics, sys, datetime, re
out, runs, doc, write, ncpu = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", sys.argv[5]
level = sys.argv[6]
llama_isa = " ".join(f.split("=")[0].replace("-DGGML_", "").lower() for f in sys.argv[7].split() if f.endswith("=ON") and "OPENMP" not in f)
model = sys.argv[8]
default_model = model == "gemma-3-270m-q4_k_m.gguf"
mark = "compare" if level == "best" else f"compare-{level}"
if not default_model:  # another model's table has its own place in the document
    mark += "-" + re.sub(r"[^a-z0-9]+", "-", model.lower().removesuffix(".gguf")).strip("-")
opts = f"--runs {runs}" + ("" if level == "best" else f" --kernel-level {level}")
opts_prefix = "" if default_model else f"SPANSCOPE_MODEL=~/.local/share/spanscope/models/{model} "
def load(name):
    return [json.load(open(f"{out}/{name}.{r}.json")) for r in range(1, runs + 1)]
ll, sp, pr = load("llama"), load("spanscope"), load("prescott")
lens_run = ",".join(str(x["prompt_tokens"]) for x in sp[0]["results"])
if lens_run != "512,2048,8192":
    opts += f" --lengths {lens_run}"
def med(runs_, n, key):
    vals = [next(x for x in r["results"] if x["prompt_tokens"] == n)[key] for r in runs_]
    return statistics.median(vals)
cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
fam = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("cpu family"))
mod = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model\t"))
flags = set(next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split(":", 1)[1].split())
shown = [f for f in ["avx2", "fma", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8"] if f in flags]
bw = statistics.median(r["read_bandwidth_gb_per_s"] for r in sp)
doc_ingest = (statistics.median(float(open(f"{out}/ingest.{r}.txt").read()) for r in range(1, runs + 1))
              if level == "best" else None)
lines = [f"<!-- {mark}:begin -->",
         f"Measured {datetime.date.today()} by `{opts_prefix}bash bench/compare_llama_cpp.sh {opts}` "
         f"({model}): "
         f"{cpu} (family {fam}, model {mod}; {' '.join(shown)}), {ncpu} cores; threads "
         f"{sp[0]['threads']}; medians of {runs} alternating rounds; spanscope kernel level "
         f"`{sp[0].get('kernel_level', '?')}`; {ll[0]['engine']} built with {llama_isa}; read bandwidth "
         f"{bw:.1f} GB/s (`spanscope-cli bench --bandwidth`).",
         "",
         "| prompt tokens | llama.cpp prefill | Spanscope prefill | ratio | Spanscope ingest (prefill + surprisal) | ingest / llama.cpp prefill at 2048 | llama.cpp decode | Spanscope decode | ratio | decode GB/s (of bandwidth) | Prescott / default: prefill, ingest, decode |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
l2048 = med(ll, 2048, "prefill_tokens_per_s") if any(x["prompt_tokens"] == 2048 for x in ll[0]["results"]) else None
for n in sorted({x["prompt_tokens"] for x in sp[0]["results"]}):
    lp, sp_p = med(ll, n, "prefill_tokens_per_s"), med(sp, n, "prefill_tokens_per_s")
    ing = med(sp, n, "ingest_tokens_per_s")
    ld, sd = med(ll, n, "decode_tokens_per_s"), med(sp, n, "decode_tokens_per_s")
    gbs = med(sp, n, "decode_gb_per_s")
    pp, pi, pd = (med(pr, n, k) for k in ("prefill_tokens_per_s", "ingest_tokens_per_s", "decode_tokens_per_s"))
    ref = l2048 if l2048 else lp
    lines.append(f"| {n} | {lp:.1f} | {sp_p:.1f} | {sp_p / lp:.2f}× | {ing:.1f} | {ing / ref:.2f}× | "
                 f"{ld:.1f} | {sd:.1f} | {sd / ld:.2f}× | {gbs:.1f} ({100 * gbs / bw:.0f} %) | "
                 f"{pp / sp_p:.2f}, {pi / ing:.2f}, {pd / sd:.2f} |")
if doc_ingest is not None:
    lines.append("")
    lines.append(f"`spanscope-cli ingest` of `/usr/share/common-licenses/GPL-3` (into a new "
                 f"project): {doc_ingest:.0f} tokens/s"
                 + (f", {doc_ingest / l2048:.2f}× llama.cpp's plain prefill at 2 048 tokens." if l2048 else "."))
lines.append(f"<!-- {mark}:end -->")
table = "\n".join(lines)
print(table)
if write:
    text = open(doc).read()
    if f"<!-- {mark}:begin -->" in text:
        text = re.sub(rf"<!-- {mark}:begin -->.*?<!-- {mark}:end -->", lambda m: table, text, flags=re.S)
    else:
        text += "\n" + table + "\n"
    open(doc, "w").write(text)
PY
