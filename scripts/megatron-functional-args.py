#!/usr/bin/env python3
"""megatron-functional-args.py — writes test/megatron/functional/gpt.cases from a Megatron-LM
checkout: one line per training config of tests/functional_tests/test_cases/gpt/*/model_config.yaml,
"<name> <world> <arguments, shell-quoted>", the MODEL_ARGS block as the functional-test runner
passes it (a `true` switch alone, a `false` one left out), the runner's paths replaced by
@DATA@ (an indexed dataset prefix), @VOCAB@ / @MERGES@ (the GPT-2 files) and @TMP@/<name> (save,
load, tensorboard and cache folders). <world> = tp * pp * cp * ep. Inference configs (MODE:
inference, or an empty MODEL_ARGS) drive Megatron's inference engine, not pretrain_gpt.py, and
are left out.
usage: scripts/megatron-functional-args.py MEGATRON_LM_DIR COMMIT > test/megatron/functional/gpt.cases
"""
import glob, os, re, shlex, sys
import yaml

def subst(v):
    v = re.sub(r"\$\{DATA_PATH\}/[^ ]*/bpe/vocab\.json", "@VOCAB@", v)
    v = re.sub(r"\$\{DATA_PATH\}/[^ ]*/bpe/merges\.txt", "@MERGES@", v)
    v = re.sub(r"\$\{DATA_PATH\}/text/[^ ]*_text_document", "@DATA@", v)
    v = v.replace("$DATA_BLEND", "@DATA@")
    v = re.sub(r"\$\{DATA_PATH\}", "@TMP@/data", v)
    v = re.sub(r"\$\{(CHECKPOINT_SAVE_PATH|CHECKPOINT_LOAD_PATH)\}", "@TMP@/ckpt", v)
    v = re.sub(r"\$\{?REPEAT\}?", "1", v)  # the runner's repetition counter (an integer), e.g. --seed ${REPEAT}
    v = re.sub(r"\$\{?([A-Z_]+)\}?", lambda m: "@TMP@/" + m.group(1).lower(), v)
    return v

def main():
    root, commit = sys.argv[1], sys.argv[2]
    print("# Megatron-LM's GPT functional-test configs (tests/functional_tests/test_cases/gpt/*/model_config.yaml)")
    print("# at NVIDIA/Megatron-LM commit %s: each MODEL_ARGS block as the test runner passes it." % commit)
    print("# Written by scripts/megatron-functional-args.py; read by test/e2e/megatron_functional.sh, which fills")
    print("# in @DATA@, @VOCAB@, @MERGES@ and @TMP@. Fields: name, world size (tp*pp*cp*ep), arguments.")
    n_inf = 0
    for path in sorted(glob.glob(os.path.join(root, "tests/functional_tests/test_cases/gpt/*/model_config.yaml"))):
        cfg = yaml.load(open(path), Loader=yaml.BaseLoader)
        if cfg.get("MODE") == "inference" or not cfg.get("MODEL_ARGS"):
            n_inf += 1
            continue
        args, raw, ma = [], cfg.get("MODEL_ARGS") or {}, {}
        for k, v in raw.items():  # a YAML merge (<<: *base) as yq's explode: the base's keys, then the own
            if k == "<<":
                ma.update({kk: vv for kk, vv in v.items() if kk not in raw})
            else:
                ma[k] = v
        for k, v in ma.items():
            if isinstance(v, list):  # the runner strips the brackets: one argument per item
                args.append(k)
                args.extend(subst(x) for x in v)
            elif v == "true": args.append(k)
            elif v == "false" or v == "": continue
            else:  # one argument, spaces and all (the runner quotes such values)
                args.append(k)
                args.append(subst(v))
        size = lambda f: int(ma.get(f, "1")) if str(ma.get(f, "1")).isdigit() else 1
        world = size("--tensor-model-parallel-size") * size("--pipeline-model-parallel-size") * \
            size("--context-parallel-size") * size("--expert-model-parallel-size")
        name = os.path.basename(os.path.dirname(path))
        print("%s %d %s" % (name, world, " ".join(shlex.quote(a) for a in args)))
    print("# left out: %d inference configs (MODE: inference, or no MODEL_ARGS)" % n_inf)

main()
