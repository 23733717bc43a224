/* test_safetensors.c — CRC-32C (RFC 3720 vectors; the SSE4.2 and table paths agree on random
 * buffers, offsets and lengths; incremental == one shot) and safetensors (core/ckpt/safetensors.h):
 * a written file reads back field for field and byte for byte with an 8-byte aligned header and
 * the CRC of the bytes on disk; a full disk, a missing folder and a too-large file are MT_ERR_IO
 * naming the path and leave no partial file; hand-made corrupt headers are each MT_ERR_DATA
 * naming what is wrong; every truncation and byte flip of a valid file is rejected or parsed
 * consistently, never a crash. Files go to a mkdtemp folder under /tmp, removed at the end. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ckpt/safetensors.h"
#include "core/crc32c.h"
#include "core/crc32c_internal.h"
#include "test/test.h"
#include "test/test_files.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}

static void test_crc(void) {
    uint8_t buf[32];
    struct { int fill; uint32_t want; } vec[] = {{0x00, 0x8A9136AAu}, {0xFF, 0x62A8AB43u}, {-1, 0x46DD794Eu}, {-2, 0x113FDB5Cu}};
    for (size_t v = 0; v < sizeof vec / sizeof vec[0]; v++) {
        for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(vec[v].fill == -1 ? i : vec[v].fill == -2 ? 31 - i : vec[v].fill);
        CHECKF(mt_crc32c(0, buf, 32) == vec[v].want, "vector %zu: %08x, want %08x", v, mt_crc32c(0, buf, 32), vec[v].want);
        CHECKF(mt_crc32c_sw(0, buf, 32) == vec[v].want, "vector %zu (table): %08x", v, mt_crc32c_sw(0, buf, 32));
    }
    CHECK(mt_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(mt_crc32c_sw(0, "123456789", 9) == 0xE3069283u);
    CHECK(mt_crc32c(0, NULL, 0) == 0 && mt_crc32c(0x1234u, "", 0) == 0x1234u);
    printf("crc32c: %s\n", mt_crc32c_uses_hw() ? "SSE4.2 path" : "table path (this build has no SSE4.2: hw == sw is trivial)");

    enum { N = 8192 + 64 };
    static uint8_t big[N];
    for (int i = 0; i < N; i++) big[i] = (uint8_t)rnd();
    int bad_hw = 0, bad_inc = 0;
    for (int t = 0; t < 3000; t++) {
        size_t off = rnd() % 64, len = t < 64 ? (size_t)t : rnd() % (N - 64 + 1);
        uint32_t seed = t % 3 ? 0 : (uint32_t)rnd();
        uint32_t hw = mt_crc32c(seed, big + off, len), sw = mt_crc32c_sw(seed, big + off, len);
        if (hw != sw && bad_hw++ < 5) fprintf(stderr, "off %zu len %zu: hw %08x sw %08x\n", off, len, hw, sw);
        size_t a = len ? rnd() % (len + 1) : 0, b = a + (len - a ? rnd() % (len - a + 1) : 0);
        uint32_t i1 = mt_crc32c(mt_crc32c(mt_crc32c(seed, big + off, a), big + off + a, b - a), big + off + b, len - b);
        uint32_t i2 = mt_crc32c_sw(mt_crc32c(mt_crc32c_sw(seed, big + off, a), big + off + a, b - a), big + off + b, len - b);
        if ((i1 != hw || i2 != hw) && bad_inc++ < 5) fprintf(stderr, "len %zu split %zu/%zu: %08x %08x vs %08x\n", len, a, b, i1, i2, hw);
    }
    CHECKF(bad_hw == 0, "%d buffers where the SSE4.2 and table CRCs differ", bad_hw);
    CHECKF(bad_inc == 0, "%d buffers where the incremental CRC differs from one shot", bad_inc);
    /* a one-bit change changes the CRC */
    uint32_t c0 = mt_crc32c(0, big, 1000);
    big[500] ^= 4;
    CHECK(mt_crc32c(0, big, 1000) != c0);
}

/* the parsed header obeys its invariants: sorted, in range, sizes match, names found */
static int header_consistent(const mt_st_header *h, size_t n_bytes) {
    for (int i = 0; i < h->n_entries; i++) {
        const mt_st_entry *e = &h->entries[i];
        uint64_t size = (uint64_t)e->elem_bytes;
        for (int d = 0; d < e->n_dims; d++) size *= (uint64_t)e->shape[d];
        if (e->begin < h->data_start || e->end < e->begin || e->end > n_bytes || e->end - e->begin != size) return 0;
        if (i && e->begin < h->entries[i - 1].end) return 0;
        if (mt_st_find(h, e->name) != e) return 0;
    }
    return h->data_start >= 8 && h->data_start <= n_bytes;
}

#define NT 6
static float w_f32[15];
static uint16_t w_bf16[7];
static int32_t w_i32[12];
static int64_t w_i64 = -77;
static uint8_t w_u8[3] = {1, 2, 250};

static void test_roundtrip(const char *dir) {
    for (int i = 0; i < 15; i++) w_f32[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 7; i++) w_bf16[i] = (uint16_t)(0x3f80 + i);
    for (int i = 0; i < 12; i++) w_i32[i] = -i * 1000003;
    mt_st_tensor t[NT] = {
        {"wte.weight", "F32", 2, {3, 5}, w_f32, sizeof w_f32},
        {"h.0.ln_1.bias", "BF16", 1, {7}, w_bf16, sizeof w_bf16},
        {"empty", "F32", 2, {0, 4}, NULL, 0},
        {"tokens", "I32", 3, {2, 2, 3}, w_i32, sizeof w_i32},
        {"step", "I64", 0, {0}, &w_i64, sizeof w_i64},
        {"odd \"name\"\\ \x01 \xc3\xa9", "U8", 1, {3}, w_u8, sizeof w_u8},
    };
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    uint32_t crc = 0;
    uint64_t file_bytes = 0, data_start = 0;
    for (int pass = 0; pass < 2; pass++) { /* the second pass truncates the first file */
        mt_status st = mt_st_write(path, t, NT, pass == 0, &crc, &file_bytes, &data_start);
        CHECKF(st == MT_OK, "write: %s", mt_last_error());
    }
    size_t n = 0;
    uint8_t *buf = test_read_file(path, &n);
    CHECK(buf != NULL);
    if (!buf) return;
    CHECKF(n == file_bytes, "file is %zu bytes, writer said %llu", n, (unsigned long long)file_bytes);
    CHECKF(data_start % 8 == 0 && data_start > 8, "data_start %llu", (unsigned long long)data_start);
    uint64_t n_hdr = 0;
    for (int k = 7; k >= 0; k--) n_hdr = n_hdr << 8 | buf[k];
    CHECK(n_hdr + 8 == data_start && n_hdr % 8 == 0);
    CHECK(buf[8] == '{' && !memcmp(buf + 8, "{\"__metadata__\":{\"format\":\"pt\"}", 31));
    size_t last = (size_t)data_start - 1;
    while (last > 8 && buf[last] == ' ') last--;
    CHECKF(buf[last] == '}' && data_start - 1 - last < 8, "header pads with %zu spaces after '%c'",
           (size_t)(data_start - 1 - last), buf[last]);
    CHECKF(mt_crc32c(0, buf, n) == crc, "CRC of the file %08x, writer said %08x", mt_crc32c(0, buf, n), crc);
    CHECK(mt_crc32c_sw(0, buf, n) == crc);

    mt_st_header h;
    mt_status st = mt_st_parse(buf, n, path, &h);
    CHECKF(st == MT_OK, "parse: %s", mt_last_error());
    CHECK(h.n_entries == NT && h.data_start == data_start && header_consistent(&h, n));
    uint64_t at = data_start;
    for (int i = 0; st == MT_OK && i < NT && i < h.n_entries; i++) {
        const mt_st_entry *e = mt_st_find(&h, t[i].name);
        CHECKF(e == &h.entries[i], "tensor '%s' is not entry %d (data order)", t[i].name, i);
        if (!e) continue;
        CHECK(!strcmp(e->name, t[i].name) && !strcmp(e->dtype, t[i].dtype));
        CHECK(e->n_dims == t[i].n_dims && !memcmp(e->shape, t[i].shape, sizeof(int64_t) * (size_t)t[i].n_dims));
        CHECK(e->elem_bytes == (i == 1 ? 2 : i == 4 ? 8 : i == 5 ? 1 : 4));
        CHECKF(e->begin == at && e->end == at + t[i].n_bytes, "'%s' at [%llu, %llu), want %llu + %zu", e->name,
               (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)at, t[i].n_bytes);
        CHECK(t[i].n_bytes == 0 || !memcmp(buf + e->begin, t[i].data, t[i].n_bytes));
        at += t[i].n_bytes;
    }
    CHECK(at == n);
    CHECK(mt_st_find(&h, "missing") == NULL && mt_st_find(&h, "") == NULL);
    mt_st_header_free(&h);
    CHECK(h.entries == NULL && h.n_entries == 0);

    /* every truncation is rejected (the last tensor's bytes are always missing); never a crash */
    int n_bad = 0;
    size_t first_bad = 0;
    for (size_t len = 0; len < n; len++) {
        uint8_t *cut = malloc(len ? len : 1); /* exact size: a read past it is a bug ASan sees */
        memcpy(cut, buf, len);
        st = mt_st_parse(len ? cut : NULL, len, "cut.safetensors", &h);
        if ((st != MT_ERR_DATA || strncmp(mt_last_error(), "cut.safetensors: ", 17)) && !n_bad++) first_bad = len;
        mt_st_header_free(&h);
        free(cut);
    }
    CHECKF(n_bad == 0, "%d truncations not rejected with MT_ERR_DATA, the first at %zu bytes: %s", n_bad, first_bad,
           mt_last_error());
    /* every byte of the header flipped to a few values: rejected, or a consistent header */
    int n_ok = 0, n_incons = 0;
    const uint8_t vals[] = {0, '"', '}', ']', '-', '9', ' ', 0xff};
    for (size_t i = 0; i < data_start; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            uint8_t keep = buf[i];
            buf[i] = vals[v];
            st = mt_st_parse(buf, n, "flip", &h);
            if (st == MT_OK) n_ok++, n_incons += !header_consistent(&h, n);
            else if (st != MT_ERR_DATA) n_incons++;
            mt_st_header_free(&h);
            buf[i] = keep;
        }
    CHECKF(n_incons == 0, "%d flips parsed to an inconsistent header or another status", n_incons);
    CHECKF(n_ok > 0, "no flip parsed (a flip inside the padding or a name should)");
    free(buf);
    unlink(path);
}

static void test_write_errors(const char *dir) {
    float x[4] = {1, 2, 3, 4};
    mt_st_tensor t[2] = {{"a", "F32", 1, {4}, x, sizeof x}, {"b", "F32", 2, {2, 2}, x, sizeof x}};
    struct stat sb;
    mt_status st = mt_st_write("/dev/full", t, 2, 1, NULL, NULL, NULL);
    CHECKF(st == MT_ERR_IO, "/dev/full: %s", mt_status_name(st));
    CHECK_STR_CONTAINS(mt_last_error(), "/dev/full: ");
    CHECK_STR_CONTAINS(mt_last_error(), "no space left on device");
    CHECK_STR_CONTAINS(mt_last_error(), "disk is full");
    CHECK_STR_CONTAINS(mt_last_error(), "nothing was replaced");
    CHECK(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode)); /* a device is never removed */

    char path[512];
    snprintf(path, sizeof path, "%s/no/such/dir/x.safetensors", dir);
    st = mt_st_write(path, t, 2, 0, NULL, NULL, NULL);
    CHECK(st == MT_ERR_IO);
    CHECK_STR_CONTAINS(mt_last_error(), path);
    CHECK_STR_CONTAINS(mt_last_error(), "No such file or directory");

    /* a write that fails half way (file size limit: EFBIG) removes the partial file */
    snprintf(path, sizeof path, "%s/big.safetensors", dir);
    static uint8_t big[1 << 16];
    mt_st_tensor tb = {"big", "U8", 1, {sizeof big}, big, sizeof big};
    struct rlimit old, lim;
    if (getrlimit(RLIMIT_FSIZE, &old) == 0) {
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        lim = old;
        lim.rlim_cur = 4096;
        if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            st = mt_st_write(path, &tb, 1, 1, NULL, NULL, NULL);
            setrlimit(RLIMIT_FSIZE, &old);
            CHECKF(st == MT_ERR_IO, "over RLIMIT_FSIZE: %s", mt_status_name(st));
            CHECK_STR_CONTAINS(mt_last_error(), path);
            CHECK_STR_CONTAINS(mt_last_error(), "partial file is removed");
            CHECKF(access(path, F_OK) != 0 && errno == ENOENT, "partial file %s left behind", path);
        }
        signal(SIGXFSZ, prev);
    }

    /* bad arguments: MT_ERR_INTERNAL naming the tensor, and no file is created */
    snprintf(path, sizeof path, "%s/args.safetensors", dir);
    mt_st_tensor bad[] = {{"a", "F32", 1, {3}, x, sizeof x}, {"a", "F33", 1, {4}, x, sizeof x},
                          {"a", "F32", 1, {-4}, x, sizeof x}, {"__metadata__", "F32", 1, {4}, x, sizeof x},
                          {"a", "F32", 1, {4}, NULL, sizeof x}, {"a", "F32", 9, {4}, x, sizeof x}};
    const char *why[] = {"needs 12 bytes but 16", "unknown dtype 'F33'", "bad shape", "reserved", "(NULL)", "9 dims"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = mt_st_write(path, &bad[i], 1, 0, NULL, NULL, NULL);
        CHECKF(st == MT_ERR_INTERNAL, "bad tensor %zu: %s", i, mt_status_name(st));
        CHECK_STR_CONTAINS(mt_last_error(), why[i]);
        CHECK(access(path, F_OK) != 0);
    }
    mt_st_tensor dup[2] = {t[0], t[0]};
    CHECK(mt_st_write(path, dup, 2, 0, NULL, NULL, NULL) == MT_ERR_INTERNAL);
    CHECK_STR_CONTAINS(mt_last_error(), "two tensors are called 'a'");
    CHECK(access(path, F_OK) != 0);
}

/* buf = le64(len or n_hdr_override) + json + n_data zero bytes */
static mt_status parse_json(const char *json, size_t n_data, uint64_t n_hdr_override, mt_st_header *h) {
    size_t nj = strlen(json), n = 8 + nj + n_data;
    uint8_t *b = calloc(n, 1);
    uint64_t nh = n_hdr_override ? n_hdr_override : nj;
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)(nh >> (8 * k));
    memcpy(b + 8, json, nj);
    mt_status st = mt_st_parse(b, n, "bad.safetensors", h);
    free(b);
    return st;
}

#define E(dt, sh, of) "\"dtype\":\"" dt "\",\"shape\":" sh ",\"data_offsets\":" of

static void test_corrupt(void) {
    static const struct { const char *json; size_t n_data; uint64_t n_hdr; const char *w1, *w2; } cases[] = {
        {"{", 0, 1ull << 40, "header length 1099511627776", "over the"},
        {"{}", 0, 300, "header length 300", "past the end of the file"},
        {"{\"a\":", 0, 0, "bad.safetensors: safetensors header:1:", "ended"},
        {"[1,2]", 0, 0, "the JSON is an array", "not an object"},
        {"{\"a\":{" E("F33", "[2]", "[0,8]") "}}", 8, 0, "unknown dtype 'F33'", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[3]", "[0,8]") "}}", 8, 0, "do not match", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[2]", "[8,16]") "}}", 8, 0, "past the end of the data", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[2]", "[0,8]") "},\"b\":{" E("F32", "[2]", "[4,12]") "}}", 16, 0, "overlap", "tensor 'a'"},
        {"{\"a\":{" E("F32", "[2]", "[0,8]") "},\"a\":{" E("F32", "[2]", "[8,16]") "}}", 16, 0, "duplicate tensor name", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[-2]", "[0,8]") "}}", 8, 0, "negative dim", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "\"2\"", "[0,8]") "}}", 8, 0, "shape is a string, not an array", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[2.5]", "[0,8]") "}}", 8, 0, "shape[0] is a fraction", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[1,1,1,1,1,1,1,1,2]", "[0,8]") "}}", 8, 0, "more than 8", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[4611686018427387904,4]", "[0,8]") "}}", 8, 0, "overflows", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[2]", "[8,0]") "}}", 8, 0, "end before", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[2]", "[0]") "}}", 8, 0, "data_offsets is not an array", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[2]", "[-8,0]") "}}", 8, 0, "non-negative", "(tensor 'a')"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, "no \"dtype\" field", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[2]", "[0,8]") ",\"x\":1}}", 8, 0, "unknown field 'x'", "(tensor 'a')"},
        {"{\"a\":{" E("F32", "[2]", "[0,8]") ",\"dtype\":\"F32\"}}", 8, 0, "appears twice", "(tensor 'a')"},
        {"{\"a\":[1]}", 0, 0, "the entry is an array", "(tensor 'a')"},
        {"{\"__metadata__\":[]}", 0, 0, "__metadata__ is an array", "not an object of strings"},
        {"{\"__metadata__\":{\"k\":1}}", 0, 0, "__metadata__ value 'k' is a number", "not a string"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, "__metadata__ appears twice", "header:"},
        {"{\"a\\u0000b\":{" E("F32", "[2]", "[0,8]") "}}", 8, 0, "with a NUL byte", "(tensor 'a')"},
        {"{\"\":{" E("F32", "[2]", "[0,8]") "}}", 8, 0, "is 0 bytes", "(tensor '')"},
    };
    mt_st_header h;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_status st = parse_json(cases[i].json, cases[i].n_data, cases[i].n_hdr, &h);
        CHECKF(st == MT_ERR_DATA, "case %zu (%s): %s", i, cases[i].json, mt_status_name(st));
        CHECKF(!strncmp(mt_last_error(), "bad.safetensors: ", 17), "case %zu: %s", i, mt_last_error());
        CHECK_STR_CONTAINS(mt_last_error(), cases[i].w1);
        CHECK_STR_CONTAINS(mt_last_error(), cases[i].w2);
        CHECK(h.entries == NULL && h.n_entries == 0);
        mt_st_header_free(&h);
    }
    char json[512], name[200];
    memset(name, 'n', sizeof name - 1), name[sizeof name - 1] = 0;
    snprintf(json, sizeof json, "{\"%s\":{" E("F32", "[2]", "[0,8]") "}}", name);
    CHECK(parse_json(json, 8, 0, &h) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "names are 1 to 159 bytes");
    /* a 5-byte file */
    CHECK(mt_st_parse((const uint8_t *)"\x02\0\0\0\0", 5, "short.st", &h) == MT_ERR_DATA);
    CHECK_STR_CONTAINS(mt_last_error(), "short.st: safetensors header: the file is 5 bytes, too short");

    /* accepted: gaps, out-of-order offsets (sorted by begin), zero-size entries, metadata, 159-byte names */
    mt_status st = parse_json("{\"b\":{" E("BF16", "[2,2]", "[24,32]") "},\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
                              "\"z\":{" E("U8", "[0]", "[8,8]") "},\"a\":{" E("I32", "[]", "[4,8]") "},"
                              "\"e\":{" E("F64", "[0,3]", "[8,8]") "}}  ", 40, 0, &h);
    CHECKF(st == MT_OK, "%s", mt_last_error());
    const char *order[] = {"a", "e", "z", "b"};
    CHECK(h.n_entries == 4);
    for (int i = 0; st == MT_OK && i < 4 && i < h.n_entries; i++)
        CHECKF(!strcmp(h.entries[i].name, order[i]), "entry %d is '%s'", i, h.entries[i].name);
    if (st == MT_OK && h.n_entries == 4) {
        CHECK(h.entries[0].n_dims == 0 && h.entries[0].begin == h.data_start + 4 && h.entries[0].elem_bytes == 4);
        CHECK(h.entries[3].shape[1] == 2 && h.entries[3].end == h.data_start + 32 && !strcmp(h.entries[3].dtype, "BF16"));
    }
    mt_st_header_free(&h);
    name[MT_ST_NAME_MAX - 1] = 0;
    snprintf(json, sizeof json, "{\"%s\":{" E("F32", "[2]", "[0,8]") "}}", name);
    CHECKF(parse_json(json, 8, 0, &h) == MT_OK && h.n_entries == 1 && strlen(h.entries[0].name) == MT_ST_NAME_MAX - 1,
           "%s", mt_last_error());
    mt_st_header_free(&h);
    CHECK(parse_json("{}", 0, 0, &h) == MT_OK && h.n_entries == 0 && h.data_start == 10);
    mt_st_header_free(&h);
}

int main(void) {
    test_crc();
    char dir[] = "/tmp/mt_test_safetensors.XXXXXX";
    CHECKF(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
    test_roundtrip(dir);
    test_write_errors(dir);
    test_corrupt();
    CHECKF(rmdir(dir) == 0, "%s not empty: %s", dir, strerror(errno));
    TEST_MAIN_END();
}
