/* test_tensorboard.c — TensorBoard event encoding against bytes worked out by hand from the
 * specs (protobuf wire format, TFRecord framing), with the masked CRC-32Cs recomputed here by an
 * independent bit-at-a-time CRC-32C (itself checked on RFC 3720's check values); the writer's
 * file: name, first record, and a write failure (/dev/full) reported as MT_ERR_IO naming the file. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/tfevents.h"
#include "test/test.h"
#include "train/tensorboard.h"

/* CRC-32C one bit at a time (reflected polynomial 0x82F63B78), nothing shared with core/crc32c.c */
static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return c ^ 0xffffffffu;
}
static uint32_t mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }
static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static void test_crc_and_varint(void) {
    uint8_t zeros[32] = {0};
    CHECK(crc_bitwise((const uint8_t *)"123456789", 9) == 0xE3069283u); /* RFC 3720 check value */
    CHECK(crc_bitwise(zeros, 32) == 0x8A9136AAu);                        /* RFC 3720 B.4: 32 zero bytes */
    CHECK(mt_tfevents_masked_crc("123456789", 9) == mask(0xE3069283u));
    uint8_t b[10];
    CHECK(mt_tfevents_varint(b, 0) == 1 && b[0] == 0);
    CHECK(mt_tfevents_varint(b, 127) == 1 && b[0] == 0x7f);
    CHECK(mt_tfevents_varint(b, 300) == 2 && b[0] == 0xac && b[1] == 0x02); /* 300 = 0b10_0101100 */
    CHECK(mt_tfevents_varint(b, UINT64_MAX) == 10 && b[0] == 0xff && b[9] == 0x01);
}

/* Event { wall_time: 1.5, step: 300, summary { value { tag: "a", simple_value: 1.0 } } } */
static void test_scalar_record(void) {
    static const uint8_t want_event[24] = {
        0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, /* field 1 (wall_time) fixed64: 1.5 = 0x3FF8000000000000 LE */
        0x10, 0xac, 0x02,                    /* field 2 (step) varint: 300 */
        0x2a, 0x0a,                          /* field 5 (summary), 10 bytes */
        0x0a, 0x08,                          /*   Summary field 1 (value), 8 bytes */
        0x0a, 0x01, 'a',                     /*     Value field 1 (tag) "a" */
        0x15, 0, 0, 0x80, 0x3f,              /*     Value field 2 (simple_value) fixed32: 1.0f */
    };
    uint8_t ev[64], rec[128];
    const size_t n = mt_tfevents_scalar_event(ev, sizeof ev, 1.5, 300, "a", 1.0f);
    CHECKF(n == sizeof want_event && !memcmp(ev, want_event, n), "event of %zu bytes differs", n);
    const size_t nr = mt_tfevents_record(rec, sizeof rec, want_event, sizeof want_event);
    CHECK(nr == 16 + sizeof want_event);
    static const uint8_t want_len[8] = {24, 0, 0, 0, 0, 0, 0, 0};
    CHECK(!memcmp(rec, want_len, 8));
    /* both CRCs recomputed here, and the values an independent computation gave (Python, bitwise) */
    CHECK(le32(rec + 8) == mask(crc_bitwise(want_len, 8)) && le32(rec + 8) == 0x224b7fa3u);
    CHECK(!memcmp(rec + 12, want_event, sizeof want_event));
    CHECK(le32(rec + 36) == mask(crc_bitwise(want_event, 24)) && le32(rec + 36) == 0x0b97d5e3u);
    /* too small a buffer: 0, never an overrun */
    CHECK(mt_tfevents_scalar_event(ev, 23, 1.5, 300, "a", 1.0f) == 0);
    CHECK(mt_tfevents_record(rec, 39, want_event, 24) == 0);
    /* step 0 is omitted (proto3 default); negative steps are 10-byte varints */
    CHECK(mt_tfevents_scalar_event(ev, sizeof ev, 1.5, 0, "a", 1.0f) == 21 && ev[9] == 0x2a);
    CHECK(mt_tfevents_scalar_event(ev, sizeof ev, 1.5, -1, "a", 1.0f) == 32 && ev[9] == 0x10 && ev[19] == 0x01);
}

static void test_version_event(void) {
    uint8_t ev[64];
    const size_t n = mt_tfevents_version_event(ev, sizeof ev, 1.5);
    /* wall_time, then field 3 (file_version) length-delimited: 0x1a, 13, "brain.Event:2" */
    CHECK(n == 24 && ev[0] == 0x09 && ev[9] == 0x1a && ev[10] == 13 && !memcmp(ev + 11, "brain.Event:2", 13));
}

static void test_writer(void) {
    char dir[] = "/tmp/mt_test_tb_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    mt_logging_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.tensorboard_dir, sizeof cfg.tensorboard_dir, "%s/a/b", dir); /* created, with parents */
    cfg.tensorboard_interval = 1;
    cfg.tensorboard_learning_rate = 1;
    mt_tensorboard tb;
    CHECKF(mt_tensorboard_open(&tb, &cfg, 1, 0) == MT_OK, "%s", mt_last_error());
    const mt_tb_step s = {.iteration = 1, .consumed_samples = 8, .global_batch = 8, .lr = 1e-3, .lm_loss = 5.5,
                          .grad_norm = 2};
    CHECKF(mt_tensorboard_log_step(&tb, &s) == MT_OK, "%s", mt_last_error());
    CHECKF(mt_tensorboard_close(&tb) == MT_OK, "%s", mt_last_error());
    CHECK(mt_tensorboard_close(&tb) == MT_OK); /* twice is harmless */
    /* the name: events.out.tfevents.<10-digit seconds>.<host>.<pid>.<counter> */
    char host[256] = "", want_tail[300];
    gethostname(host, sizeof host);
    snprintf(want_tail, sizeof want_tail, ".%s.%ld.0", host, (long)getpid());
    CHECK_STR_CONTAINS(tb.path, "/a/b/events.out.tfevents.");
    const char *secs = strstr(tb.path, "tfevents.") + 9;
    CHECK(strlen(secs) > 10 && secs[10] == '.' && !strcmp(secs + 10, want_tail));
    FILE *f = fopen(tb.path, "rb");
    uint8_t buf[4096];
    const size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n > 40 && buf[0] == 24 && le32(buf + 8) == mask(crc_bitwise(buf, 8)));
    CHECK(n > 40 && !memcmp(buf + 12 + 11, "brain.Event:2", 13) && le32(buf + 36) == mask(crc_bitwise(buf + 12, 24)));
    remove(tb.path);
    char p[300];
    snprintf(p, sizeof p, "%s/a/b", dir);
    rmdir(p);
    snprintf(p, sizeof p, "%s/a", dir);
    rmdir(p);
    rmdir(dir);

    /* a folder that cannot be created: MT_ERR_IO naming it and the key */
    snprintf(cfg.tensorboard_dir, sizeof cfg.tensorboard_dir, "/proc/self/no/such");
    CHECK(mt_tensorboard_open(&tb, &cfg, 1, 0) == MT_ERR_IO);
    CHECK_STR_CONTAINS(mt_last_error(), "/proc/self/no/such");
    CHECK_STR_CONTAINS(mt_last_error(), "tensorboard_dir");

    /* a full disk (/dev/full: every write fails with ENOSPC): MT_ERR_IO naming the file at the flush */
    memset(&tb, 0, sizeof tb);
    tb.cfg = &cfg;
    tb.file = fopen("/dev/full", "wb");
    snprintf(tb.path, sizeof tb.path, "/dev/full");
    if (!tb.file) return;
    mt_status st = mt_tensorboard_log_step(&tb, &s);
    mt_iter_metrics m;
    memset(&m, 0, sizeof m);
    m.iteration = 1;
    m.mfu = m.bubble = -1;
    if (st == MT_OK) st = mt_tensorboard_log_timing(&tb, &m, 1);
    CHECK(st == MT_ERR_IO);
    CHECK_STR_CONTAINS(mt_last_error(), "/dev/full");
    CHECK_STR_CONTAINS(mt_last_error(), "No space left on device");
    CHECK_STR_CONTAINS(mt_last_error(), "--tensorboard-dir");
    mt_tensorboard_close(&tb);
    CHECK(tb.file == NULL);
}

int main(void) {
    test_crc_and_varint();
    test_scalar_record();
    test_version_event();
    test_writer();
    TEST_MAIN_END();
}
