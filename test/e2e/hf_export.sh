# Acceptance: `mtrain export --format hf` writes a save of any layout as a Hugging Face folder.
# Saves: gpt-tiny at tp 2 x pp 2 (iterations 2 and 4), llama-tiny at tp 2 x dp 2 with the distributed
# optimizer (pieces cut at arbitrary elements), gpt with the GPT-2 BPE tokenizer, gpt with a
# tokenizer.json. A Python checker (json + struct only: no numpy) reassembles every tensor of the
# save from the manifest's pieces itself (not through mtrain's reader) and checks the exported
# folder: config.json fields, the safetensors header (exactly the expected names, shapes, dtypes,
# contiguous offsets, {"format":"pt"}), and every value: c_attn.weight == qkv_w^T, q/k/v_proj ==
# the row blocks of qkv_w, gate/up == the halves of fc_w, vocabulary padding dropped, fp32 bit for
# bit, bf16 == round-to-nearest-even of the fp32 value (and half the bytes); shards + index == the
# single file; tokenizer files copied byte for byte. Errors: missing / corrupt save, --iteration of
# no save, a non-empty output (and --force), unknown --format / --dtype, a model GPT-2 cannot
# express, changed tokenizer files: exit 1 (usage: 2) and nothing left at the output.
source test/e2e_lib.sh
need_data
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T0=$(date +%s.%N)
train() { # train NAME N ARGS...: mtrain launch -n N (1: one process) saving to $TMP/NAME
  local name=$1 n=$2; shift 2
  if [ "$n" -eq 1 ]; then
    "$MTRAIN" "$@" --set logging.eval_interval=0 --save "$TMP/$name" >"$TMP/$name.log" 2>&1
  else
    "$MTRAIN" launch -n "$n" -- "$@" --set logging.eval_interval=0 --save "$TMP/$name" >"$TMP/$name.log" 2>&1
  fi || { tail -n 20 "$TMP/$name.log"; fail "training $name failed"; }
}
export_ok() { # export_ok LOG ARGS...: mtrain export must succeed
  local log=$1; shift
  "$MTRAIN" export "$@" >"$log" 2>&1 || { cat "$log"; fail "export $* failed"; }
}
export_fails() { # export_fails WANT_RC TEXT OUT ARGS...: exit WANT_RC, TEXT in stderr, nothing at OUT
  local want=$1 text=$2 out=$3 rc=0; shift 3
  "$MTRAIN" export "$@" >"$TMP/err.log" 2>&1 || rc=$?
  [ $rc -eq "$want" ] || { cat "$TMP/err.log"; fail "export $*: exit $rc, expected $want"; }
  grep -qF -- "$text" "$TMP/err.log" || { cat "$TMP/err.log"; fail "export $*: no '$text' in the message"; }
  [ ! -e "$out" ] && [ ! -e "$out.tmp" ] || fail "export $*: left $out or $out.tmp behind"
  echo "error ok (exit $rc): $(grep -m1 'error' "$TMP/err.log" | cut -c1-170)"
}

train gpt 4 --config configs/gpt-tiny.yaml --train-iters 4 --save-interval 2 --micro-batch-size 1 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
train llama 4 --config configs/llama-tiny.yaml --train-iters 3 --micro-batch-size 1 \
  --tensor-model-parallel-size 2 --use-distributed-optimizer
T1=$(date +%s.%N)

cat >"$TMP/check.py" <<'EOF'
import json, os, struct, sys
from array import array

def header(path):
    with open(path, 'rb') as f:
        raw = f.read()
    n = struct.unpack('<Q', raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    meta = h.pop('__metadata__', None)
    assert meta == {'format': 'pt'}, f'{path}: __metadata__ {meta}'
    spans = sorted((v['data_offsets'][0], v['data_offsets'][1], k) for k, v in h.items())
    at = 0
    for b, e, k in spans:
        assert b == at, f'{path}: {k} starts at {b}, expected {at} (gap or overlap)'
        at = e
    assert 8 + n + at == len(raw), f'{path}: {len(raw)} bytes, header + data = {8 + n + at}'
    return h, raw, 8 + n

def exported(out):
    """name -> (dtype, shape, raw bytes, file) over model.safetensors or the shards"""
    idx = os.path.join(out, 'model.safetensors.index.json')
    files = {}
    if os.path.exists(idx):
        wm = json.load(open(idx))
        for name, fn in wm['weight_map'].items():
            files.setdefault(fn, set()).add(name)
        total = wm['metadata']['total_size']
    else:
        files = {'model.safetensors': None}
        total = None
    tensors, size = {}, 0
    for fn, names in files.items():
        h, raw, start = header(os.path.join(out, fn))
        if names is not None:
            assert set(h) == names, f'{fn}: holds {sorted(set(h) ^ names)} against the index'
        for k, v in h.items():
            b, e = v['data_offsets']
            tensors[k] = (v['dtype'], v['shape'], raw[start + b:start + e], fn)
            size += e - b
    if total is not None:
        assert total == size, f'index total_size {total}, the shards hold {size}'
    return tensors

def floats(raw, dtype):
    if dtype == 'F32':
        return array('f', raw)
    a = array('H', raw)
    return array('f', struct.pack(f'<{len(a)}I', *[x << 16 for x in a]))

def checkpoint(d):
    """every tensor of the save, reassembled from the manifest's pieces: name -> (floats, (L, R, C))"""
    m = json.load(open(os.path.join(d, 'manifest.json')))
    names = [f['name'] for f in m['files']]
    blobs, out = {}, {}
    for t in m['tensors']:
        L, R, C = t['shape']
        kinds = {p['kind'] for p in t['pieces']}
        kind = 'master' if 'master' in kinds else 'weight'
        a = array('f', bytes(4 * L * R * C))
        covered = 0
        for p in t['pieces']:
            if p['kind'] != kind:
                continue
            fn = names[p['file']]
            if fn not in blobs:
                blobs[fn] = open(os.path.join(d, fn), 'rb').read()
            vals = floats(blobs[fn][p['offset']:p['offset'] + p['bytes']], p['dtype'])
            (l0, l1), (r0, r1), (c0, c1) = p['box']
            f0, f1 = p['flat']
            nr, nc = r1 - r0, c1 - c0
            assert len(vals) == f1 - f0
            f = f0
            while f < f1:
                l, rem = divmod(f, nr * nc)
                r, c = divmod(rem, nc)
                run = min(nc - c, f1 - f)
                g = ((l0 + l) * R + r0 + r) * C + c0 + c
                a[g:g + run] = vals[f - f0:f - f0 + run]
                f += run
            covered += f1 - f0
        assert covered == L * R * C, f'{t["name"]}: pieces cover {covered} of {L * R * C}'
        out[t['name']] = (a, (L, R, C))
    return m, out

def mapping(arch, c):
    """(name, src, layer, (r0, r1), (c0, c1), transpose, hf shape): the export's contract, restated"""
    L = c['n_layer'] if arch == 'gpt' else c['num_hidden_layers']
    out = []
    def add(name, src, l, rows, cols, tr=False, vec=False):
        nr, nc = rows[1] - rows[0], cols[1] - cols[0]
        shape = [nr * nc] if vec else ([nc, nr] if tr else [nr, nc])
        out.append((name, src, l, rows, cols, tr, shape))
    if arch == 'gpt':
        C, V, F, P = c['n_embd'], c['vocab_size'], c['n_inner'], c['n_positions']
        add('transformer.wte.weight', 'wte', 0, (0, V), (0, C))
        add('transformer.wpe.weight', 'wpe', 0, (0, P), (0, C))
        add('transformer.ln_f.weight', 'lnf_w', 0, (0, 1), (0, C), vec=True)
        add('transformer.ln_f.bias', 'lnf_b', 0, (0, 1), (0, C), vec=True)
        for l in range(L):
            h = f'transformer.h.{l}.'
            for n, s, w in (('ln_1.weight', 'ln1_w', C), ('ln_1.bias', 'ln1_b', C), ('ln_2.weight', 'ln2_w', C),
                            ('ln_2.bias', 'ln2_b', C), ('attn.c_attn.bias', 'qkv_b', 3 * C),
                            ('attn.c_proj.bias', 'proj_b', C), ('mlp.c_fc.bias', 'fc_b', F),
                            ('mlp.c_proj.bias', 'fcproj_b', C)):
                add(h + n, s, l, (0, 1), (0, w), vec=True)
            add(h + 'attn.c_attn.weight', 'qkv_w', l, (0, 3 * C), (0, C), tr=True)
            add(h + 'attn.c_proj.weight', 'proj_w', l, (0, C), (0, C), tr=True)
            add(h + 'mlp.c_fc.weight', 'fc_w', l, (0, F), (0, C), tr=True)
            add(h + 'mlp.c_proj.weight', 'fcproj_w', l, (0, C), (0, F), tr=True)
    else:
        C, V, F = c['hidden_size'], c['vocab_size'], c['intermediate_size']
        D = C // c['num_attention_heads']
        Q, K = c['num_attention_heads'] * D, c['num_key_value_heads'] * D
        add('model.embed_tokens.weight', 'wte', 0, (0, V), (0, C))
        add('model.norm.weight', 'lnf_w', 0, (0, 1), (0, C), vec=True)
        if not c['tie_word_embeddings']:
            add('lm_head.weight', 'lm_head', 0, (0, V), (0, C))
        for l in range(L):
            h = f'model.layers.{l}.'
            add(h + 'input_layernorm.weight', 'ln1_w', l, (0, 1), (0, C), vec=True)
            add(h + 'post_attention_layernorm.weight', 'ln2_w', l, (0, 1), (0, C), vec=True)
            add(h + 'self_attn.q_proj.weight', 'qkv_w', l, (0, Q), (0, C))
            add(h + 'self_attn.k_proj.weight', 'qkv_w', l, (Q, Q + K), (0, C))
            add(h + 'self_attn.v_proj.weight', 'qkv_w', l, (Q + K, Q + 2 * K), (0, C))
            add(h + 'self_attn.o_proj.weight', 'proj_w', l, (0, C), (0, Q))
            add(h + 'mlp.gate_proj.weight', 'fc_w', l, (0, F), (0, C))
            add(h + 'mlp.up_proj.weight', 'fc_w', l, (F, 2 * F), (0, C))
            add(h + 'mlp.down_proj.weight', 'fcproj_w', l, (0, C), (0, F))
    return out

def block(src, l, rows, cols, tr):
    a, (L, R, C) = src
    nr, nc = rows[1] - rows[0], cols[1] - cols[0]
    b = array('f')
    for r in range(rows[0], rows[1]):
        g = (l * R + r) * C
        b.extend(a[g + cols[0]:g + cols[1]])
    if not tr:
        return b
    t = array('f', bytes(4 * nr * nc))
    for j in range(nc):
        t[j * nr:(j + 1) * nr] = b[j::nc]
    return t

def bf16_rne(a):
    u = array('I', a.tobytes())
    assert all((x & 0x7f800000) != 0x7f800000 for x in u), 'inf / nan in the weights'
    return array('H', [((x + 0x7fff + ((x >> 16) & 1)) >> 16) & 0xffff for x in u]).tobytes()

WANT = {
    'gpt': {'architectures': ['GPT2LMHeadModel'], 'model_type': 'gpt2', 'vocab_size': 257, 'n_positions': 128,
            'n_ctx': 128, 'n_embd': 128, 'n_layer': 4, 'n_head': 4, 'n_inner': 512, 'activation_function': 'gelu_new',
            'layer_norm_epsilon': 1e-5, 'resid_pdrop': 0.0, 'embd_pdrop': 0.0, 'attn_pdrop': 0.0,
            'tie_word_embeddings': True, 'bos_token_id': 256, 'eos_token_id': 256},
    'llama': {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'vocab_size': 257, 'hidden_size': 128,
              'intermediate_size': 344, 'num_attention_heads': 4, 'num_key_value_heads': 2, 'num_hidden_layers': 4,
              'max_position_embeddings': 128, 'rms_norm_eps': 1e-5, 'rope_theta': 10000.0, 'hidden_act': 'silu',
              'tie_word_embeddings': False, 'attention_bias': False, 'mlp_bias': False, 'bos_token_id': 256,
              'eos_token_id': 256},
}

def verify(out, save, arch, dtype, **want_extra):
    c = json.load(open(os.path.join(out, 'config.json')))
    want = dict(WANT[arch], **want_extra, torch_dtype={'F32': 'float32', 'BF16': 'bfloat16'}[dtype])
    for k, v in want.items():
        got = c.get(k, '<missing>')
        ok = abs(got - v) <= 1e-6 * abs(v) if isinstance(v, float) and isinstance(got, float) else got == v
        assert ok and type(got) == type(v), f'config.json {k}: {got!r}, expected {v!r}'
    g = json.load(open(os.path.join(out, 'generation_config.json')))
    assert g['eos_token_id'] == c['eos_token_id'] and g['bos_token_id'] == c['bos_token_id'] and g['do_sample'] is False
    mf, ck = checkpoint(save)
    ex = exported(out)
    mp = mapping(arch, c)
    names = {m[0] for m in mp}
    assert set(ex) == names, f'names: extra {sorted(set(ex) - names)}, missing {sorted(names - set(ex))}'
    used = set()
    for name, src, l, rows, cols, tr, shape in mp:
        dt, sh, raw, _ = ex[name]
        assert dt == dtype and sh == shape, f'{name}: {dt} {sh}, expected {dtype} {shape}'
        want_vals = block(ck[src], l, rows, cols, tr)
        want_raw = want_vals.tobytes() if dtype == 'F32' else bf16_rne(want_vals)
        if raw != want_raw:
            gv, wv = floats(raw, dtype), floats(want_raw, dtype)
            i = next(i for i in range(len(gv)) if gv[i] != wv[i])
            raise AssertionError(f'{name}: element {i} is {gv[i]}, the save says {wv[i]} ({src} layer {l})')
        used.add(src)
    assert used == set(ck), f'save tensors not exported: {sorted(set(ck) - used)}'
    vocab_rows = ck['wte'][1][1]
    print(f'{out}: {len(ex)} tensors ({dtype}) == the save {save} (reassembled from {len(mf["files"])} rank '
          f'files, wte {vocab_rows} rows -> {c["vocab_size"]}); config.json ok')

def same(a, b):
    x, y = exported(a), exported(b)
    assert set(x) == set(y), 'different names'
    for k in x:
        assert x[k][:3] == y[k][:3], f'{k} differs'
    print(f'{a} == {b}: {len(x)} tensors in {len({v[3] for v in x.values()})} file(s) vs {len({v[3] for v in y.values()})}')

def data_bytes(out):
    return sum(len(v[2]) for v in exported(out).values())

if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'verify':
        extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
        verify(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], **extra)
    elif cmd == 'same':
        same(sys.argv[2], sys.argv[3])
    elif cmd == 'bytes':
        print(data_bytes(sys.argv[2]))
    elif cmd == 'shards':
        wm = json.load(open(os.path.join(sys.argv[2], 'model.safetensors.index.json')))['weight_map']
        assert list(wm) == sorted(wm), 'weight_map not sorted'
        print(len(set(wm.values())))
EOF
check() { "$PY" "$TMP/check.py" "$@" || fail "check $* failed"; }

# --- gpt tp2 x pp2: fp32, the checkpoint folder (tracker: iteration 4) and an iter_* folder ---
export_ok "$TMP/e1.log" --load "$TMP/gpt" --format hf --output "$TMP/hf_gpt"
cat "$TMP/e1.log"
grep -q "52 tensors in 1 weight file" "$TMP/e1.log" && grep -q "MB/s" "$TMP/e1.log" || fail "no summary line"
grep -q "no tokenizer files" "$TMP/e1.log" || fail "no note about the byte tokenizer"
ls "$TMP/hf_gpt" | sort | tr '\n' ' ' | grep -qx "config.json generation_config.json model.safetensors " \
  || fail "unexpected files: $(ls "$TMP/hf_gpt")"
check verify "$TMP/hf_gpt" "$TMP/gpt/iter_0000004" gpt F32
export_ok "$TMP/e2.log" --load "$TMP/gpt/iter_0000002" --output "$TMP/hf_gpt2"
check verify "$TMP/hf_gpt2" "$TMP/gpt/iter_0000002" gpt F32
export_ok "$TMP/e3.log" --load "$TMP/gpt" --iteration 2 --output "$TMP/hf_gpt2b"
check same "$TMP/hf_gpt2" "$TMP/hf_gpt2b"
cmp -s "$TMP/hf_gpt/model.safetensors" "$TMP/hf_gpt2/model.safetensors" && fail "iterations 2 and 4 exported the same weights"

# --- llama tp2 x dp2, distributed optimizer: fp32 and bf16 ---
export_ok "$TMP/e4.log" --load "$TMP/llama" --output "$TMP/hf_llama"
check verify "$TMP/hf_llama" "$TMP/llama/iter_0000003" llama F32
export_ok "$TMP/e5.log" --load "$TMP/llama" --output "$TMP/hf_llama16" --dtype bf16
check verify "$TMP/hf_llama16" "$TMP/llama/iter_0000003" llama BF16
b32=$("$PY" "$TMP/check.py" bytes "$TMP/hf_llama"); b16=$("$PY" "$TMP/check.py" bytes "$TMP/hf_llama16")
f32=$(stat -c %s "$TMP/hf_llama/model.safetensors"); f16=$(stat -c %s "$TMP/hf_llama16/model.safetensors")
echo "llama weights: fp32 $b32 bytes (file $f32), bf16 $b16 bytes (file $f16)"
[ $((b16 * 2)) -eq "$b32" ] || fail "bf16 data is not half of fp32"
awk -v a="$f16" -v b="$f32" 'BEGIN{exit !(a < 0.51 * b)}' || fail "bf16 file not about half the fp32 file"

# --- shards: 1 MB per file (HF's units) -> several files + an index, same tensors ---
export_ok "$TMP/e6.log" --load "$TMP/gpt" --output "$TMP/hf_gpt_sh" --max-shard-size 1MB
n_sh=$("$PY" "$TMP/check.py" shards "$TMP/hf_gpt_sh") || fail "no usable index"
[ "$n_sh" -ge 3 ] && [ -f "$TMP/hf_gpt_sh/model-00001-of-0000$n_sh.safetensors" ] && [ ! -e "$TMP/hf_gpt_sh/model.safetensors" ] \
  || fail "expected >= 3 shards named model-0000K-of-0000N: $(ls "$TMP/hf_gpt_sh")"
for f in "$TMP"/hf_gpt_sh/model-*.safetensors; do
  [ "$(stat -c %s "$f")" -le 1100000 ] || fail "$f is larger than the shard size allows"
done
check verify "$TMP/hf_gpt_sh" "$TMP/gpt/iter_0000004" gpt F32
check same "$TMP/hf_gpt_sh" "$TMP/hf_gpt"

# --- tokenizers: GPT-2 BPE files copied; a tokenizer.json copied; changed files refused ---
if [ -f data/gpt2-vocab.json ] && [ -f data/gpt2-merges.txt ]; then
  BPE=(--config configs/gpt-tiny.yaml --train-iters 1 --micro-batch-size 1 --global-batch-size 1 --seq-length 32
       --set model.vocab=50257 --set model.max_position=64)
  train bpe 1 "${BPE[@]}" --set data.tokenizer=gpt2bpe --set data.vocab=data/gpt2-vocab.json --set data.merges=data/gpt2-merges.txt
  export_ok "$TMP/e7.log" --load "$TMP/bpe" --output "$TMP/hf_bpe" --dtype bf16
  cmp "$TMP/hf_bpe/vocab.json" data/gpt2-vocab.json && cmp "$TMP/hf_bpe/merges.txt" data/gpt2-merges.txt || fail "tokenizer files differ"
  check verify "$TMP/hf_bpe" "$TMP/bpe/iter_0000001" gpt BF16 \
    '{"vocab_size": 50257, "n_positions": 64, "n_ctx": 64, "bos_token_id": 50256, "eos_token_id": 50256}'
  "$PY" - "$TMP/hf_bpe/tokenizer_config.json" <<'EOF' || fail "tokenizer_config.json"
import json, sys
t = json.load(open(sys.argv[1]))
want = {'tokenizer_class': 'GPT2Tokenizer', 'model_max_length': 64, 'bos_token': '<|endoftext|>',
        'eos_token': '<|endoftext|>', 'unk_token': '<|endoftext|>'}
assert all(t.get(k) == v for k, v in want.items()), t
print('tokenizer_config.json ok')
EOF
  # a tokenizer.json (Hugging Face's format) built from the same vocabulary
  "$PY" - data/gpt2-vocab.json data/gpt2-merges.txt "$TMP/tokenizer.json" <<'EOF'
import json, sys
vocab = json.load(open(sys.argv[1], encoding='utf-8'))
merges = [l.rstrip('\n') for l in open(sys.argv[2], encoding='utf-8') if l.strip() and not l.startswith('#version')]
json.dump({'version': '1.0', 'added_tokens': [{'id': 50256, 'content': '<|endoftext|>', 'special': True,
           'single_word': False, 'lstrip': False, 'rstrip': False, 'normalized': False}],
           'normalizer': None, 'pre_tokenizer': {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True,
           'use_regex': True}, 'post_processor': None, 'decoder': {'type': 'ByteLevel'},
           'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': '',
                     'end_of_word_suffix': '', 'fuse_unk': False, 'vocab': vocab, 'merges': merges}},
          open(sys.argv[3], 'w', encoding='utf-8'))
EOF
  train hftok 1 "${BPE[@]}" --set data.tokenizer=hf --set "data.vocab=$TMP/tokenizer.json"
  export_ok "$TMP/e8.log" --load "$TMP/hftok" --output "$TMP/hf_hftok"
  cmp "$TMP/hf_hftok/tokenizer.json" "$TMP/tokenizer.json" || fail "tokenizer.json differs"
  grep -q '"tokenizer_class": "PreTrainedTokenizerFast"' "$TMP/hf_hftok/tokenizer_config.json" \
    && grep -q '"eos_token": "<|endoftext|>"' "$TMP/hf_hftok/tokenizer_config.json" || fail "tokenizer_config.json of hf"
  [ ! -e "$TMP/hf_hftok/vocab.json" ] || fail "vocab.json written for an hf tokenizer"
  echo " " >>"$TMP/tokenizer.json" # not the file the model was trained with any more
  export_fails 1 "CRC-32C" "$TMP/hf_bad_tok" --load "$TMP/hftok" --output "$TMP/hf_bad_tok"
else
  echo "data/gpt2-vocab.json missing (scripts/fetch-gpt2-tokenizer.sh): tokenizer file cases skipped"
fi

# --- errors ---
export_fails 1 "no such folder" "$TMP/o1" --load "$TMP/nowhere" --output "$TMP/o1"
export_fails 1 "no complete save of --iteration 3" "$TMP/o1" --load "$TMP/gpt" --iteration 3 --output "$TMP/o1"
mkdir -p "$TMP/corrupt" && cp -r "$TMP/gpt/iter_0000004" "$TMP/corrupt/" && echo 4 >"$TMP/corrupt/latest_checkpointed_iteration.txt"
"$PY" - "$TMP/corrupt/iter_0000004/rank_00003.safetensors" <<'EOF'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)
EOF
export_fails 1 "CRC-32C" "$TMP/o2" --load "$TMP/corrupt" --output "$TMP/o2"
rm "$TMP/corrupt/iter_0000004/rank_00001.safetensors"
export_fails 1 "rank_00001.safetensors" "$TMP/o2" --load "$TMP/corrupt" --output "$TMP/o2"
echo '{' >"$TMP/corrupt/iter_0000004/manifest.json"
export_fails 1 "manifest.json" "$TMP/o2" --load "$TMP/corrupt" --output "$TMP/o2"
export_fails 2 "--format" "$TMP/o3" --load "$TMP/gpt" --format onnx --output "$TMP/o3"
export_fails 2 "--dtype" "$TMP/o3" --load "$TMP/gpt" --dtype fp8 --output "$TMP/o3"
export_fails 2 "--output" "$TMP/o3" --load "$TMP/gpt"
export_fails 2 "--max-shard-size" "$TMP/o3" --load "$TMP/gpt" --output "$TMP/o3" --max-shard-size 0
train untied 1 --config configs/gpt-tiny.yaml --train-iters 1 --micro-batch-size 1 --global-batch-size 1 --seq-length 16 \
  --set model.tie_embeddings=false
export_fails 1 "model.tie_embeddings" "$TMP/o4" --load "$TMP/untied" --output "$TMP/o4"
# an existing non-empty output: refused and untouched; --force replaces it
mkdir -p "$TMP/busy" && echo keep >"$TMP/busy/mine.txt"
rc=0; "$MTRAIN" export --load "$TMP/gpt" --output "$TMP/busy" >"$TMP/err.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "not empty" "$TMP/err.log" && grep -q -- "--force" "$TMP/err.log" || { cat "$TMP/err.log"; fail "non-empty output: exit $rc"; }
[ "$(cat "$TMP/busy/mine.txt")" = keep ] && [ ! -e "$TMP/busy.tmp" ] && [ "$(ls "$TMP/busy")" = mine.txt ] || fail "non-empty output was touched"
echo "error ok (exit 1): $(head -n1 "$TMP/err.log" | cut -c1-170)"
# --force over a folder holding the save itself is refused (it would delete the checkpoint)
rc=0; "$MTRAIN" export --load "$TMP/gpt" --output "$TMP/gpt" --force >"$TMP/err.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "delete the save" "$TMP/err.log" && [ -f "$TMP/gpt/iter_0000004/manifest.json" ] || { cat "$TMP/err.log"; fail "--force over the checkpoint: exit $rc"; }
# --force with a failing export leaves the old folder as it was
rc=0; "$MTRAIN" export --load "$TMP/corrupt" --output "$TMP/busy" --force >"$TMP/err.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && [ "$(ls "$TMP/busy")" = mine.txt ] && [ ! -e "$TMP/busy.tmp" ] || fail "a failed --force export touched the old folder"
export_ok "$TMP/e9.log" --load "$TMP/gpt" --output "$TMP/busy" --force
[ ! -e "$TMP/busy/mine.txt" ] && [ ! -e "$TMP/busy.tmp" ] || fail "--force did not replace the folder"
cmp "$TMP/busy/model.safetensors" "$TMP/hf_gpt/model.safetensors" || fail "--force export differs"
# an empty existing folder is fine without --force
mkdir -p "$TMP/empty"
export_ok "$TMP/e10.log" --load "$TMP/llama" --output "$TMP/empty/"
cmp "$TMP/empty/model.safetensors" "$TMP/hf_llama/model.safetensors" || fail "export into an empty folder differs"
T2=$(date +%s.%N)
awk -v a="$T0" -v b="$T1" -v c="$T2" 'BEGIN{printf "hf_export: ok (training %.1f s, exports and checks %.1f s)\n", b-a, c-b}'
